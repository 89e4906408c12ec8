// Charts drawn by hand: resource bars (SVG), stacked bars per cycle (SVG), a heat map (canvas).

import { el, human, percent, quantity, svg } from "./util.js";

/** One resource of a queue: allocated as a bar, deserved and guarantee as ticks, capability the end. */
export function resourceBar(resource, figures, width = 180) {
  const v = {};
  for (const k of ["allocated", "deserved", "capability", "guarantee", "real_capability"]) {
    v[k] = figures[k]?.[resource] !== undefined ? quantity(figures[k][resource]) : undefined;
  }
  const cap = v.capability ?? v.real_capability;
  const scale = Math.max(cap ?? 0, v.deserved ?? 0, v.allocated ?? 0, v.guarantee ?? 0) || 1;
  const x = (n) => Math.max(0, Math.min(width, (n / scale) * width));
  const over = v.deserved !== undefined && (v.allocated ?? 0) > v.deserved;
  const parts = [`allocated ${human(v.allocated ?? 0, resource)}`];
  if (v.deserved !== undefined) parts.push(`deserved ${human(v.deserved, resource)}`);
  if (v.guarantee !== undefined) parts.push(`guarantee ${human(v.guarantee, resource)}`);
  if (cap !== undefined) parts.push(`capability ${human(cap, resource)}`);
  const label = `${resource}: ${parts.join(", ")}`;
  const g = svg("svg", { width, height: 12, viewBox: `0 0 ${width} 12`, role: "img", "aria-label": label, class: "rbar" },
    svg("title", { text: label }),
    svg("rect", { x: 0, y: 2, width, height: 8, class: "track" }),
    svg("rect", { x: 0, y: 2, width: x(v.allocated ?? 0), height: 8, class: over ? "fill over" : "fill" }),
    v.guarantee !== undefined ? svg("rect", { x: x(v.guarantee) - 1, y: 0, width: 2, height: 12, class: "tick guarantee" }) : null,
    v.deserved !== undefined ? svg("rect", { x: x(v.deserved) - 1, y: 0, width: 2, height: 12, class: "tick deserved" }) : null);
  const text = [human(v.allocated ?? 0, resource)];
  if (v.deserved !== undefined) text.push(` / ${human(v.deserved, resource)}`);
  return el("div", { class: "res" }, el("span", { class: "res-name", title: resource, text: resource }), g,
    el("span", { class: "res-text", text: text.join("") + (cap !== undefined ? ` (cap ${human(cap, resource)})` : "") }));
}

/** A small horizontal bar for a 0..1 fraction with its percentage. */
export function fractionBar(fraction, label) {
  const w = 80;
  const f = Number.isFinite(fraction) ? Math.max(0, Math.min(1, fraction)) : 0;
  return el("span", { class: "frac" },
    svg("svg", { width: w, height: 10, viewBox: `0 0 ${w} 10`, role: "img", "aria-label": `${label} ${percent(fraction)}` },
      svg("rect", { x: 0, y: 1, width: w, height: 8, class: "track" }),
      svg("rect", { x: 0, y: 1, width: f * w, height: 8, class: fraction > 1 ? "fill over" : "fill", style: { fill: heat(f) } })),
    el("span", { text: percent(fraction) }));
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

/** A colour for a utilisation fraction: light green (idle) through yellow to red (full), purple past 1. */
export function heat(f) {
  if (!Number.isFinite(f)) return "#ddd";
  if (f > 1.0001) return "#6a1b9a";
  const h = 120 - 120 * Math.max(0, Math.min(1, f));
  return `hsl(${h}, 70%, ${f === 0 ? 88 : 45 + 10 * (1 - f)}%)`;
}

/** A canvas heat map: one cell per item, `value(item)` in 0..1; `onPick(item)` on click or Enter. */
export function heatMap(items, { value, label, onPick, width = 720, columns }) {
  const n = items.length;
  const cols = columns || (n <= 24 ? Math.max(n, 1) : Math.min(160, Math.ceil(Math.sqrt(n * 2))));
  const cell = Math.max(5, Math.min(36, Math.floor(width / cols)));
  const rows = Math.ceil(n / cols);
  const canvas = el("canvas", { width: cols * cell, height: Math.max(rows, 1) * cell, class: "heat", role: "img", "aria-label": label });
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
  canvas.addEventListener("click", (ev) => { const it = at(ev); if (it) onPick(it); });
  canvas.addEventListener("mousemove", (ev) => { const it = at(ev); canvas.title = it ? onPick.describe(it) : ""; });
  return canvas;
}
