// One cycle: when it ran, its duration by action, its decisions, and its trace in Jaeger.

import { ACTION_COLOURS } from "../charts.js";
import { traceHref } from "./cycles.js";
import { at, fill, cycleHref, el, getJSON, heading, jobHref, link, seconds } from "../util.js";

function describe(type, e) {
  switch (type) {
    case "decision.bind": return `bind ${e.namespace}/${e.name} → ${e.node}`;
    case "decision.evict": return `evict ${e.namespace}/${e.name} from ${e.node} (${e.action}): ${e.reason}`;
    case "decision.pipeline": return `pipeline ${e.namespace}/${e.name} onto ${e.node}`;
    case "decision.podgroup_status": return `PodGroup ${e.namespace}/${e.name} phase ${e.phase}`;
    case "decision.job_explained": return `${e.namespace}/${e.name}: ${e.message || "(no longer waiting)"}`;
    case "decision.queue_figures": return `queue figures of ${Object.keys(e.queues || {}).join(", ")}`;
    case "cycle.opened": return `opened at watermark ${e.watermark}`;
    case "cycle.closed": return `closed: ${e.binds} binds, ${e.evictions} evictions, ${e.pipelined} pipelined`;
    default: return type;
  }
}

function jobOf(type, e) {
  if (e.job) return e.job;
  if (type === "decision.podgroup_status" || type === "decision.job_explained") return `${e.namespace}/${e.name}`;
  return "";
}

export async function render(main, ctx) {
  const id = Number(ctx.params[0]);
  const d = await getJSON(`/v1/cycles/${id}?limit=1000`, ctx.signal);
  const c = d.cycle;
  const closed = c.closed;
  const decisions = [...d.decisions];
  const list = el("tbody");
  const typeSel = el("select", { id: "f-type" }, el("option", { value: "", text: "all" }));
  const more = el("button", { type: "button", hidden: !d.next_since }, "more decisions");
  let next = d.next_since;

  function drawRows() {
    const t = typeSel.value;
    fill(list, ...decisions.filter((r) => !t || r.type === t).map((r) => {
      const job = jobOf(r.type, r.event);
      const [ns, ...rest] = job.split("/");
      return el("tr", { dataset: { type: r.type } }, el("td", { class: "num", text: String(r.seq) }),
        el("td", {}, el("span", { class: `badge kind-${r.type.split(".").pop()}`, text: r.type.replace("decision.", "") })),
        el("td", {}, job ? link(jobHref(ns, rest.join("/")), job) : "–"),
        el("td", { text: describe(r.type, r.event) }));
    }));
    const types = [...new Set(decisions.map((r) => r.type))].sort();
    const have = new Set([...typeSel.options].map((o) => o.value));
    for (const ty of types) if (!have.has(ty)) typeSel.append(el("option", { value: ty, text: ty }));
  }
  typeSel.addEventListener("change", drawRows);
  more.addEventListener("click", async () => {
    const page = await getJSON(`/v1/cycles/${id}?limit=1000&since=${next}`, ctx.signal);
    decisions.push(...page.decisions);
    next = page.next_since;
    more.hidden = !next;
    drawRows();
  });

  const split = closed ? Object.entries(closed.action_seconds || {}) : [];
  const total = split.reduce((s, [, v]) => s + v, 0) || 1;
  const trace = c.trace_id
    ? el("a", { id: "jaeger-link", href: traceHref(ctx.config, c.trace_id), rel: "noopener", target: "_blank" }, `Open trace ${c.trace_id} in Jaeger`)
    : el("span", { id: "jaeger-link", class: "muted", text: "No trace recorded (tracing was off for this cycle)." });
  fill(main, 
    heading(`Cycle ${id}`, el("nav", { class: "back", "aria-label": "Other cycles" },
      id > 1 ? link(cycleHref(id - 1), "← previous") : null, " ", link("/ui/cycles", "all cycles"), " ", link(cycleHref(id + 1), "next →"))),
    el("dl", { class: "facts" },
      el("dt", { text: "Virtual time" }), el("dd", { text: `t=${at(c.now_ms)}` }),
      el("dt", { text: "Watermark" }), el("dd", { text: `log seq ${c.watermark}` }),
      el("dt", { text: "Configuration" }), el("dd", {}, el("code", { text: c.conf_hash.slice(0, 16) })),
      el("dt", { text: "Duration" }), el("dd", { text: closed ? seconds(closed.duration_s) : "still running" }),
      el("dt", { text: "Decided" }), el("dd", { text: closed ? `${closed.binds} binds, ${closed.evictions} evictions, ${closed.pipelined} pipelined; ${closed.jobs} jobs, ${closed.tasks} tasks, ${closed.pending_tasks} pending` : "–" }),
      el("dt", { text: "Trace" }), el("dd", {}, trace)),
    split.length ? el("section", {}, el("h2", { text: "Time by action" }),
      el("div", { class: "split", role: "img", "aria-label": split.map(([a, v]) => `${a} ${seconds(v)}`).join(", ") },
        split.map(([a, v]) => el("span", { class: "split-seg", title: `${a}: ${seconds(v)}`, style: { flexGrow: String(v / total), background: ACTION_COLOURS[a] || "#888" } }))),
      el("ul", { class: "legend" }, split.map(([a, v]) => el("li", {}, el("span", { class: "swatch", style: { background: ACTION_COLOURS[a] || "#888" } }), `${a} ${seconds(v)}`)))) : null,
    el("section", {}, el("h2", { text: "Decisions" }),
      el("p", {}, el("label", { for: "f-type" }, "Type ", typeSel)),
      el("table", { class: "grid" }, el("thead", {}, el("tr", {}, ["Seq", "Type", "Job", "Decision"].map((t) => el("th", { scope: "col", text: t })))), list),
      more));
  drawRows();
  return {};
}
