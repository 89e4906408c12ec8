// One job: its tasks, why it waits (ranked reasons, as `fumarole explain` prints them), its position
// in its queue, and a timeline of its decisions with links to the cycles.

import {
  at, fill, cycleHref, duration, el, getJSON, heading, jobHref, link, nodeLink, phaseBadge, plural, reasonLabel,
} from "../util.js";

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

/** Steps of one kind whose text repeats in consecutive steps of that kind (a task pipelined onto the same
 * node cycle after cycle) become one step with a count and its cycle range. */
export function groupRepeats(steps) {
  const out = [];
  const last = new Map(); // kind -> the group its previous step went to
  for (const s of steps) {
    const g = last.get(s.kind);
    if (g && g.key === s.key && g.lastCycle < s.cycle) {
      g.count++;
      g.lastCycle = s.cycle;
      continue;
    }
    const ng = { ...s, count: 1, lastCycle: s.cycle };
    out.push(ng);
    last.set(s.kind, ng);
  }
  return out;
}

/** A pod's row in this page's task table (an in-page link). */
function taskLink(pod) {
  const name = pod.includes("/") ? pod.split("/").slice(1).join("/") : pod;
  return link(`#task-${encodeURIComponent(name)}`, pod, { class: "pod-link" });
}

function withNodes(parts) {
  // [text, {node}, {pod}] pieces: each node a link to it, each pod a link to its task row
  return parts.map((p) => (typeof p === "string" ? p : p.node !== undefined ? nodeLink(p.node) : taskLink(p.pod)));
}

