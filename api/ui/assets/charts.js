// Charts drawn by hand: resource bars (SVG), stacked bars per cycle (SVG), a heat map (canvas).

import { el, human, percent, quantity, svg } from "./util.js";

/** One resource of a queue: allocated as a bar, deserved and guarantee as ticks, request as a
 * hollow tick. The bar is scaled to the effective capability (Volcano's realCapability) when the
 * queue has a configured capability for the resource, else to the largest of deserved, allocated,
 * request and guarantee; with neither a deserved nor a capability there is nothing to measure
 * against and no bar is drawn (the text says so). "cap" is shown only for a configured capability,
 * as its effective value (the configured one in the tooltip when they differ). */
export function resourceBar(resource, figures, width = 160) {
  const v = {};
  for (const k of ["allocated", "deserved", "capability", "guarantee", "real_capability", "request", "inqueue"]) {
    v[k] = figures[k]?.[resource] !== undefined ? quantity(figures[k][resource]) : undefined;
  }
  const configured = v.capability;
  const cap = configured !== undefined ? Math.min(configured, v.real_capability ?? configured) : undefined;
  const parts = [`allocated ${human(v.allocated ?? 0, resource)}`];
  if (v.deserved !== undefined) parts.push(`deserved ${human(v.deserved, resource)}`);
  if (v.guarantee !== undefined) parts.push(`guarantee ${human(v.guarantee, resource)}`);
  if (v.request !== undefined) parts.push(`requested ${human(v.request, resource)}`);
  if (v.inqueue !== undefined) parts.push(`inqueue ${human(v.inqueue, resource)}`);
  if (cap !== undefined) parts.push(`capability ${human(cap, resource)}${configured !== cap ? ` (configured ${human(configured, resource)})` : ""}`);
  const label = `${resource}: ${parts.join(", ")}`;
  const measured = v.deserved !== undefined || cap !== undefined;
  let g = null;
  if (measured) {
    const scale = cap ?? (Math.max(v.deserved ?? 0, v.allocated ?? 0, v.guarantee ?? 0, v.request ?? 0) || 1);
    const x = (n) => Math.max(0, Math.min(width, (n / scale) * width));
    const over = v.deserved !== undefined && (v.allocated ?? 0) > v.deserved;
    g = svg("svg", { width: "100%", height: 12, viewBox: `0 0 ${width} 12`, preserveAspectRatio: "none", role: "img", "aria-label": label, class: "rbar" },
      svg("title", { text: label }),
      svg("rect", { x: 0, y: 2, width, height: 8, class: "track" }),
      svg("rect", { x: 0, y: 2, width: x(v.allocated ?? 0), height: 8, class: over ? "fill over" : "fill" }),
      v.request !== undefined ? svg("rect", { x: x(v.request) - 1, y: 3, width: 2, height: 6, class: "tick request" }) : null,
      v.guarantee !== undefined ? svg("rect", { x: x(v.guarantee) - 1, y: 0, width: 2, height: 12, class: "tick guarantee" }) : null,
      v.deserved !== undefined ? svg("rect", { x: x(v.deserved) - 1, y: 0, width: 2, height: 12, class: "tick deserved" }) : null);
  }
  let text = human(v.allocated ?? 0, resource);
  if (v.deserved !== undefined) text += ` / ${human(v.deserved, resource)}`;
  if (cap !== undefined) text += ` (cap ${human(cap, resource)})`;
  if (!measured) text += " (no deserved or capability)";
  const demand = v.request !== undefined || v.inqueue !== undefined
    ? el("span", { class: "res-demand muted", text: `req ${human(v.request ?? 0, resource)} · inq ${human(v.inqueue ?? 0, resource)}` }) : null;
  return el("div", { class: measured ? "res" : "res unmeasured", title: label, dataset: { resource } },
    el("span", { class: "res-name", text: resource }), g || el("span", { class: "rbar-none", "aria-label": label, role: "img" }),
    el("span", { class: "res-text", text }), demand);
}

/** A small horizontal bar for a 0..1 fraction with its percentage; `tone` "heat" colours it by
 * utilisation (nodes), "share" keeps it plain up to 100 % (the fair target) and red only past it. */
export function fractionBar(fraction, label, tone = "heat") {
  const w = 80;
  const f = Number.isFinite(fraction) ? Math.max(0, Math.min(1, fraction)) : 0;
  const over = fraction > 1.0005;
  return el("span", { class: "frac" },
    svg("svg", { width: w, height: 10, viewBox: `0 0 ${w} 10`, role: "img", "aria-label": `${label} ${percent(fraction)}` },
      svg("rect", { x: 0, y: 1, width: w, height: 8, class: "track" }),
      svg("rect", { x: 0, y: 1, width: f * w, height: 8, class: over ? "fill over" : "fill", style: tone === "heat" ? { fill: heat(f) } : {} })),
    el("span", { text: percent(fraction) }));
}

