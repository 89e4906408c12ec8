// Nodes: utilisation per resource as a heat map (one cell per node, readable at 10,000 nodes), the
// busiest nodes as sorted bars, pods per node, and a node's GPU cards (deviceshare); a search over
// names, labels and HyperNodes, and grouping by a label (zone first) or by the HyperNodes of a tier
// (GET /v1/hypernodes, resolved as a session resolves them) with per-group utilisation.

import { HEAT_BANDS, fractionBar, heat, heatMap } from "../charts.js";
import { setQuery } from "../app.js";
import { fill, el, getJSON, heading, human, percent, podLink, quantity } from "../util.js";

const ZONE = "topology.kubernetes.io/zone";
const HN = "hypernode:"; // the group-by value of "HyperNodes of tier N" is `hypernode:N`

/** Whether a node matches the search: every word is in its name, is a label key=value (or a label
 * value) it carries, or is `hypernode=NAME` of a HyperNode holding it (`members`: name -> Set of nodes). */
function matches(n, words, members) {
  return words.every((w) => n.name.includes(w)
    || (w.startsWith("hypernode=") && !!members.get(w.slice(10))?.has(n.name))
    || Object.entries(n.labels || {}).some(([k, v]) => `${k}=${v}` === w || v === w || (w.endsWith("=") && `${k}=` === w)));
}

/** A pod "namespace/name" linked to its job's page (at the pod's row) when its job is known. */
function pod(n, p) {
  const job = (n.pod_jobs || {})[p];
  return job ? podLink(p, job) : p;
}

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
      el("div", { class: "muted" }, `${g.used_memory} / ${g.memory} MiB · `, g.pods.length ? g.pods.flatMap((p, i) => [i ? ", " : "", pod(n, p)]) : "idle")))));
}

