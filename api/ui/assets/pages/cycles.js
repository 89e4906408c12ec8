// Cycles: a live chart of each cycle's duration split by action, binds/evictions per cycle, and the
// latest cycles; new cycles arrive from the live feed without a reload.

import { ACTION_COLOURS, stackedBars } from "../charts.js";
import { navigate } from "../app.js";
import { at, fill, cycleHref, el, getJSON, heading, link, seconds } from "../util.js";

const KEEP = 300; // cycles in the charts (bounded: a page left open does not grow)
const LISTED = 40;
const ORDER = Object.keys(ACTION_COLOURS);
const COUNT_COLOURS = { binds: "#2f6f9f", evictions: "#d45087", pipelined: "#4aa3a2" };

export function traceHref(config, traceId) {
  return `${config.jaegerUrl}/trace/${traceId}`;
}

export async function render(main, ctx) {
  let rows = (await getJSON(`/v1/cycles?latest=${KEEP}`, ctx.signal)).items.filter((r) => r.closed);
  const charts = el("div", { class: "charts" });
  const table = el("div");
  let frame = 0;

  function actions() {
    const seen = new Set(rows.flatMap((r) => Object.keys(r.closed.action_seconds || {})));
    return [...ORDER.filter((a) => seen.has(a)), ...[...seen].filter((a) => !ORDER.includes(a)).sort()];
  }

  function draw() {
    frame = 0;
    const open = (r) => navigate(cycleHref(r.cycle));
    fill(charts, 
      stackedBars(rows, { parts: (r) => r.closed.action_seconds || {}, keys: actions(), title: `Cycle duration by action, last ${rows.length} cycles`, format: seconds, onClick: open }),
      stackedBars(rows, { parts: (r) => ({ binds: r.closed.binds, evictions: r.closed.evictions, pipelined: r.closed.pipelined }), keys: ["binds", "evictions", "pipelined"], colours: COUNT_COLOURS, title: "Binds, evictions and pipelined tasks per cycle", format: (v) => String(v), onClick: open }));
    const latest = rows.slice(-LISTED).reverse();
    fill(table, 
      el("p", { class: "muted" }, "Newest cycle: ", el("strong", { id: "latest-cycle", text: rows.length ? String(rows[rows.length - 1].cycle) : "none yet" })),
      el("table", { class: "grid" }, el("caption", { text: `The latest ${latest.length} cycles` }),
        el("thead", {}, el("tr", {}, ["Cycle", "Virtual time", "Duration", "Binds", "Evictions", "Pipelined", "Pending tasks", "Trace"].map((t, i) => el("th", { scope: "col", class: i > 1 && i < 7 ? "num" : undefined, text: t })))),
        el("tbody", {}, latest.map((r) => el("tr", { dataset: { cycle: r.cycle } },
          el("td", {}, link(cycleHref(r.cycle), String(r.cycle))),
          el("td", { text: `t=${at(r.now_ms)}` }),
          el("td", { class: "num", text: seconds(r.closed.duration_s) }),
          el("td", { class: "num", text: String(r.closed.binds) }),
          el("td", { class: "num", text: String(r.closed.evictions) }),
          el("td", { class: "num", text: String(r.closed.pipelined) }),
          el("td", { class: "num", text: String(r.closed.pending_tasks) }),
          el("td", {}, r.trace_id ? el("a", { href: traceHref(ctx.config, r.trace_id), rel: "noopener", target: "_blank", text: "Jaeger", class: "trace" }) : "–"))))));
  }

  // the rows and `more`, one per cycle, in cycle order, the last KEEP (rows that arrived from the
  // live feed while the page re-read the API stay: they may be newer than what it read)
  function merge(more) {
    const byCycle = new Map(rows.map((r) => [r.cycle, r]));
    for (const r of more) if (r.closed) byCycle.set(r.cycle, r);
    rows = [...byCycle.values()].sort((a, b) => a.cycle - b.cycle).slice(-KEEP);
    if (!frame) frame = requestAnimationFrame(draw);
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

  fill(main, heading("Cycles"), charts, table);
  draw();
  return {
    onCycle(row) {
      const last = rows[rows.length - 1];
      if (!row.closed || (last && row.cycle <= last.cycle)) return;
      rows.push(row);
      if (rows.length > KEEP) rows = rows.slice(-KEEP);
      if (!frame) frame = requestAnimationFrame(draw);
      // a cycle number skipped: the feed lost some (it started, or was dropped, in between): re-read them
      if (last && row.cycle > last.cycle + KEEP) this.resync().catch(warn);
      else if (last && row.cycle > last.cycle + 1) readAfter(last).catch(warn);
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