export const SERIES_COLOURS = ["#2f6f9f", "#d45087", "#f28e2b", "#4aa3a2", "#7a5195", "#8a6d00", "#b5446e", "#5a8f29"];

/** A line chart of several series over the same x values (cycles): `series` [{name, values}],
 * null values leave a gap. Keyboard: the figure is focusable and its table (in a details
 * element) gives every value as text. */
export function lineChart({ xs, series, title, format = (n) => String(n), height = 140, width = 600, id }) {
  const finite = series.flatMap((s) => s.values.filter((v) => Number.isFinite(v)));
  const top = finite.length ? Math.max(...finite) : 0;
  const yMax = top > 0 ? top : 1;
  const x0 = xs[0] ?? 0, x1 = xs[xs.length - 1] ?? 1;
  const px = (x) => (x1 === x0 ? width / 2 : ((x - x0) / (x1 - x0)) * (width - 4) + 2);
  const py = (y) => height - 4 - (y / yMax) * (height - 12);
  const s = svg("svg", { width: "100%", height, viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img", "aria-label": `${title}: ${series.length} series over cycles ${x0}–${x1}, max ${format(top)}`, class: "lines" },
    svg("title", { text: title }),
    svg("line", { x1: 0, y1: py(0), x2: width, y2: py(0), class: "axis" }));
  series.forEach((se, k) => {
    let d = "";
    let pen = false;
    se.values.forEach((v, i) => {
      if (!Number.isFinite(v)) { pen = false; return; }
      // a step: the value holds until the next sample (figures are recorded when they change)
      d += pen ? `H${px(xs[i]).toFixed(1)} V${py(v).toFixed(1)} ` : `M${px(xs[i]).toFixed(1)} ${py(v).toFixed(1)} `;
      pen = true;
    });
    if (d) s.append(svg("path", { d, class: "line", stroke: SERIES_COLOURS[k % SERIES_COLOURS.length], dataset: { series: se.name } }));
  });
  const legend = el("ul", { class: "legend" }, series.map((se, k) =>
    el("li", {}, el("span", { class: "swatch", style: { background: SERIES_COLOURS[k % SERIES_COLOURS.length] } }), se.name)));
  const table = el("details", { class: "chart-data" }, el("summary", { text: "values" }),
    el("table", { class: "grid compact" },
      el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "cycle" }), series.map((se) => el("th", { scope: "col", class: "num", text: se.name })))),
      el("tbody", {}, xs.map((x, i) => el("tr", {}, el("td", { text: String(x) }),
        series.map((se) => el("td", { class: "num", text: Number.isFinite(se.values[i]) ? format(se.values[i]) : "–" })))))));
  return el("figure", { class: "chart", id, tabindex: "0" },
    el("figcaption", {}, `${title} `, el("span", { class: "muted", text: finite.length ? `(max ${format(top)})` : "(nothing recorded)" })), s, legend, table);
}

export const ACTION_COLOURS = {
  enqueue: "#7a5195", allocate: "#2f6f9f", backfill: "#4aa3a2", preempt: "#d45087",
  reclaim: "#f28e2b", shuffle: "#a0a0a0", gangpreempt: "#b5446e", gangreclaim: "#c97a1e",
};
const OTHER = "#888";

