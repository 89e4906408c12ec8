// Cycles: a live chart of each cycle's duration split by action, binds/evictions per cycle, and the
// latest cycles; new cycles arrive from the live feed without a reload.
//
// Updates are incremental: a new cycle adds one bar to each chart (and drops the oldest past KEEP) and
// one row to the table; nothing else is redrawn unless the scale moves (below) or the feed lost cycles.
//
// Scale: linear, clipped at a percentile. The top of a chart is the 95th percentile of the bars'
// totals (times 1.2), so one slow cycle does not flatten the others; a bar above it is drawn to the
// top, clipped, with a dark cap and its value in its tooltip; the caption says how many are clipped.
// (A log scale was the other choice: it keeps every bar in view, but a stack of segments on a log
// axis misstates each segment's share of the cycle, which is what the chart is for.) The scale is
// kept until the percentile leaves [0.5, 1] of it (hysteresis), so it does not move every cycle.

import { ACTION_COLOURS } from "../charts.js";
import { navigate } from "../app.js";
import { at, fill, cycleHref, el, getJSON, heading, link, seconds, svg } from "../util.js";

const KEEP = 300; // cycles in the charts (bounded: a page left open does not grow)
const LISTED = 40;
const ORDER = Object.keys(ACTION_COLOURS);
const COUNT_COLOURS = { binds: "#2f6f9f", evictions: "#d45087", pipelined: "#4aa3a2" };
const HEIGHT = 180;
const BAR = 6;
const PERCENTILE = 0.95;

export function traceHref(config, traceId) {
  return `${config.jaegerUrl}/trace/${traceId}`;
}

/** The scale's top for these totals: the PERCENTILE-th of them times 1.2 (0 when there is none). */
export function clippedTop(totals) {
  const xs = totals.filter((v) => v > 0).sort((a, b) => a - b);
  if (!xs.length) return 0;
  const p = xs[Math.min(xs.length - 1, Math.floor(PERCENTILE * (xs.length - 1)))];
  return p * 1.2;
}

/** A stacked-bar chart that grows by one bar at a time (see the module comment). */
class LiveBars {
  constructor({ title, parts, colours, format, onClick, id }) {
    Object.assign(this, { title, parts, colours, format, onClick });
    this.bars = []; // {row, g, total}
    this.top = 0;
    this.keys = [];
    this.plot = svg("g", { class: "bars" });
    this.svg = svg("svg", { width: "100%", height: HEIGHT, viewBox: `0 0 ${KEEP * BAR} ${HEIGHT}`, preserveAspectRatio: "none", role: "img", "aria-label": title, class: "stack" },
      svg("title", { text: title }), this.plot);
    // keyboard: the chart is one tab stop; ←/→ (Home/End) pick a bar, Enter opens its cycle
    this.picked = -1;
    this.svg.setAttribute("tabindex", "0");
    this.svg.setAttribute("aria-keyshortcuts", "ArrowLeft ArrowRight Home End Enter");
    this.svg.addEventListener("keydown", (e) => this.key(e));
    this.caption = el("span", { class: "muted scale-note" });
    this.heading = el("span", { text: title });
    this.legend = el("ul", { class: "legend" });
    this.figure = el("figure", { class: "chart", id }, el("figcaption", {}, this.heading, " ", this.caption), this.svg, this.legend);
  }

  key(e) {
    const n = this.bars.length;
    if (!n) return;
    let i = this.picked < 0 || this.picked >= n ? n - 1 : this.picked;
    if (e.key === "ArrowLeft") i = Math.max(0, i - 1);
    else if (e.key === "ArrowRight") i = Math.min(n - 1, i + 1);
    else if (e.key === "Home") i = 0;
    else if (e.key === "End") i = n - 1;
    else if (e.key === "Enter" || e.key === " ") { e.preventDefault(); this.onClick(this.bars[i].row); return; }
    else return;
    e.preventDefault();
    this.pick(i);
  }

  pick(i) {
    this.bars[this.picked]?.g.classList.remove("picked");
    this.picked = i;
    const b = this.bars[i];
    b.g.classList.add("picked");
    this.svg.setAttribute("aria-label", `${this.title}: cycle ${b.row.cycle}, ${this.format(b.total)} (Enter opens it)`);
    this.svg.dataset.picked = String(b.row.cycle);
  }

  total(r) { return Object.values(this.parts(r)).reduce((s, v) => s + (v || 0), 0); }

  bar(r) {
    const g = svg("g", { class: "bar", dataset: { cycle: r.cycle } });
    g.addEventListener("click", () => this.onClick(r));
    return { row: r, g, total: this.total(r) };
  }

