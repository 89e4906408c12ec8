// Jobs: every job (PodGroup) with filters by queue, phase and namespace, a name search, sorting and pages.

import { setQuery } from "../app.js";
import { fill, compare, el, getJSON, heading, jobHref, link, phaseBadge, sortableTable } from "../util.js";

const PAGE = 100;

export async function render(main, ctx) {
  const q = ctx.query;
  const state = {
    queue: q.get("queue") || "", phase: q.get("phase") || "", namespace: q.get("namespace") || "",
    search: q.get("q") || "", pending: q.get("pending") === "1", page: Number(q.get("page") || 1),
    sort: { key: q.get("sort") || "name", desc: q.get("desc") === "1" },
  };
  let jobs = [];
  const controls = el("form", { class: "filters", role: "search", on: { submit: (e) => e.preventDefault() } });
  const body = el("div");

  function select(name, label, values) {
    const s = el("select", { id: `f-${name}`, name },
      el("option", { value: "", text: "all" }), values.map((v) => el("option", { value: v, text: v, selected: state[name] === v })));
    s.addEventListener("change", () => { state[name] = s.value; state.page = 1; update(); });
    return el("label", { for: `f-${name}` }, label, " ", s);
  }

  function drawControls() {
    const uniq = (f) => [...new Set(jobs.map(f))].filter((v) => v !== "").sort();
    const search = el("input", { id: "f-q", type: "search", name: "q", value: state.search, placeholder: "name contains…", autocomplete: "off" });
    search.addEventListener("input", () => { state.search = search.value; state.page = 1; update(); });
    const pending = el("input", { id: "f-pending", type: "checkbox", name: "pending", checked: state.pending });
    pending.addEventListener("change", () => { state.pending = pending.checked; state.page = 1; update(); });
    fill(controls, 
      select("queue", "Queue", uniq((j) => j.queue)),
      select("phase", "Phase", uniq((j) => j.phase || "")),
      select("namespace", "Namespace", uniq((j) => j.namespace)),
      el("label", { for: "f-q" }, "Name ", search),
      el("label", { for: "f-pending", class: "check" }, pending, " waiting only"));
  }

  function filtered() {
    const needle = state.search.trim().toLowerCase();
    return jobs.filter((j) =>
      (!state.queue || j.queue === state.queue) && (!state.phase || j.phase === state.phase) &&
      (!state.namespace || j.namespace === state.namespace) && (!state.pending || j.pending) &&
      (!needle || j.name.toLowerCase().includes(needle) || `${j.namespace}/${j.name}`.toLowerCase().includes(needle)));
  }

  const columns = [
    { key: "name", label: "Job", value: (j) => `${j.namespace}/${j.name}`, render: (j) => link(jobHref(j.namespace, j.name), `${j.namespace}/${j.name}`) },
    { key: "queue", label: "Queue", value: (j) => j.queue },
    { key: "phase", label: "Phase", value: (j) => j.phase || "", render: (j) => phaseBadge(j.phase) },
    { key: "pending", label: "Waiting", value: (j) => (j.pending ? 1 : 0), render: (j) => (j.pending ? el("span", { class: "badge waiting", text: "waiting" }) : "") },
    { key: "min", label: "minMember", value: (j) => j.min_member, numeric: true },
    { key: "tasks", label: "Tasks", value: (j) => j.tasks, numeric: true },
    { key: "status", label: "Tasks by status", render: (j) => Object.entries(j.tasks_by_status).map(([s, n]) => `${n} ${s}`).join(", ") },
  ];

  function update() {
    setQuery({
      queue: state.queue, phase: state.phase, namespace: state.namespace, q: state.search,
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
      el("button", { type: "button", disabled: state.page <= 1, on: { click: () => { state.page--; update(); } } }, "← previous"),
      el("span", { id: "jobs-page", text: ` page ${state.page} of ${pages} ` }),
      el("button", { type: "button", disabled: state.page >= pages, on: { click: () => { state.page++; update(); } } }, "next →"));
    fill(body, 
      el("p", { id: "jobs-count", class: "muted", role: "status", text: `${rows.length} of ${jobs.length} jobs` }),
      sortableTable({
        columns, rows: shown, sort: state.sort,
        rowAttrs: (j) => ({ "data-job": `${j.namespace}/${j.name}` }),
        onSort: (s) => { state.sort = s; update(); },
      }),
      pages > 1 ? pager : null);
  }

  async function load() {
    jobs = (await getJSON("/v1/jobs", ctx.signal)).items;
  }

  await load();
  fill(main, heading("Jobs"), controls, body);
  drawControls();
  update();
  return { refresh: async () => { await load(); update(); } };
}
