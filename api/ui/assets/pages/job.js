// One job: its tasks, why it waits (ranked reasons, as `fumarole explain` prints them), its position
// in its queue, and a timeline of its decisions with links to the cycles.

import { at, fill, cycleHref, duration, el, getJSON, heading, link, phaseBadge, plural } from "../util.js";

/** The facts line under a reason, as `fumarole explain` prints it. */
export function reasonFacts(r) {
  const facts = [];
  if (r.plugin) facts.push(`plugin ${r.plugin}`);
  if (r.resource) facts.push(`resource ${r.resource}` + (r.shortfall ? ` short by ${r.shortfall}` : ""));
  if (r.min_member) facts.push(`${r.placeable} of ${r.min_member} tasks placeable`);
  if (r.total_nodes) {
    const hist = Object.entries(r.nodes || {})
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .map(([why, n]) => `${n} ${why}`).join(", ");
    facts.push(`0/${r.total_nodes} nodes fit` + (hist ? `: ${hist}` : ""));
  }
  return facts.join("; ");
}

function cycleLink(c) {
  return link(cycleHref(c), `[${c}]`, { "aria-label": `cycle ${c}` });
}

function timeline(d, pipelines) {
  const h = d.history;
  const steps = [];
  for (const b of h.binds) steps.push([b.cycle, 0, b.at_ms, "bind", `bound ${Object.entries(b.pods).map(([p, n]) => `${p} → ${n}`).join(", ")}`]);
  for (const e of h.evictions) steps.push([e.cycle, 1, e.at_ms, "evict", `evicted ${e.pod} from ${e.node} (${e.action}): ${e.reason}`]);
  for (const p of h.phases) steps.push([p.cycle, 2, p.at_ms, "phase", p.phase === "Inqueue" ? "enqueued (phase Inqueue)" : `phase ${p.phase}`]);
  for (const p of pipelines) steps.push([p.event.cycle, 3, null, "pipeline", `pipelined ${p.event.namespace}/${p.event.name} onto ${p.event.node}`]);
  for (const w of h.waits) {
    const span = w.last_cycle === w.first_cycle ? "" : `–${w.last_cycle}`;
    const until = w.until_cycle !== null ? `, until t=${at(w.until_ms || 0)} [${w.until_cycle}]` : ", still at the end of the log";
    const why = w.reasons.length ? `[${w.reasons.join(", ")}] ` : "";
    steps.push([w.first_cycle, 4, w.from_ms, "wait", `waiting ${plural(w.cycles, "cycle")}${span ? ` (to cycle ${w.last_cycle})` : ""}${until}: ${why}${w.message}`]);
  }
  steps.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  if (!steps.length) return el("p", { class: "muted", text: "No decision about this job in the log." });
  const notes = [];
  for (const [kind, shown, total] of [["waits", h.waits.length, h.waits_total], ["binds", h.binds.length, h.binds_total], ["evictions", h.evictions.length, h.evictions_total], ["phase changes", h.phases.length, h.phases_total]]) {
    if (shown < total) notes.push(`the ${shown} most recent of ${total} ${kind} are listed`);
  }
  return el("div", {},
    notes.length ? el("p", { class: "muted", text: `(${notes.join("; ")})` }) : null,
    el("ol", { class: "timeline", id: "timeline" }, steps.map(([c, , ms, kind, text]) =>
      el("li", { class: `step step-${kind}`, dataset: { cycle: c } },
        el("span", { class: "when" }, ms !== null ? `t=${at(ms)} ` : "", cycleLink(c)),
        el("span", { class: `badge kind-${kind}`, text: kind }), " ", text))));
}

function summary(h) {
  if (!h.waits_total) return "Never waited for a reason the scheduler recorded.";
  const until = h.waiting ? "and still waits at the end of the log" : `to t=${at(h.waited_until_ms || 0)} [${h.waited_until_cycle}]`;
  return `Waited ${duration(h.waited_ms)} in ${plural(h.wait_cycles, "cycle")} (${plural(h.waits_total, "span")} of the same reasons), from t=${at(h.waited_from_ms || 0)} [${h.waited_from_cycle}] ${until}; ${plural(h.binds_total, "cycle")} bound pods of it; ${plural(h.evictions_total, "eviction")}.`;
}