  // the segments of one bar at the current scale (the bar's own elements only)
  shape(b) {
    const g = b.g;
    while (g.firstChild) g.removeChild(g.firstChild);
    const p = this.parts(b.row);
    const room = HEIGHT - 4;
    const top = this.top || 1;
    let y = HEIGHT;
    let used = 0;
    for (const k of this.keys) {
      const v = p[k] || 0;
      if (!v) continue;
      const h = Math.min((v / top) * room, room - used);
      if (h <= 0) break;
      used += h;
      y -= h;
      g.append(svg("rect", { x: 0, y, width: BAR - 1, height: h, fill: this.colours[k] || "#888", class: "seg", dataset: { cycle: b.row.cycle } },
        svg("title", { text: `cycle ${b.row.cycle} ${k}: ${this.format(v)}` })));
    }
    if (b.total > top) {
      g.append(svg("rect", { x: 0, y: 0, width: BAR - 1, height: 4, class: "clip-cap" },
        svg("title", { text: `cycle ${b.row.cycle}: ${this.format(b.total)} in all, above the scale (clipped)` })));
    }
  }

  place() {
    // bars right-aligned, the newest at the right edge; the chart's width grows with the bars up to KEEP
    const slots = Math.max(50, this.bars.length);
    this.svg.setAttribute("viewBox", `0 0 ${slots * BAR} ${HEIGHT}`);
    const offset = slots - this.bars.length;
    this.bars.forEach((b, i) => b.g.setAttribute("transform", `translate(${(offset + i) * BAR},0)`));
  }

  note() {
    this.heading.textContent = `${this.title}, last ${this.bars.length} cycles`;
    const clipped = this.bars.filter((b) => b.total > this.top).length;
    if (!this.bars.length || !this.top) this.caption.textContent = "(no cycle yet)";
    else this.caption.textContent = `(scale to ${this.format(this.top)}, the 95th percentile × 1.2` + (clipped ? `; ${clipped} clipped bar${clipped === 1 ? "" : "s"}, their value in the tooltip)` : ")");
  }

  setKeys(keys) {
    if (keys.join() === this.keys.join()) return false;
    this.keys = keys;
    fill(this.legend, keys.map((k) => el("li", {}, el("span", { class: "swatch", style: { background: this.colours[k] || "#888" } }), k)));
    return true;
  }

  /** Draw all of `rows` (the first time, or after a resync). */
  reset(rows, keys) {
    this.setKeys(keys);
    this.bars = rows.slice(-KEEP).map((r) => this.bar(r));
    this.picked = -1;
    this.top = clippedTop(this.bars.map((b) => b.total));
    for (const b of this.bars) this.shape(b);
    this.plot.replaceChildren(...this.bars.map((b) => b.g));
    this.place();
    this.note();
  }

  /** One more cycle: one new bar, the oldest dropped; the others are reshaped only when the scale moves. */
  push(r, keys) {
    const b = this.bar(r);
    this.bars.push(b);
    this.plot.append(b.g);
    while (this.bars.length > KEEP) { this.bars.shift().g.remove(); if (this.picked > 0) this.picked--; }
    const want = clippedTop(this.bars.map((x) => x.total));
    const rescale = this.setKeys(keys) || !this.top || want > this.top || want < 0.5 * this.top;
    if (rescale) {
      this.top = want;
      for (const x of this.bars) this.shape(x);
    } else this.shape(b);
    this.place();
    this.note();
    return rescale;
  }
}

