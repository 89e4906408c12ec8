// One cycle: when it ran, its duration by action, its decisions (a type filter the server applies to the
// whole cycle, paged), and its trace in Jaeger.

import { ACTION_COLOURS } from "../charts.js";
import { traceHref } from "./cycles.js";
import { at, fill, cycleHref, el, getJSON, heading, jobHref, link, nodeLink, podLink, seconds } from "../util.js";

function describe(type, e) {
  switch (type) {
    case "decision.bind": return `bind ${e.namespace}/${e.name} → ${e.node}`;
    case "decision.evict": return `evict ${e.namespace}/${e.name} from ${e.node} (${e.action}): ${e.reason}`;
    case "decision.pipeline": return `pipeline ${e.namespace}/${e.name} onto ${e.node}`;
    case "decision.podgroup_status": return `PodGroup ${e.namespace}/${e.name} phase ${e.phase}`;
    case "decision.job_explained": return `${e.namespace}/${e.name}: ${e.message || "(no longer waiting)"}`;
    case "decision.queue_figures": return `queue figures of ${Object.keys(e.queues || {}).join(", ")}`;
    case "cycle.opened": return `opened at watermark ${e.watermark}`;
    case "cycle.callouts": return `extender answers: ${(e.calls || []).length} call(s) (${[...new Set((e.calls || []).map((c) => c.verb))].join(", ")})`;
    case "cycle.closed": return `closed: ${e.binds} binds, ${e.evictions} evictions, ${e.pipelined} pipelined`;
    default: return type;
  }
}

function jobOf(type, e) {
  if (e.job) return e.job;
  if (type === "decision.podgroup_status" || type === "decision.job_explained") return `${e.namespace}/${e.name}`;
  return "";
}

const TYPES = ["cycle.opened", "cycle.callouts", "decision.bind", "decision.evict", "decision.pipeline", "decision.podgroup_status",
  "decision.job_explained", "decision.queue_figures", "cycle.closed"]; // the decision index's types (store/index.py)
const PAGE = 1000;

function describeParts(type, e) {
  // the description with every name a link: the pod to its row on its job's page, the node to the node,
  // a job to its page, a queue to its jobs
  const pod = `${e.namespace}/${e.name}`;
  const podPart = e.job ? podLink(pod, e.job) : pod;
  switch (type) {
    case "decision.bind": return ["bind ", podPart, " → ", nodeLink(e.node)];
    case "decision.evict": return ["evict ", podPart, " from ", nodeLink(e.node), ` (${e.action}): ${e.reason}`];
    case "decision.pipeline": return ["pipeline ", podPart, " onto ", nodeLink(e.node)];
    case "decision.podgroup_status": return ["PodGroup ", link(jobHref(e.namespace, e.name), pod), ` phase ${e.phase}`];
    case "decision.job_explained": return [link(jobHref(e.namespace, e.name), pod), `: ${e.message || "(no longer waiting)"}`];
    case "decision.queue_figures": return ["queue figures of ", ...Object.keys(e.queues || {}).flatMap((q, i) => [i ? ", " : "", link(`/ui/jobs?queue=${encodeURIComponent(q)}`, q, { class: "queue-link" })])];
    default: return [describe(type, e)];
  }
}

export async function render(main, ctx) {
  const id = Number(ctx.params[0]);
  const [d, newest] = await Promise.all([
    getJSON(`/v1/cycles/${id}?limit=${PAGE}`, ctx.signal),
    getJSON("/v1/cycles?latest=1", ctx.signal),
  ]);
  const lastCycle = newest.items.length ? newest.items[newest.items.length - 1].cycle : id;
  const c = d.cycle;
  const closed = c.closed;
  let decisions = [...d.decisions];
  let next = d.next_since;
  const list = el("tbody");
  const typeSel = el("select", { id: "f-type" }, el("option", { value: "", text: "all" }), TYPES.map((t) => el("option", { value: t, text: t })));
  const more = el("button", { type: "button", id: "more-decisions", hidden: !next }, "more decisions");
  const count = el("p", { id: "decisions-count", class: "muted", role: "status" });

  function drawRows() {
    fill(list, ...decisions.map((r) => {
      const job = jobOf(r.type, r.event);
      const [ns, ...rest] = job.split("/");
      return el("tr", { dataset: { type: r.type } }, el("td", { class: "num", text: String(r.seq) }),
        el("td", {}, el("span", { class: `badge kind-${r.type.split(".").pop()}`, text: r.type.replace("decision.", "") })),
        el("td", {}, job ? link(jobHref(ns, rest.join("/")), job) : "–"),
        el("td", {}, describeParts(r.type, r.event)));
    }));
    const t = typeSel.value;
    const what = t ? `${t} decisions` : "decisions";
    count.textContent = !decisions.length ? `This cycle has no ${what}.`
      : next ? `The first ${decisions.length} ${what} of this cycle (the filter searches them all, on the server); more follow.`
        : `All ${decisions.length} ${what} of this cycle.`;
    more.hidden = !next;
  }

  // a type filter asks the server (the decision index) for that type in the whole cycle, page by page
  function url(since) {
    const t = typeSel.value;
    return t ? `/v1/decisions?cycle=${id}&type=${encodeURIComponent(t)}&limit=${PAGE}${since ? `&since=${since}` : ""}`
      : `/v1/cycles/${id}?limit=${PAGE}${since ? `&since=${since}` : ""}`;
  }
  async function read(since) {
    const page = await getJSON(url(since), ctx.signal);
    return { rows: page.decisions || page.items, next: page.next_since };
  }
  let asked = 0; // the newest filter asked: an older answer arriving after it is dropped (arrow keys)
  typeSel.addEventListener("change", async () => {
    const mine = ++asked;
    const page = await read(null);
    if (mine !== asked) return;
    decisions = page.rows;
    next = page.next;
    drawRows();
  });
  more.addEventListener("click", async () => {
    const page = await read(next);
    decisions.push(...page.rows);
    next = page.next;
    drawRows();
  });

  const split = closed ? Object.entries(closed.action_seconds || {}) : [];
  const total = split.reduce((s, [, v]) => s + v, 0) || 1;
  const trace = c.trace_id
    ? el("a", { id: "jaeger-link", href: traceHref(ctx.config, c.trace_id), rel: "noopener", target: "_blank" }, `Open trace ${c.trace_id} in Jaeger`)
    : el("span", { id: "jaeger-link", class: "muted", text: "No trace recorded (tracing was off for this cycle)." });
  fill(main,
    heading(`Cycle ${id}`, el("nav", { class: "back", "aria-label": "Other cycles" },
      id > 1 ? link(cycleHref(id - 1), "← previous") : null, " ", link("/ui/cycles", "all cycles"), " ",
      id < lastCycle ? link(cycleHref(id + 1), "next →", { id: "next-cycle" }) : el("span", { class: "muted", id: "next-cycle", text: "(the newest cycle)" }))),
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
      count,
      el("table", { class: "grid" }, el("thead", {}, el("tr", {}, ["Seq", "Type", "Job", "Decision"].map((t) => el("th", { scope: "col", text: t })))), list),
      more));
  drawRows();
  return {};
}
