// Small helpers shared by the pages: DOM building (text only, never HTML), quantities, times, fetch.

export function el(tag, attrs = {}, ...children) {
  const node = tag === "svg" || attrs.svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false || k === "svg") continue;
    if (k === "text") node.textContent = String(v);
    else if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k === "style") Object.assign(node.style, v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function svg(tag, attrs = {}, ...children) {
  return el(tag, { ...attrs, svg: true }, ...children);
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

/** Replace the node's children by `children` (null, undefined and false are left out). */
export function fill(node, ...children) {
  clear(node);
  node.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

export class HttpError extends Error {
  constructor(status, detail) {
    super(`HTTP ${status}: ${detail}`);
    this.status = status;
  }
}

export async function getJSON(path, signal) {
  const resp = await fetch(path, { headers: { Accept: "application/json" }, signal });
  if (!resp.ok) {
    let detail = resp.statusText;
    try { detail = (await resp.json()).detail || detail; } catch { /* not JSON */ }
    throw new HttpError(resp.status, detail);
  }
  return resp.json();
}

// ---------------------------------------------------------------- Kubernetes quantities

const SUFFIX = {
  n: 1e-9, u: 1e-6, m: 1e-3, "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, Pi: 1024 ** 5, Ei: 1024 ** 6,
};
const QUANTITY = /^([+-]?[0-9.]+)(?:[eE]([+-]?[0-9]+))?(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/;
const parsed = new Map();

/** A quantity string ("500m", "4Gi", "1e3") as a number; NaN when it is not one. */
export function quantity(text) {
  if (text === undefined || text === null || text === "") return 0;
  if (typeof text === "number") return text;
  let v = parsed.get(text);
  if (v !== undefined) return v;
  const m = QUANTITY.exec(text.trim());
  v = m ? Number(m[1]) * 10 ** Number(m[2] || 0) * SUFFIX[m[3] || ""] : NaN;
  if (parsed.size > 50000) parsed.clear();
  parsed.set(text, v);
  return v;
}

const BYTES = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
export function isBytes(resource) {
  return resource === "memory" || resource.includes("storage") || resource.endsWith("-memory");
}

/** A number for people: bytes in binary units for memory, else up to 3 significant digits. */
export function human(value, resource = "") {
  if (!Number.isFinite(value)) return "–";
  if (isBytes(resource) && resource !== "volcano.sh/gpu-memory") {
    let i = 0;
    while (Math.abs(value) >= 1024 && i < BYTES.length - 1) { value /= 1024; i++; }
    return `${fmt(value)}${BYTES[i]}`;
  }
  return fmt(value);
}

function fmt(v) {
  if (v === 0) return "0";
  if (Math.abs(v) >= 100 || Number.isInteger(v)) return String(Math.round(v));
  return String(Number(v.toPrecision(3)));
}

export function percent(x) {
  return Number.isFinite(x) ? `${Math.round(x * 100)}%` : "–";
}

// ---------------------------------------------------------------- times (as `fumarole explain` prints them)

/** A virtual time: seconds since the start of a simulated clock, or a UTC time for a real one. */
export function at(ms) {
  if (ms >= 1e11) {
    const d = new Date(ms).toISOString();
    return ms % 1000 ? d : d.replace(".000Z", "Z");
  }
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${Number((ms / 1000).toPrecision(6))}s`;
}

/** A span of virtual time, as `fumarole explain` prints it (59s, 12m05s, 3h02m10s, 2d04h10m). */
export function duration(ms) {
  if (ms < 60000) return at(ms);
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60, r = s % 60;
  const two = (n) => String(n).padStart(2, "0");
  if (d) return `${d}d${two(h)}h${two(m)}m`;
  return h ? `${h}h${two(m)}m${two(r)}s` : `${m}m${two(r)}s`;
}

export function seconds(s) {
  if (s < 1e-3) return `${Math.round(s * 1e6)} µs`;
  if (s < 1) return `${(s * 1000).toPrecision(3)} ms`;
  return `${s.toPrecision(3)} s`;
}

export function plural(n, word) {
  return n === 1 ? `${n} ${word}` : `${n} ${word}s`;
}

// ---------------------------------------------------------------- page helpers

export function link(href, text, attrs = {}) {
  return el("a", { href, ...attrs, text });
}

export function jobHref(ns, name) {
  return `/ui/jobs/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`;
}

/** A node's link: the nodes page with that node open. */
export function nodeHref(node) {
  return `/ui/nodes?node=${encodeURIComponent(node)}`;
}

/** A node name as a link to it ("–" for none). */
export function nodeLink(node) {
  return node ? link(nodeHref(node), node, { class: "node-link" }) : "–";
}

/** A pod "namespace/name" as a link to its job's page (`job` "namespace/name"), at the pod's task row. */
export function podLink(pod, job) {
  const [ns, ...rest] = job.split("/");
  const name = pod.includes("/") ? pod.split("/").slice(1).join("/") : pod;
  return link(`${jobHref(ns, rest.join("/"))}#task-${encodeURIComponent(name)}`, pod, { class: "pod-link" });
}

// The reason codes an explanation records (daemon/runtime/cycle.py REASON_CODES), most important
// first, with the short label the dashboard shows for each.
export const REASONS = [
  ["queue-missing", "queue missing"], ["queue-closed", "queue closed"], ["enqueue-rejected", "not admitted (enqueue)"],
  ["not-enqueued", "not enqueued"], ["job-invalid", "invalid"], ["predicates-failed", "predicates"],
  ["queue-capability", "queue capability"], ["queue-overused", "queue overused"], ["gang-unsatisfied", "gang"],
  ["pipelined", "pipelined"], ["best-effort", "best effort"], ["gang-stopped", "gang stopped"],
  ["not-reached", "not reached"], ["other", "other"],
];
const REASON_LABEL = new Map(REASONS);

export function reasonLabel(code) {
  return REASON_LABEL.get(code) || code;
}

export function cycleHref(cycle) {
  return `/ui/cycles/${cycle}`;
}

export function heading(title, ...rest) {
  return el("div", { class: "page-head" }, el("h1", { text: title }), ...rest);
}

/** A table whose header cells sort it: columns [{key, label, value(row), render(row), numeric}]. */
export function sortableTable({ columns, rows, sort, onSort, caption, rowAttrs, id }) {
  const thead = el("thead", {}, el("tr", {}, columns.map((c) => {
    const active = sort && sort.key === c.key;
    const dir = active ? (sort.desc ? "descending" : "ascending") : "none";
    const th = el("th", { scope: "col", "aria-sort": c.value ? dir : undefined, class: c.numeric ? "num" : undefined });
    if (c.value) {
      th.append(el("button", {
        type: "button", class: "sort", dataset: { key: c.key },
        on: { click: (e) => {
          const table = e.currentTarget.closest("table");
          const at = table?.id ? `#${CSS.escape(table.id)} ` : "";
          onSort({ key: c.key, desc: active ? !sort.desc : !!c.numeric });
          // the table was redrawn: give the keyboard focus back to the same header button
          document.querySelector(`${at}button.sort[data-key="${CSS.escape(c.key)}"]`)?.focus({ preventScroll: true });
        } },
      }, c.label, el("span", { class: "arrow", "aria-hidden": "true", text: active ? (sort.desc ? "▼" : "▲") : "" })));
    } else th.textContent = c.label;
    return th;
  })));
  const tbody = el("tbody");
  const frag = document.createDocumentFragment();
  for (const r of rows) {
    const tr = el("tr", rowAttrs ? rowAttrs(r) : {});
    for (const c of columns) {
      const v = c.render ? c.render(r) : c.value(r);
      tr.append(el("td", { class: c.numeric ? "num" : undefined }, v));
    }
    frag.append(tr);
  }
  tbody.append(frag);
  return el("table", { class: "grid", id }, caption ? el("caption", { text: caption }) : null, thead, tbody);
}

const COLLATOR = new Intl.Collator(undefined, { numeric: true }); // j2 before j10

export function compare(value, desc) {
  return (a, b) => {
    const x = value(a), y = value(b);
    const c = typeof x === "number" && typeof y === "number" ? x - y : COLLATOR.compare(String(x), String(y));
    return desc ? -c : c;
  };
}

export function phaseBadge(phase) {
  return el("span", { class: `badge phase-${(phase || "none").toLowerCase()}`, text: phase || "–" });
}