export async function render(main, ctx) {
  let rows = (await getJSON(`/v1/cycles?latest=${KEEP}`, ctx.signal)).items.filter((r) => r.closed);
  const open = (r) => navigate(cycleHref(r.cycle));
  const duration = new LiveBars({ id: "chart-duration", title: "Cycle duration by action", parts: (r) => r.closed.action_seconds || {}, colours: ACTION_COLOURS, format: seconds, onClick: open });
  const counts = new LiveBars({ id: "chart-counts", title: "Binds, evictions and pipelined tasks per cycle", parts: (r) => ({ binds: r.closed.binds, evictions: r.closed.evictions, pipelined: r.closed.pipelined }), colours: COUNT_COLOURS, format: (v) => String(v), onClick: open });
  const charts = el("div", { class: "charts" }, duration.figure, counts.figure);
  const latestCycle = el("strong", { id: "latest-cycle" });
  const tbody = el("tbody", { id: "cycles-rows" });
  const caption = el("caption");
  const empty = el("p", { id: "cycles-empty", class: "muted", hidden: true, text: "The log holds no finished cycle yet: the daemon has not scheduled (cycles appear here as they close)." });
  let queue = []; // rows from the live feed not drawn yet (drawn at the next animation frame)
  let frame = 0;
  let redraws = 0; // full redraws (the first draw, resyncs): the tests read it (data-redraws)

  function actions() {
    const seen = new Set(rows.flatMap((r) => Object.keys(r.closed.action_seconds || {})));
    return [...ORDER.filter((a) => seen.has(a)), ...[...seen].filter((a) => !ORDER.includes(a)).sort()];
  }

  function tr(r) {
    return el("tr", { dataset: { cycle: r.cycle } },
      el("td", {}, link(cycleHref(r.cycle), String(r.cycle))),
      el("td", { text: `t=${at(r.now_ms)}` }),
      el("td", { class: "num", text: seconds(r.closed.duration_s) }),
      el("td", { class: "num", text: String(r.closed.binds) }),
      el("td", { class: "num", text: String(r.closed.evictions) }),
      el("td", { class: "num", text: String(r.closed.pipelined) }),
      el("td", { class: "num", text: String(r.closed.pending_tasks) }),
      el("td", {}, r.trace_id ? el("a", { href: traceHref(ctx.config, r.trace_id), rel: "noopener", target: "_blank", text: "Jaeger", class: "trace" }) : "–"));
  }

  function texts() {
    latestCycle.textContent = rows.length ? String(rows[rows.length - 1].cycle) : "none yet";
    caption.textContent = `The latest ${Math.min(LISTED, rows.length)} cycles`;
    empty.hidden = rows.length > 0;
    table.hidden = rows.length === 0;
  }

  function drawAll() {
    redraws++;
    main.dataset.redraws = String(redraws);
    duration.reset(rows, actions());
    counts.reset(rows, ["binds", "evictions", "pipelined"]);
    tbody.replaceChildren(...rows.slice(-LISTED).reverse().map(tr));
    texts();
  }

  // the rows queued by the feed, drawn incrementally (one bar and one table row each)
  function drawNew() {
    frame = 0;
    const fresh = queue;
    queue = [];
    for (const r of fresh) {
      duration.push(r, actions());
      counts.push(r, ["binds", "evictions", "pipelined"]);
      tbody.prepend(tr(r));
    }
    while (tbody.rows.length > LISTED) tbody.lastElementChild.remove();
    texts();
  }

  // the rows and `more`, one per cycle, in cycle order, the last KEEP (rows that arrived from the
  // live feed while the page re-read the API stay: they may be newer than what it read)
  function merge(more) {
    const drawn = new Set(rows.map((r) => r.cycle));
    for (const r of queue) drawn.delete(r.cycle); // queued, not drawn yet
    const lastDrawn = Math.max(0, ...drawn);
    const byCycle = new Map(rows.map((r) => [r.cycle, r]));
    let changed = false; // a cycle the page drew is changed or one before the last drawn is new
    for (const r of more) {
      if (!r.closed) continue;
      if (r.cycle <= lastDrawn && !drawn.has(r.cycle)) changed = true;
      byCycle.set(r.cycle, r);
    }
    rows = [...byCycle.values()].sort((a, b) => a.cycle - b.cycle).slice(-KEEP);
    if (frame) cancelAnimationFrame(frame);
    frame = 0;
    if (changed || !drawn.size) { queue = []; drawAll(); return; }
    // only newer cycles: added like live ones, nothing redrawn
    queue = rows.filter((r) => r.cycle > lastDrawn);
    drawNew();
  }

  // the cycles the log holds after row `after` (from the REST API, page by page, at most KEEP and a page)
  async function readAfter(after) {
    const missed = [];
    let since = after.seq + 1;
    while (since && missed.length <= KEEP) {
      const page = await getJSON(`/v1/cycles?since=${since}&limit=${KEEP}`, ctx.signal);
      missed.push(...page.items);
      since = page.next_since;
    }
    merge(missed);
  }

  function warn(err) {
    if (err.name !== "AbortError") console.warn("re-reading missed cycles failed:", err.message || err);
  }

  const table = el("table", { class: "grid", id: "cycles-table" }, caption,
    el("thead", {}, el("tr", {}, ["Cycle", "Virtual time", "Duration", "Binds", "Evictions", "Pipelined", "Pending tasks", "Trace"].map((t, i) => el("th", { scope: "col", class: i > 1 && i < 7 ? "num" : undefined, text: t })))),
    tbody);
  fill(main, heading("Cycles"), charts, el("p", { class: "muted" }, "Newest cycle: ", latestCycle), empty, table);
  drawAll();
  return {
    onCycle(row) {
      const last = rows[rows.length - 1];
      if (!row.closed || (last && row.cycle <= last.cycle)) return;
      rows.push(row);
      if (rows.length > KEEP) rows = rows.slice(-KEEP);
      // a cycle number skipped: the feed lost some (it started, or was dropped, in between): re-read them
      if (last && row.cycle > last.cycle + KEEP) { this.resync().catch(warn); return; }
      if (last && row.cycle > last.cycle + 1) { readAfter(last).catch(warn); return; }
      queue.push(row);
      if (!frame) frame = requestAnimationFrame(drawNew);
    },
    async resync() {
      merge((await getJSON(`/v1/cycles?latest=${KEEP}`, ctx.signal)).items);
    },
    // the live feed (re)connected and the server's newest cycle is `serverCycle`: read the cycles this
    // page missed from the REST API, from the log position after the last one it shows
    async catchUp(serverCycle) {
      const last = rows[rows.length - 1];
      if (last && last.cycle >= serverCycle) return;
      if (!last || serverCycle - last.cycle > KEEP) return this.resync();
      return readAfter(last);
    },
    destroy() { if (frame) cancelAnimationFrame(frame); },
  };
}
