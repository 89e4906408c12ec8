// What the dashboard shows for a page, a job or a cycle that does not exist, and for a link with a
// malformed % escape: what was asked for, and ways back (never a dead end).

import { cycleHref, el, fill, getJSON, link } from "../util.js";

async function lastCycle(signal) {
  try {
    const page = await getJSON("/v1/cycles?latest=1", signal);
    return page.items.length ? page.items[page.items.length - 1].cycle : 0;
  } catch {
    return null;
  }
}

export async function render(main, ctx) {
  const m = ctx.missing || { kind: "page" };
  const path = ctx.params[0] ?? "";
  const back = el("ul", { class: "ways-back" },
    el("li", {}, link("/ui/queues", "the queues")), el("li", {}, link("/ui/jobs", "all jobs")),
    el("li", {}, link("/ui/cycles", "the latest cycles")), el("li", {}, link("/ui/nodes", "the nodes")));
  let title, text, extra = null;
  if (m.kind === "job") {
    const [ns, name] = ctx.params;
    title = "No such job";
    text = `The log has no job ${ns}/${name} (no PodGroup of that name, or it was deleted).`;
    extra = el("p", {}, "Look for it among ", link(`/ui/jobs?q=${encodeURIComponent(name)}`, `the jobs whose name contains “${name}”`),
      " or ", link(`/ui/jobs?namespace=${encodeURIComponent(ns)}`, `the jobs of namespace ${ns}`), ".");
  } else if (m.kind === "cycle") {
    const id = Number(ctx.params[0]);
    const last = await lastCycle(ctx.signal);
    title = "No such cycle";
    text = last === 0 ? `The log holds no cycle yet, so not cycle ${id}.`
      : last !== null && id > last ? `Cycle ${id} has not run yet: the newest cycle in the log is ${last}.`
        : `The log does not hold cycle ${id}.`;
    if (last) extra = el("p", {}, "See ", link(cycleHref(last), `the newest cycle, ${last}`), ".");
  } else if (m.kind === "bad-escape") {
    title = "Malformed address";
    text = `The address /ui/${path} has a broken % escape (a % not followed by two hexadecimal digits, or bytes that are not UTF-8): the link was probably cut or edited by hand.`;
  } else {
    title = "No such page";
    text = `/ui/${path} is not a page of the dashboard.`;
  }
  fill(main, el("div", { class: "missing", id: "missing", dataset: { kind: m.kind } },
    el("h1", { text: title }), el("p", { id: "missing-text", text }), extra,
    el("p", { text: "Go to:" }), back));
  return {};
}