export async function render(main, ctx) {
  let nodes = [];
  let topo = { items: [], tiers: [], ready: true, problem: "" };
  let members = new Map(); // HyperNode -> Set of its nodes
  let byName = new Map(); // HyperNode -> its row
  const q = ctx.query;
  const state = { cursor: "", resource: q.get("resource") || "cpu", order: q.get("order") || "busiest", page: 1, node: q.get("node") || "", search: q.get("search") || "", group: q.get("group") || "" };
  const groupBox = el("section", { class: "groups", "aria-label": "Node groups" });
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
    const words = state.search.trim().split(/\s+/).filter(Boolean);
    const rows = nodes.filter((n) => matches(n, words, members)).map((n) => ({ n, u: util(n, r) }));
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
      hyperNodesOf(n),
      Object.keys(n.labels || {}).length ? el("details", { class: "labels" }, el("summary", { text: `Labels (${Object.keys(n.labels).length})` }),
        el("ul", { class: "podlist" }, Object.entries(n.labels).map(([k, v]) => el("li", {}, el("button", { type: "button", class: "linkish", title: "show the nodes with this label", on: { click: () => search(`${k}=${v}`) } }, `${k}=${v}`))))) : null,
      el("h3", { text: `Pods (${n.pods.length})` }),
      n.pods.length ? el("ul", { class: "podlist", id: "node-pods" }, n.pods.map((p) => el("li", {}, pod(n, p)))) : el("p", { class: "muted", text: "none" }));
  }

  function hnButton(name) {
    const h = byName.get(name);
    return el("button", { type: "button", class: "linkish", dataset: { hypernode: name }, title: "show the nodes of this HyperNode", on: { click: () => search(`hypernode=${name}`) } },
      name, h ? el("span", { class: "muted", text: ` (tier ${h.tier}${h.tier_name ? ` ${h.tier_name}` : ""})` }) : null);
  }

  /** The HyperNodes holding the node, lowest tier first (each one a search for its nodes). */
  function hyperNodesOf(n) {
    const holding = topo.items.filter((h) => members.get(h.name).has(n.name)).sort((a, b) => a.tier - b.tier || (a.name < b.name ? -1 : 1));
    if (!holding.length) return null;
    return el("p", { id: "node-hypernodes" }, "HyperNodes: ", holding.flatMap((h, i) => [i ? " ⊂ " : "", hnButton(h.name)]));
  }

  /** After a redraw, the focus back on the pager button pressed (or the other one, once it is disabled). */
  function keepFocus(id, other) {
    const b = document.getElementById(id);
    (b && !b.disabled ? b : document.getElementById(other))?.focus();
  }

  function search(text) {
    state.search = text;
    state.page = 1;
    const box = controls.querySelector("#f-search");
    if (box) box.value = text;
    draw();
  }

  function drawGroups(rows) {
    if (!state.group) return fill(groupBox);
    const key = state.group;
    const tier = key.startsWith(HN) ? Number(key.slice(HN.length)) : null;
    const groups = new Map();
    const add = (v, x) => {
      if (!groups.has(v)) groups.set(v, []);
      groups.get(v).push(x);
    };
    if (tier !== null) {
      const inTier = topo.items.filter((h) => h.tier === tier);
      for (const h of inTier) groups.set(h.name, []); // an empty HyperNode is a group too
      for (const x of rows) {
        const holding = inTier.filter((h) => members.get(h.name).has(x.n.name));
        if (!holding.length) add("", x);
        for (const h of holding) add(h.name, x); // a node two HyperNodes of the tier claim counts in both
      }
    } else {
      for (const x of rows) add((x.n.labels || {})[key] ?? "", x);
    }
    const what = tier !== null ? `HyperNode of tier ${tier}${tierName(tier)}` : key;
    const none = tier !== null ? `(in no HyperNode of tier ${tier})` : `(no ${key})`;
    const problem = tier !== null && !topo.ready ? el("p", { class: "error", role: "alert", text: `The topology is not ready: ${topo.problem}. Volcano schedules no job with a network topology until it is fixed.` }) : null;
    const list = [...groups.entries()].sort((a, b) => (a[0] === "" ? 1 : b[0] === "" ? -1 : a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    fill(groupBox, problem, el("table", { class: "grid compact", id: "node-groups" },
      el("caption", { text: `${list.length} groups by ${what} (${state.resource})` }),
      el("thead", {}, el("tr", {}, [tier !== null ? "HyperNode (in)" : "Group", "Nodes", "Mean", "At 90% or more", "Pods"].map((t) => el("th", { scope: "col", text: t })))),
      el("tbody", {}, list.map(([v, xs]) => {
        const known = xs.filter((x) => !Number.isNaN(x.u));
        const mean = known.reduce((s, x) => s + x.u, 0) / (known.length || 1);
        const parent = tier !== null && v ? byName.get(v)?.parent : "";
        const name = tier !== null
          ? el("button", { type: "button", class: "linkish", dataset: { key: `group:${v}` }, on: { click: () => search(`hypernode=${v}`) } }, v)
          : el("button", { type: "button", class: "linkish", dataset: { key: `group:${v}` }, on: { click: () => search(`${key}=${v}`) } }, v);
        return el("tr", { dataset: { group: v } },
          el("td", {}, v ? [name, ...(parent ? [el("span", { class: "muted", text: " in " }), hnButton(parent)] : [])] : el("span", { class: "muted", text: none })),
          el("td", { class: "num", text: String(xs.length) }),
          el("td", {}, known.length ? fractionBar(mean, `${v} mean`) : "–"),
          el("td", { class: "num", text: String(known.filter((x) => x.u >= 0.9).length) }),
          el("td", { class: "num", text: String(xs.reduce((s, x) => s + x.n.pods.length, 0)) }));
      }))));
  }

  function draw() {
    setQuery({ resource: state.resource !== "cpu" ? state.resource : "", order: state.order !== "busiest" ? state.order : "", search: state.search, group: state.group });
    const r = state.resource;
    const rows = ordered();
    drawGroups(rows);
    if (!nodes.length) {
      fill(mapBox, el("p", { class: "muted empty", id: "nodes-summary", text: "No nodes in the log yet." }));
      fill(table);
      return;
    }
    const known = rows.filter((x) => !Number.isNaN(x.u));
    const mean = known.reduce((s, x) => s + x.u, 0) / (known.length || 1);
    const full = known.filter((x) => x.u >= 0.9).length;
    const pick = (x) => { state.cursor = x.n.name; showNode(x.n); };
    pick.describe = (x) => `${x.n.name}: ${r} ${percent(x.u)}, ${x.n.pods.length} pods`;
    fill(mapBox, 
      el("p", { id: "nodes-summary", role: "status", text: `${rows.length === nodes.length ? nodes.length : `${rows.length} of ${nodes.length}`} nodes · ${r}: mean ${percent(mean)}, ${full} at 90% or more` }),
      heatMap(rows, {
        id: "heat-map", value: (x) => x.u, label: `Heat map of ${r} utilisation, one cell per node, ${state.order === "busiest" ? "busiest first" : "by name"}`, onPick: pick,
        cursorAt: state.cursor ? rows.findIndex((x) => x.n.name === state.cursor) : -1, onCursor: (x) => { state.cursor = x.n.name; },
      }),
      el("ul", { class: "heat-bands", "aria-label": "Colour scale" }, HEAT_BANDS.map(([, colour, name]) => el("li", {}, el("span", { class: "swatch", style: { background: colour } }), name)),
        el("li", {}, el("span", { class: "swatch", style: { background: heat(NaN) } }), "no such resource")),
      el("p", { class: "legend-heat muted", text: "Click a cell, or focus the map and use the arrow keys and Enter, for the node." }));
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    state.page = Math.min(state.page, pages);
    const shown = rows.slice((state.page - 1) * PAGE, state.page * PAGE);
    const cols = resources().filter((x) => x !== "pods" && !x.startsWith("ephemeral") && !x.startsWith("hugepages")).slice(0, 4);
    fill(table, 
      !rows.length ? el("p", { class: "muted empty", text: `No node matches “${state.search}”.` }) :
      el("table", { class: "grid" }, el("caption", { text: `Nodes ${state.order === "busiest" ? `by ${r} utilisation, busiest first` : "by name"} (${(state.page - 1) * PAGE + 1}–${(state.page - 1) * PAGE + shown.length} of ${rows.length})` }),
        el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Node" }), cols.map((c) => el("th", { scope: "col", text: c })), el("th", { scope: "col", class: "num", text: "Pods" }))),
        el("tbody", {}, shown.map((x) => el("tr", { dataset: { node: x.n.name } },
          el("td", {}, el("a", { href: `/ui/nodes?node=${encodeURIComponent(x.n.name)}`, on: { click: (ev) => { if (ev.ctrlKey || ev.metaKey || ev.shiftKey) return; ev.preventDefault(); ev.stopPropagation(); showNode(x.n); } } }, x.n.name)),
          cols.map((c) => el("td", {}, fractionBar(util(x.n, c), c))),
          el("td", { class: "num", text: String(x.n.pods.length) }))))),
      pages > 1 ? el("nav", { class: "pager", "aria-label": "Pages of nodes" },
        el("button", { type: "button", id: "nodes-prev", disabled: state.page <= 1, on: { click: () => { state.page--; draw(); keepFocus("nodes-prev", "nodes-next"); } } }, "← previous"),
        el("span", { id: "nodes-page", text: ` page ${state.page} of ${pages} ` }),
        el("button", { type: "button", id: "nodes-next", disabled: state.page >= pages, on: { click: () => { state.page++; draw(); keepFocus("nodes-next", "nodes-prev"); } } }, "next →")) : null);
    const sel = nodes.find((n) => n.name === state.node);
    if (sel) showNode(sel);
  }

  /** The grouping choices: HyperNode tiers, then label keys (zone first). */
  function groupChoices() {
    const keys = [...new Set(nodes.flatMap((n) => Object.keys(n.labels || {})))].filter((k) => k !== "kubernetes.io/hostname" && k !== ZONE).sort();
    return [["", "none"], ...topo.tiers.map((t) => [`${HN}${t}`, `HyperNode (tier ${t}${tierName(t)})`]), [ZONE, `zone (${ZONE})`], ...keys.map((k) => [k, k])];
  }

  /** A live refresh brings new resources, tiers or labels: the selects gain them in place (the same
   * elements, so the focus and the choice stay). */
  function syncOptions() {
    for (const [id, choices, value] of [["f-resource", resources().map((r) => [r, r]), state.resource], ["f-group", groupChoices(), state.group]]) {
      const sel = controls.querySelector(`#${id}`);
      if (!sel) continue;
      const now = [...sel.options].map((o) => `${o.value}\u0000${o.textContent}`).join("\u0001");
      if (now === choices.map(([v, t]) => `${v}\u0000${t}`).join("\u0001")) continue;
      fill(sel, choices.map(([v, t]) => el("option", { value: v, text: t, selected: v === value })));
    }
  }

  function drawControls() {
    const rs = el("select", { id: "f-resource" }, resources().map((r) => el("option", { value: r, text: r, selected: r === state.resource })));
    rs.addEventListener("change", () => { state.resource = rs.value; draw(); });
    const order = el("select", { id: "f-order" }, [["busiest", "busiest first"], ["name", "by name"]].map(([v, t]) => el("option", { value: v, text: t, selected: v === state.order })));
    order.addEventListener("change", () => { state.order = order.value; state.page = 1; draw(); });
    const box = el("input", { id: "f-search", type: "search", value: state.search, placeholder: "name or label=value", autocomplete: "off" });
    box.addEventListener("input", () => { state.search = box.value; state.page = 1; draw(); });
    const group = el("select", { id: "f-group" }, groupChoices().map(([v, t]) => el("option", { value: v, text: t, selected: v === state.group })));
    group.addEventListener("change", () => { state.group = group.value; draw(); });
    fill(controls, el("label", { for: "f-search" }, "Search ", box), el("label", { for: "f-resource" }, "Resource ", rs),
      el("label", { for: "f-order" }, "Order ", order), el("label", { for: "f-group" }, "Group by ", group));
  }

  function tierName(t) {
    const names = [...new Set(topo.items.filter((h) => h.tier === t && h.tier_name).map((h) => h.tier_name))];
    return names.length ? `, ${names.join(", ")}` : "";
  }

  async function load() {
    const [ns, hs] = await Promise.all([getJSON("/v1/nodes", ctx.signal), getJSON("/v1/hypernodes", ctx.signal)]);
    nodes = ns.items;
    topo = hs;
    members = new Map(hs.items.map((h) => [h.name, new Set(h.nodes)]));
    byName = new Map(hs.items.map((h) => [h.name, h]));
  }

  await load();
  fill(main, heading("Nodes"), controls, groupBox, el("div", { class: "nodes-layout" }, mapBox, detail), table);
  drawControls();
  draw();
  return { refresh: async () => { await load(); syncOptions(); draw(); } };
}
