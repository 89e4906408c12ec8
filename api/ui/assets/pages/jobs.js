// Jobs: every job (PodGroup) with filters by queue, phase, namespace and reason (all kept in the URL),
// a name search, sorting and pages; how long each waits; and two summaries: waiting jobs by reason per
// queue, and jobs per namespace (each count a link to the filtered list).

import { setQuery } from "../app.js";
import {
  REASONS, compare, duration, el, fill, getJSON, heading, jobHref, link, phaseBadge, reasonLabel, sortableTable,
} from "../util.js";

const PAGE = 100;

/** The job waits (not a Running job with a few pods pending beyond its minMember). */
export function waits(j) {
  return !j.queue_exists || (j.phase !== "Running" && (j.pending || j.wait_reason !== ""));
}

/** Why the job waits, as a reason code ("unexplained" when nothing was recorded yet; "" when it does not wait). */
export function reasonOf(j) {
  if (!j.queue_exists) return "queue-missing";
  if (j.wait_reason) return j.wait_reason;
  return waits(j) ? "unexplained" : "";
}

export async function render(main, ctx) {
  const q = ctx.query;
  const state = {
    queue: q.get("queue") || "", phase: q.get("phase") || "", namespace: q.get("namespace") || "",
    reason: q.get("reason") || "",
    search: q.get("q") || "", pending: q.get("pending") === "1", page: Number(q.get("page") || 1) || 1,
    sort: { key: q.get("sort") || "name", desc: q.get("desc") === "1" },
  };
  let jobs = [];
  const controls = el("form", { class: "filters", role: "search", on: { submit: (e) => e.preventDefault() } });
  const summaries = el("div", { class: "summaries" });
  const body = el("div");
  const selects = {};

  function select(name, label) {
    const s = el("select", { id: `f-${name}`, name }, el("option", { value: "", text: "all" }));
    s.addEventListener("change", () => { state[name] = s.value; state.page = 1; update(); });
    selects[name] = s;
    return el("label", { for: `f-${name}` }, label, " ", s);
  }

  // The options of each filter follow the jobs (a new queue appears after a refresh) without
  // rebuilding the controls: the open list, the focus and what the user typed stay.
  function syncOptions() {
    const uniq = (f) => [...new Set(jobs.map(f))].filter((v) => v !== "").sort();
    const values = {
      queue: uniq((j) => j.queue), phase: uniq((j) => j.phase || ""), namespace: uniq((j) => j.namespace),
      reason: [...REASONS.map(([c]) => c), "unexplained"].filter((c) => jobs.some((j) => reasonOf(j) === c)),
    };
    for (const [name, vals] of Object.entries(values)) {
      const s = selects[name];
      if (state[name] && !vals.includes(state[name])) vals.push(state[name]); // keep the URL's choice
      const want = ["", ...vals];
      const have = [...s.options].map((o) => o.value);
      if (want.join("\n") === have.join("\n")) continue;
      for (const o of [...s.options]) if (!want.includes(o.value)) o.remove();
      want.forEach((v, i) => {
        if (s.options[i]?.value === v) return;
        const text = v === "" ? "all" : name === "reason" ? reasonLabel(v) : v;
        s.insertBefore(el("option", { value: v, text }), s.options[i] || null);
      });
      s.value = state[name];
    }
  }

  function drawControls() {
    const search = el("input", { id: "f-q", type: "search", name: "q", value: state.search, placeholder: "name contains…", autocomplete: "off" });
    search.addEventListener("input", () => { state.search = search.value; state.page = 1; update(); });
    const pending = el("input", { id: "f-pending", type: "checkbox", name: "pending", checked: state.pending });
    pending.addEventListener("change", () => { state.pending = pending.checked; state.page = 1; update(); });
    fill(controls,
      select("queue", "Queue"), select("phase", "Phase"), select("namespace", "Namespace"), select("reason", "Reason"),
      el("label", { for: "f-q" }, "Name ", search),
      el("label", { for: "f-pending", class: "check" }, pending, " waiting only"));
  }

  function filtered() {
    const needle = state.search.trim().toLowerCase();
    return jobs.filter((j) =>
      (!state.queue || j.queue === state.queue) && (!state.phase || j.phase === state.phase) &&
      (!state.namespace || j.namespace === state.namespace) && (!state.pending || waits(j)) &&
      (!state.reason || reasonOf(j) === state.reason) &&
      (!needle || j.name.toLowerCase().includes(needle) || `${j.namespace}/${j.name}`.toLowerCase().includes(needle)));
  }

  function filterHref(values) {
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(values)) if (v) u.set(k, v);
    return `/ui/jobs?${u}`;
  }

  const columns = [
    { key: "name", label: "Job", value: (j) => `${j.namespace}/${j.name}`, render: (j) => link(jobHref(j.namespace, j.name), `${j.namespace}/${j.name}`) },
    { key: "namespace", label: "Namespace", value: (j) => j.namespace, render: (j) => link(filterHref({ namespace: j.namespace }), j.namespace) },
    { key: "queue", label: "Queue", value: (j) => j.queue,
      render: (j) => (j.queue_exists ? link(filterHref({ queue: j.queue }), j.queue, { class: "queue-link" }) : el("span", {}, j.queue, " ", el("span", { class: "badge missing", text: "no such queue" }))) },
    { key: "phase", label: "Phase", value: (j) => j.phase || "", render: (j) => phaseBadge(j.phase) },
    { key: "pending", label: "Waiting", value: (j) => (waits(j) ? 2 : j.pending ? 1 : 0),
      render: (j) => (waits(j) ? el("span", { class: "badge waiting", text: "waiting" }) : j.pending ? el("span", { class: "badge", text: "pods pending" }) : "") },
    { key: "waited", label: "Waited", numeric: true, value: (j) => (j.waited_ms ?? -1),
      render: (j) => (j.waited_ms === null || j.waited_ms === undefined ? "" : el("span", { title: `${j.waited_ms} ms of virtual time, to the last cycle` }, duration(j.waited_ms))) },
    { key: "reason", label: "Reason", value: (j) => reasonOf(j), render: (j) => (reasonOf(j) ? el("code", { text: reasonLabel(reasonOf(j)) }) : "") },
    { key: "min", label: "minMember", value: (j) => j.min_member, numeric: true },
    { key: "tasks", label: "Tasks", value: (j) => j.tasks, numeric: true },
    { key: "status", label: "Tasks by status", render: (j) => Object.entries(j.tasks_by_status).map(([s, n]) => `${n} ${s}`).join(", ") },
  ];

  function drawSummaries() {
    const waiting = jobs.filter(waits);
    const codes = [...REASONS.map(([c]) => c), "unexplained"].filter((c) => waiting.some((j) => reasonOf(j) === c));
    const perQueue = new Map();
    for (const j of waiting) {
      const row = perQueue.get(j.queue) || new Map();
      row.set(reasonOf(j), (row.get(reasonOf(j)) || 0) + 1);
      perQueue.set(j.queue, row);
    }
    const queues = [...perQueue.keys()].sort();
    const byReason = waiting.length
      ? el("table", { class: "grid compact", id: "by-reason" },
        el("caption", { text: `Waiting jobs by reason (the most important reason of each), per queue: ${waiting.length} waiting` }),
        el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Queue" }), codes.map((c) => el("th", { scope: "col", class: "num", text: reasonLabel(c) })),
          el("th", { scope: "col", class: "num", text: "all" }))),
        el("tbody", {}, queues.map((qn) => {
          const row = perQueue.get(qn);
          const all = [...row.values()].reduce((a, b) => a + b, 0);
          return el("tr", { dataset: { queue: qn } }, el("th", { scope: "row" }, link(filterHref({ queue: qn }), qn, { class: "queue-link" })),
            codes.map((c) => el("td", { class: "num", dataset: { reason: c } }, row.get(c) ? link(filterHref({ queue: qn, reason: c }), String(row.get(c))) : "")),
            el("td", { class: "num" }, link(filterHref({ queue: qn, pending: "1" }), String(all))));
        })))
      : el("p", { id: "by-reason", class: "muted", text: jobs.length ? "No job waits." : "" });
    const perNs = new Map();
    for (const j of jobs) {
      const c = perNs.get(j.namespace) || { jobs: 0, waiting: 0, longest: null };
      c.jobs++;
      if (waits(j)) c.waiting++;
      if (j.waited_ms !== null && j.waited_ms !== undefined) c.longest = Math.max(c.longest ?? 0, j.waited_ms);
      perNs.set(j.namespace, c);
    }
    const byNs = perNs.size
      ? el("table", { class: "grid compact", id: "by-namespace" },
        el("caption", { text: `Jobs per namespace (${perNs.size})` }),
        el("thead", {}, el("tr", {}, ["Namespace", "Jobs", "Waiting", "Longest wait"].map((t, i) => el("th", { scope: "col", class: i ? "num" : undefined, text: t })))),
        el("tbody", {}, [...perNs.keys()].sort().map((ns) => {
          const c = perNs.get(ns);
          return el("tr", { dataset: { namespace: ns } },
            el("th", { scope: "row" }, link(filterHref({ namespace: ns }), ns)),
            el("td", { class: "num", text: String(c.jobs) }),
            el("td", { class: "num" }, c.waiting ? link(filterHref({ namespace: ns, pending: "1" }), String(c.waiting)) : "0"),
            el("td", { class: "num", text: c.longest === null ? "" : duration(c.longest) }));
        })))
      : null;
    fill(summaries, byReason, byNs);
  }

  /** After a redraw, the focus back on the pager button pressed (or the other one, once it is disabled). */
  function keepFocus(id, other) {
    const b = document.getElementById(id);
    (b && !b.disabled ? b : document.getElementById(other))?.focus();
  }

  function update() {
    setQuery({
      queue: state.queue, phase: state.phase, namespace: state.namespace, reason: state.reason, q: state.search,
      pending: state.pending ? "1" : "", page: state.page > 1 ? state.page : "",
      sort: state.sort.key !== "name" ? state.sort.key : "", desc: state.sort.desc ? "1" : "",
    });
    const rows = filtered();
    const col = columns.find((c) => c.key === state.sort.key && c.value) || columns[0];
    rows.sort(compare(col.value, state.sort.desc));
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    state.page = Math.min(Math.max(1, state.page), pages);
    const shown = rows.slice((state.page - 1) * PAGE, state.page * PAGE);
    const pager = el("nav", { class: "pager", "aria-label": "Pages of jobs" },
      el("button", { type: "button", id: "jobs-prev", disabled: state.page <= 1, on: { click: () => { state.page--; update(); keepFocus("jobs-prev", "jobs-next"); } } }, "← previous"),
      el("span", { id: "jobs-page", text: ` page ${state.page} of ${pages} (${(state.page - 1) * PAGE + 1}–${(state.page - 1) * PAGE + shown.length}) ` }),
      el("button", { type: "button", id: "jobs-next", disabled: state.page >= pages, on: { click: () => { state.page++; update(); keepFocus("jobs-next", "jobs-prev"); } } }, "next →"));
    let count;
    if (!jobs.length) count = "The log has no job yet.";
    else if (!rows.length) count = `No job matches these filters (of ${jobs.length} jobs).`;
    else count = `${rows.length} of ${jobs.length} jobs`;
    fill(body,
      el("p", { id: "jobs-count", class: "muted", role: "status", text: count }),
      rows.length ? el("div", { class: "table-wrap" }, sortableTable({
        columns, rows: shown, sort: state.sort, id: "jobs-table",
        rowAttrs: (j) => ({ "data-job": `${j.namespace}/${j.name}` }),
        onSort: (s) => { state.sort = s; update(); },
      })) : null,
      pages > 1 ? pager : null);
  }

  async function load() {
    jobs = (await getJSON("/v1/jobs", ctx.signal)).items;
  }

  await load();
  fill(main, heading("Jobs"), el("section", { "aria-label": "Summaries" }, summaries), controls, body);
  drawControls();
  syncOptions();
  drawSummaries();
  update();
  return { refresh: async () => { await load(); syncOptions(); drawSummaries(); update(); } };
}