export async function render(main, ctx) {
  const [ns, name] = ctx.params;
  const body = el("div");

  async function load() {
    const job = `${ns}/${name}`;
    const [d, pipes] = await Promise.all([
      getJSON(`/v1/jobs/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`, ctx.signal),
      getJSON(`/v1/decisions?job=${encodeURIComponent(job)}&type=decision.pipeline&limit=100`, ctx.signal),
    ]);
    draw(d, pipes.items);
  }

  function draw(d, pipelines) {
    const ex = d.explanation;
    let why;
    if (ex) {
      why = el("section", { "aria-labelledby": "why-h", class: "why" },
        el("h2", { id: "why-h", text: "Why it waits" }),
        el("p", { id: "why-message", class: "why-message", text: ex.message }),
        el("p", { id: "why-position" }, `Position in queue ${d.queue}: `, el("strong", { text: String(ex.queue_position) }), ` (as of cycle `, cycleLink(ex.cycle), ")"),
        el("h3", { text: "Reasons, most important first" }),
        el("ol", { id: "why-reasons", class: "reasons" }, ex.reasons.map((r) => {
          const facts = reasonFacts(r);
          return el("li", { dataset: { code: r.code } },
            el("span", { class: "reason-text" }, el("code", { text: `[${r.code}]` }), ` ${r.message}`),
            facts ? el("div", { class: "reason-facts muted", text: facts }) : null);
        })),
        Object.keys(ex.pods).length ? el("details", {}, el("summary", { text: `Each waiting pod (${Object.keys(ex.pods).length})` }),
          el("dl", { class: "pods" }, Object.entries(ex.pods).flatMap(([p, w]) => [el("dt", { text: p }), el("dd", { text: w })]))) : null);
    } else {
      why = el("section", { class: "why" }, el("h2", { text: "Why it waits" }),
        el("p", { id: "why-message", text: d.pending ? "Waiting, but no explanation was recorded yet." : "It does not wait." }));
    }
    const tasks = el("table", { class: "grid" }, el("caption", { text: `${d.tasks.length} tasks` }),
      el("thead", {}, el("tr", {}, ["Task", "Status", "Node"].map((t) => el("th", { scope: "col", text: t })))),
      el("tbody", {}, d.tasks.map((t) => el("tr", {}, el("td", { text: t.name }), el("td", {}, phaseBadge(t.status)), el("td", { text: t.node || "–" })))));
    fill(body, 
      el("dl", { class: "facts" },
        el("dt", { text: "Queue" }), el("dd", {}, link(`/ui/jobs?queue=${encodeURIComponent(d.queue)}`, d.queue)),
        el("dt", { text: "Phase" }), el("dd", {}, phaseBadge(d.phase)),
        el("dt", { text: "minMember" }), el("dd", { text: String(d.min_member) }),
        el("dt", { text: "Priority" }), el("dd", { text: String(d.priority) }),
        el("dt", { text: "Tasks" }), el("dd", { text: Object.entries(d.tasks_by_status).map(([s, n]) => `${n} ${s}`).join(", ") || "no pods" })),
      why,
      el("section", { "aria-labelledby": "tl-h" }, el("h2", { id: "tl-h", text: "Timeline of its decisions" }), el("p", { id: "history-summary", class: "muted", text: summary(d.history) }), timeline(d, pipelines)),
      el("section", { "aria-labelledby": "tasks-h" }, el("h2", { id: "tasks-h", text: "Tasks" }), tasks),
      d.conditions.length ? el("section", {}, el("h2", { text: "PodGroup conditions" }),
        el("ul", {}, d.conditions.map((c) => el("li", { text: `${c.type}: ${c.status || ""} ${c.reason || ""} ${c.message || ""}`.trim() })))) : null);
  }

  await load();
  fill(main, heading(`Job ${ns}/${name}`, link("/ui/jobs", "← all jobs", { class: "back" })), body);
  return { refresh: load };
}
