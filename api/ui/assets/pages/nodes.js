// Nodes: utilisation per resource as a heat map (one cell per node, readable at 10,000 nodes), the
// busiest nodes as sorted bars, pods per node, and a node's GPU cards (deviceshare).

import { fractionBar, heatMap } from "../charts.js";
import { setQuery } from "../app.js";
import { fill, el, getJSON, heading, human, percent, quantity } from "../util.js";

const PAGE = 100;

function util(n, r) {
  if (r === "pods") {
    const cap = quantity(n.allocatable.pods);
    return cap ? n.pods.length / cap : NaN;
  }
  const cap = quantity(n.allocatable[r]);
  if (!cap) return NaN;
  return quantity(n.used[r] || "0") / cap;
}

function gpuCards(n) {
  if (!n.gpus || !n.gpus.length) return null;
  return el("section", { class: "gpus", "aria-labelledby": "gpu-h" }, el("h3", { id: "gpu-h", text: `GPU cards (${n.gpus.length})` }),
    el("ul", { class: "cards" }, n.gpus.map((g) => el("li", { class: "card", dataset: { gpu: g.index } },
      el("strong", { text: `GPU ${g.index}` }), " ",
      fractionBar(g.memory ? g.used_memory / g.memory : 0, `GPU ${g.index} memory`),
      el("div", { class: "muted", text: `${g.used_memory} / ${g.memory} MiB · ${g.pods.length ? g.pods.join(", ") : "idle"}` })))));
}

export async function render(main, ctx) {
  let nodes = [];
  const q = ctx.query;
  const state = { resource: q.get("resource") || "cpu", order: q.get("order") || "busiest", page: 1, node: q.get("node") || "" };
  const controls = el("form", { class: "filters", on: { submit: (e) => e.preventDefault() } });
  const mapBox = el("div", { class: "heat-box" });
  const detail = el("aside", { id: "node-detail", class: "detail", "aria-live": "polite" });
  const table = el("div");

  function resources() {
    const set = new Set(nodes.flatMap((n) => Object.keys(n.allocatable)));
    set.add("pods");
    const first = ["cpu", "memory", "pods"].filter((r) => set.has(r));
    return [...first, ...[...set].filter((r) => !first.includes(r)).sort()];
  }

  function ordered() {
    const r = state.resource;
    const rows = nodes.map((n) => ({ n, u: util(n, r) }));
    if (state.order === "busiest") rows.sort((a, b) => (Number.isNaN(b.u) ? -1 : b.u) - (Number.isNaN(a.u) ? -1 : a.u) || (a.n.name < b.n.name ? -1 : 1));
    return rows;
  }

  function showNode(n) {
    state.node = n.name;
    setQuery({ node: n.name });
    const rs = resources().filter((r) => r === "pods" || n.allocatable[r] !== undefined);
    fill(detail, el("h2", { text: `Node ${n.name}` }),
      el("table", { class: "grid compact" }, el("thead", {}, el("tr", {}, ["Resource", "Used", "Allocatable", "Releasing", ""].map((t) => el("th", { scope: "col", text: t })))),
        el("tbody", {}, rs.map((r) => el("tr", {}, el("td", { text: r }),
          el("td", { class: "num", text: r === "pods" ? String(n.pods.length) : human(quantity(n.used[r] || "0"), r) }),
          el("td", { class: "num", text: human(quantity(n.allocatable[r] || "0"), r) }),
          el("td", { class: "num", text: r === "pods" ? "" : human(quantity(n.releasing[r] || "0"), r) }),
          el("td", {}, fractionBar(util(n, r), r)))))),
      gpuCards(n),
      el("h3", { text: `Pods (${n.pods.length})` }),
      n.pods.length ? el("ul", { class: "podlist" }, n.pods.map((p) => el("li", { text: p }))) : el("p", { class: "muted", text: "none" }));
  }

  function draw() {
    setQuery({ resource: state.resource !== "cpu" ? state.resource : "", order: state.order !== "busiest" ? state.order : "" });
    const r = state.resource;
    const rows = ordered();
    const known = rows.filter((x) => !Number.isNaN(x.u));
    const mean = known.reduce((s, x) => s + x.u, 0) / (known.length || 1);
    const full = known.filter((x) => x.u >= 0.9).length;
    const pick = (x) => showNode(x.n);
    pick.describe = (x) => `${x.n.name}: ${r} ${percent(x.u)}, ${x.n.pods.length} pods`;
    fill(mapBox, 
      el("p", { id: "nodes-summary", role: "status", text: `${nodes.length} nodes · ${r}: mean ${percent(mean)}, ${full} at 90% or more` }),
      heatMap(rows, { value: (x) => x.u, label: `Heat map of ${r} utilisation, one cell per node, ${state.order === "busiest" ? "busiest first" : "by name"}`, onPick: pick }),
      el("p", { class: "legend-heat muted" }, el("span", { class: "ramp", "aria-hidden": "true" }), " 0% → 100% (purple: over-committed; grey: no such resource). Click a cell for the node."));
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    state.page = Math.min(state.page, pages);
    const shown = rows.slice((state.page - 1) * PAGE, state.page * PAGE);
    const cols = resources().filter((x) => x !== "pods" && !x.startsWith("ephemeral") && !x.startsWith("hugepages")).slice(0, 4);
    fill(table, 
      el("table", { class: "grid" }, el("caption", { text: `Nodes ${state.order === "busiest" ? `by ${r} utilisation, busiest first` : "by name"} (${(state.page - 1) * PAGE + 1}–${(state.page - 1) * PAGE + shown.length} of ${rows.length})` }),
        el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Node" }), cols.map((c) => el("th", { scope: "col", text: c })), el("th", { scope: "col", class: "num", text: "Pods" }))),
        el("tbody", {}, shown.map((x) => el("tr", { dataset: { node: x.n.name } },
          el("td", {}, el("button", { type: "button", class: "linkish", on: { click: () => showNode(x.n) } }, x.n.name)),
          cols.map((c) => el("td", {}, fractionBar(util(x.n, c), c))),
          el("td", { class: "num", text: String(x.n.pods.length) }))))),
      pages > 1 ? el("nav", { class: "pager", "aria-label": "Pages of nodes" },
        el("button", { type: "button", disabled: state.page <= 1, on: { click: () => { state.page--; draw(); } } }, "← previous"),
        ` page ${state.page} of ${pages} `,
        el("button", { type: "button", disabled: state.page >= pages, on: { click: () => { state.page++; draw(); } } }, "next →")) : null);
    const sel = nodes.find((n) => n.name === state.node);
    if (sel) showNode(sel);
  }

  function drawControls() {
    const rs = el("select", { id: "f-resource" }, resources().map((r) => el("option", { value: r, text: r, selected: r === state.resource })));
    rs.addEventListener("change", () => { state.resource = rs.value; draw(); });
    const order = el("select", { id: "f-order" }, [["busiest", "busiest first"], ["name", "by name"]].map(([v, t]) => el("option", { value: v, text: t, selected: v === state.order })));
    order.addEventListener("change", () => { state.order = order.value; state.page = 1; draw(); });
    fill(controls, el("label", { for: "f-resource" }, "Resource ", rs), el("label", { for: "f-order" }, "Order ", order));
  }

  async function load() {
    nodes = (await getJSON("/v1/nodes", ctx.signal)).items;
  }

  await load();
  fill(main, heading("Nodes"), controls, el("div", { class: "nodes-layout" }, mapBox, detail), table);
  drawControls();
  draw();
  return { refresh: async () => { await load(); draw(); } };
}