function timeline(d, pipelines) {
  const h = d.history;
  const steps = [];
  const step = (cycle, rank, ms, kind, parts) => steps.push({ cycle, rank, ms, kind, parts, key: parts.map((p) => (typeof p === "string" ? p : p.node !== undefined ? `@${p.node}` : `%${p.pod}`)).join("") });
  for (const b of h.binds) {
    const parts = ["bound "];
    Object.entries(b.pods).forEach(([p, n], i) => parts.push(...(i ? [", "] : []), { pod: p }, " → ", { node: n }));
    step(b.cycle, 0, b.at_ms, "bind", parts);
  }
  for (const e of h.evictions) step(e.cycle, 1, e.at_ms, "evict", ["evicted ", { pod: e.pod }, " from ", { node: e.node }, ` (${e.action}): ${e.reason}`]);
  for (const p of h.phases) step(p.cycle, 2, p.at_ms, "phase", [p.phase === "Inqueue" ? "enqueued (phase Inqueue)" : `phase ${p.phase}`]);
  for (const p of [...pipelines].sort((a, b) => a.event.cycle - b.event.cycle || a.seq - b.seq)) {
    step(p.event.cycle, 3, null, "pipeline", ["pipelined ", { pod: `${p.event.namespace}/${p.event.name}` }, " onto ", { node: p.event.node }]);
  }
  for (const w of h.waits) {
    const span = w.last_cycle === w.first_cycle ? "" : `–${w.last_cycle}`;
    const until = w.until_cycle !== null ? `, until t=${at(w.until_ms || 0)} [${w.until_cycle}]` : ", still at the end of the log";
    const why = w.reasons.length ? `[${w.reasons.join(", ")}] ` : "";
    step(w.first_cycle, 4, w.from_ms, "wait", [`waiting ${plural(w.cycles, "cycle")}${span ? ` (to cycle ${w.last_cycle})` : ""}${until}: ${why}${w.message}`]);
  }
  steps.sort((a, b) => a.cycle - b.cycle || a.rank - b.rank);
  if (!steps.length) return el("p", { class: "muted", text: "No decision about this job in the log." });
  const grouped = groupRepeats(steps);
  grouped.sort((a, b) => a.cycle - b.cycle || a.rank - b.rank);
  const notes = [];
  for (const [kind, shown, total] of [["waits", h.waits.length, h.waits_total], ["binds", h.binds.length, h.binds_total], ["evictions", h.evictions.length, h.evictions_total], ["phase changes", h.phases.length, h.phases_total]]) {
    if (shown < total) notes.push(`the ${shown} most recent of ${total} ${kind} are listed`);
  }
  if (pipelines.length >= 100) notes.push("the first 100 pipelining decisions are listed");
  return el("div", {},
    notes.length ? el("p", { class: "muted", text: `(${notes.join("; ")})` }) : null,
    el("ol", { class: "timeline", id: "timeline" }, grouped.map((g) =>
      el("li", { class: `step step-${g.kind}`, dataset: { cycle: g.cycle, count: g.count } },
        el("span", { class: "when" }, g.ms !== null ? `t=${at(g.ms)} ` : "", cycleLink(g.cycle),
          g.count > 1 ? ["–", cycleLink(g.lastCycle)] : null),
        el("span", { class: `badge kind-${g.kind}`, text: g.kind }), " ", withNodes(g.parts),
        g.count > 1 ? el("span", { class: "repeat muted", text: ` × ${g.count} cycles (${g.cycle}–${g.lastCycle})` }) : null))));
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

  function ahead(d) {
    const ex = d.explanation;
    if (!ex || !ex.queue_position) return null;
    const items = d.ahead.map((a) => el("li", { dataset: { job: `${a.namespace}/${a.name}` } },
      el("span", { class: "muted", text: `${a.position}. ` }), link(jobHref(a.namespace, a.name), `${a.namespace}/${a.name}`), " ",
      phaseBadge(a.phase), a.wait_reason ? [" ", el("code", { text: reasonLabel(a.wait_reason) })] : null));
    return el("section", { "aria-labelledby": "ahead-h", id: "ahead" },
      el("h3", { id: "ahead-h", text: "Who is ahead of it in its queue" }),
      d.ahead_total
        ? el("div", {},
          el("p", { class: "muted", id: "ahead-count" }, `${plural(d.ahead_total, "waiting job")} of queue ${d.queue} come before it, by the order the cycles recorded (priority, then creation; `, cycleLink(ex.cycle), ")",
            d.ahead_total > d.ahead.length ? `; the first ${d.ahead.length} are listed` : "", ":"),
          el("ul", { class: "ahead", id: "ahead-list" }, items))
        : el("p", { id: "ahead-count", class: "muted", text: `No waiting job of queue ${d.queue} comes before it: it is next.` }));
  }

  function draw(d, pipelines) {
    const ex = d.explanation;
    const waited = d.waited_ms !== null && d.waited_ms !== undefined
      ? el("p", { id: "why-waited" }, "Waiting for ", el("strong", { text: duration(d.waited_ms) }), " of virtual time (from the first cycle of this wait to the log's last cycle).")
      : null;
    const missingQueue = d.queue_exists ? null
      : el("p", { id: "why-queue-missing", class: "why-message", role: "alert" },
        `Queue ${d.queue} does not exist: no scheduling session considers this job until a Queue of that name is created (or the job names another). `,
        link("/ui/queues", "The queues that exist"), ".");
    let why;
    if (ex) {
      why = el("section", { "aria-labelledby": "why-h", class: "why" },
        el("h2", { id: "why-h", text: "Why it waits" }),
        missingQueue,
        el("p", { id: "why-message", class: "why-message", text: ex.message }),
        waited,
        el("p", { id: "why-position" }, `Position in queue ${d.queue}: `, el("strong", { text: String(ex.queue_position) }), ` (as of cycle `, cycleLink(ex.cycle), ")"),
        ahead(d),
        el("h3", { text: "Reasons, most important first" }),
        el("ol", { id: "why-reasons", class: "reasons" }, ex.reasons.map((r) => {
          const facts = reasonFacts(r);
          return el("li", { dataset: { code: r.code } },
            el("span", { class: "reason-text" }, el("code", { text: `[${r.code}]` }), ` ${r.message}`),
            facts ? el("div", { class: "reason-facts muted", text: facts }) : null);
        })),
        Object.keys(ex.pods).length ? el("details", { id: "pods-details" }, el("summary", { text: `Each waiting pod (${Object.keys(ex.pods).length})` }),
          el("dl", { class: "pods" }, Object.entries(ex.pods).flatMap(([p, w]) => [
            el("dt", {}, taskLink(p)), el("dd", { text: w })]))) : null);
    } else if (!d.queue_exists) {
      why = el("section", { class: "why" }, el("h2", { text: "Why it waits" }), missingQueue);
    } else {
      why = el("section", { class: "why" }, el("h2", { text: "Why it waits" }),
        el("p", { id: "why-message", text: d.pending ? "Waiting, but no explanation was recorded yet (the next cycle records one)." : "It does not wait." }));
    }
    const tasks = el("table", { class: "grid", id: "tasks" }, el("caption", { text: `${d.tasks.length} tasks` }),
      el("thead", {}, el("tr", {}, ["Task", "Status", "Node"].map((t) => el("th", { scope: "col", text: t })))),
      el("tbody", {}, d.tasks.map((t) => el("tr", { id: `task-${t.name}` }, el("td", { text: t.name }), el("td", {}, phaseBadge(t.status)), el("td", {}, nodeLink(t.node))))));
    fill(body,
      el("dl", { class: "facts" },
        el("dt", { text: "Queue" }), el("dd", {}, link(`/ui/jobs?queue=${encodeURIComponent(d.queue)}`, d.queue), d.queue_exists ? null : [" ", el("span", { class: "badge missing", text: "no such queue" })]),
        el("dt", { text: "Namespace" }), el("dd", {}, link(`/ui/jobs?namespace=${encodeURIComponent(d.namespace)}`, d.namespace)),
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