/** Stacked bars: one per cycle, one segment per key of `parts(row)`, newest on the right. */
export function stackedBars(rows, { parts, keys, height = 180, barWidth = 6, title, unit, format, onClick, colours }) {
  const width = Math.max(rows.length * barWidth, 300);
  const total = (r) => keys.reduce((s, k) => s + (parts(r)[k] || 0), 0);
  const top = Math.max(1e-12, ...rows.map(total));
  const s = svg("svg", { width: "100%", height, viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img", "aria-label": title, class: "stack" },
    svg("title", { text: title }));
  rows.forEach((r, i) => {
    let y = height;
    const p = parts(r);
    for (const k of keys) {
      const v = p[k] || 0;
      if (!v) continue;
      const h = (v / top) * (height - 4);
      y -= h;
      const rect = svg("rect", { x: i * barWidth, y, width: barWidth - 1, height: h, fill: (colours || ACTION_COLOURS)[k] || OTHER, class: "seg", dataset: { cycle: r.cycle } },
        svg("title", { text: `cycle ${r.cycle} ${k}: ${format(v)}` }));
      if (onClick) rect.addEventListener("click", () => onClick(r));
      s.append(rect);
    }
  });
  const legend = el("ul", { class: "legend" }, keys.map((k) =>
    el("li", {}, el("span", { class: "swatch", style: { background: (colours || ACTION_COLOURS)[k] || OTHER } }), k)));
  return el("figure", { class: "chart" }, el("figcaption", {}, `${title} `, el("span", { class: "muted", text: `(max ${format(top)}${unit ? " " + unit : ""})` })), s, legend);
}

/** Utilisation bands of the heat map, so 90 % never looks like 100 %: [upper bound, colour, name]. */
export const HEAT_BANDS = [
  [0, "#e8f1e4", "idle"], [0.25, "#b7dba0", "under 25%"], [0.5, "#7cc06a", "25–50%"], [0.75, "#f2d04b", "50–75%"],
  [0.9, "#f29b38", "75–90%"], [0.9999, "#d9532b", "90–99%"], [1.0001, "#8e1b1b", "100% (full)"], [Infinity, "#6a1b9a", "over 100%"],
];

/** A colour for a utilisation fraction: one of HEAT_BANDS; grey when unknown. */
export function heat(f) {
  if (!Number.isFinite(f)) return "#ddd";
  if (f <= 0) return HEAT_BANDS[0][1];
  for (const [hi, colour] of HEAT_BANDS) if (f <= hi) return colour;
  return HEAT_BANDS[HEAT_BANDS.length - 1][1];
}

/** A canvas heat map: one cell per item, `value(item)` in 0..1; `onPick(item)` on click or Enter. */
export function heatMap(items, { value, label, onPick, width = 720, columns, id, cursorAt = -1, onCursor }) {
  const n = items.length;
  const cols = columns || (n <= 24 ? Math.max(n, 1) : Math.min(160, Math.ceil(Math.sqrt(n * 2))));
  const cell = Math.max(5, Math.min(36, Math.floor(width / cols)));
  const rows = Math.ceil(n / cols);
  const canvas = el("canvas", { id, width: cols * cell, height: Math.max(rows, 1) * cell, class: "heat", role: "img", "aria-label": label });
  const ctx = canvas.getContext("2d");
  for (let i = 0; i < n; i++) {
    ctx.fillStyle = heat(value(items[i]));
    ctx.fillRect((i % cols) * cell, Math.floor(i / cols) * cell, cell - 1, cell - 1);
  }
  const at = (ev) => {
    const r = canvas.getBoundingClientRect();
    const cx = Math.floor(((ev.clientX - r.left) * (canvas.width / r.width)) / cell);
    const cy = Math.floor(((ev.clientY - r.top) * (canvas.height / r.height)) / cell);
    const i = cy * cols + cx;
    return cx >= 0 && cx < cols && i >= 0 && i < n ? items[i] : null;
  };
  canvas.addEventListener("click", (ev) => { const it = at(ev); if (it) { cursor = items.indexOf(it); onPick(it); } });
  canvas.addEventListener("mousemove", (ev) => { const it = at(ev); canvas.title = it ? onPick.describe(it) : ""; });
  // keyboard: arrows move a cursor cell (announced in the status line), Enter or Space opens it; a
  // redraw (live refresh) starts from `cursorAt`, the cell the cursor was on, and reports moves to onCursor
  let cursor = cursorAt < n ? cursorAt : -1;
  canvas.tabIndex = 0;
  const status = el("p", { class: "heat-cursor muted", role: "status", "aria-live": "polite", text: n ? "Focus the map and use the arrow keys, then Enter." : "" });
  const mark = () => {
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    for (let i = 0; i < n; i++) {
      ctx.fillStyle = heat(value(items[i]));
      ctx.fillRect((i % cols) * cell, Math.floor(i / cols) * cell, cell - 1, cell - 1);
    }
    if (cursor >= 0) {
      ctx.strokeStyle = "#000";
      ctx.lineWidth = 2;
      ctx.strokeRect((cursor % cols) * cell + 1, Math.floor(cursor / cols) * cell + 1, cell - 3, cell - 3);
      status.textContent = onPick.describe(items[cursor]);
      canvas.dataset.cursor = String(cursor);
    }
  };
  canvas.addEventListener("keydown", (ev) => {
    if (!n) return;
    const step = { ArrowRight: 1, ArrowLeft: -1, ArrowDown: cols, ArrowUp: -cols, Home: -Infinity, End: Infinity }[ev.key];
    if (step !== undefined) {
      ev.preventDefault();
      cursor = cursor < 0 ? 0 : Math.max(0, Math.min(n - 1, cursor + step));
      mark();
      onCursor?.(items[cursor]);
    } else if ((ev.key === "Enter" || ev.key === " ") && cursor >= 0) {
      ev.preventDefault();
      onPick(items[cursor]);
    }
  });
  if (cursor >= 0) mark();
  return el("div", { class: "heat-wrap" }, canvas, status);
}
