// Queues: the hierarchy (capacity) or the flat list (proportion), resources as bars with demand
// (request, inqueue), sortable; below, history charts per queue from GET /v1/queue-history.

import { resourceBar, fractionBar, lineChart } from "../charts.js";
import { setQuery } from "../app.js";
import { fill, compare, el, getJSON, heading, link, sortableTable } from "../util.js";

const RESOURCE_KEYS = ["allocated", "deserved", "capability", "guarantee", "request", "inqueue"];
const HISTORY_POINTS = 120;

export async function render(main, ctx) {
  const sort = { key: ctx.query.get("sort") || "name", desc: ctx.query.get("desc") === "1" };
  const body = el("div");
  let data = null;

  async function load() {
    const [queues, jobs] = await Promise.all([getJSON("/v1/queues", ctx.signal), getJSON("/v1/jobs", ctx.signal)]);
    const counts = new Map();
    for (const j of jobs.items) {
      const c = counts.get(j.queue) || { pending: 0, running: 0, jobs: 0 };
      c.jobs++;
      if (j.pending && j.phase !== "Running") c.pending++; // a Running job with a few pods pending does not wait
      if (j.phase === "Running") c.running++;
      counts.set(j.queue, c);
    }
    let history = null;
    try {
      history = await getJSON(`/v1/queue-history?points=${HISTORY_POINTS}`, ctx.signal);
    } catch (err) {
      if (err.name === "AbortError") throw err;
      history = { error: String(err.message || err) };
    }
    data = { queues: queues.items, counts, folded: queues.folded_seq, history };
  }

  const historyBox = el("section", { class: "history", "aria-labelledby": "history-h" });

  function drawHistory() {
    const h = data.history;
    const head = el("h2", { id: "history-h", text: "History" });
    if (!h || h.error) return fill(historyBox, head, el("p", { class: "error", role: "alert", text: `History unavailable: ${h ? h.error : "not loaded"}` }));
    if (!h.cycles.length || !h.queues.length) return fill(historyBox, head, el("p", { class: "muted empty", text: "No cycles recorded yet: the history appears once the scheduler has run a cycle." }));
    const xs = h.cycles;
    const names = h.queues.filter((q) => q.name !== "root");
    const cpu = (q, k) => q[k].cpu || xs.map(() => null);
    fill(historyBox, head,
      el("p", { class: "muted", text: `Cycles ${h.from_cycle}–${h.to_cycle}, ${xs.length} samples (each the state as of that cycle), ${h.recorded} figure changes recorded.` }),
      el("div", { class: "charts history-charts" },
        lineChart({ id: "chart-share", xs, title: "Share (dominant, 100% = deserved)", series: names.map((q) => ({ name: q.name, values: q.share })), format: (v) => `${Math.round(v * 100)}%` }),
        lineChart({ id: "chart-waiting", xs, title: "Waiting jobs", series: names.map((q) => ({ name: q.name, values: q.waiting })), format: (v) => String(v) }),
        lineChart({ id: "chart-allocated", xs, title: "Allocated cpu (cores)", series: names.map((q) => ({ name: q.name, values: cpu(q, "allocated") })), format: (v) => String(Number(v.toPrecision(3))) }),
        lineChart({ id: "chart-deserved", xs, title: "Deserved cpu (cores)", series: names.map((q) => ({ name: q.name, values: cpu(q, "deserved") })), format: (v) => String(Number(v.toPrecision(3))) })));
  }

  function draw() {
    const { queues, counts } = data;
    const byName = new Map(queues.map((q) => [q.name, q]));
    const hierarchical = queues.some((q) => q.parent && byName.has(q.parent));
    const resources = [...new Set(queues.flatMap((q) => RESOURCE_KEYS.flatMap((k) => Object.keys(q[k] || {}))))].sort();
    const cnt = (q) => counts.get(q.name) || { pending: 0, running: 0, jobs: 0 };
    const columns = [
      { key: "name", label: "Queue", value: (q) => q.name, render: (q) => el("span", { class: "tree", style: { paddingLeft: `${q._depth * 1.2}em` } }, q._depth ? "└ " : "", link(`/ui/jobs?queue=${encodeURIComponent(q.name)}`, q.name)) },
      { key: "state", label: "State", value: (q) => q.state, render: (q) => el("span", { class: `badge state-${q.state.toLowerCase()}`, text: q.state }) },
      { key: "weight", label: "Weight", value: (q) => q.weight, numeric: true },
      { key: "share", label: "Share", value: (q) => q.share, numeric: true, render: (q) => fractionBar(q.share, "share", "share") },
      { key: "pending", label: "Pending jobs", value: (q) => cnt(q).pending, numeric: true, render: (q) => link(`/ui/jobs?queue=${encodeURIComponent(q.name)}&pending=1`, String(cnt(q).pending)) },
      { key: "running", label: "Running jobs", value: (q) => cnt(q).running, numeric: true, render: (q) => link(`/ui/jobs?queue=${encodeURIComponent(q.name)}&phase=Running`, String(cnt(q).running)) },
      { key: "resources", label: "Allocated / deserved per resource (demand)", render: (q) => el("div", { class: "resources" }, resources.filter((r) => RESOURCE_KEYS.some((k) => q[k] && r in q[k])).map((r) => resourceBar(r, q))) },
    ];
    const col = columns.find((c) => c.key === sort.key && c.value) || columns[0];
    const cmp = compare(col.value, sort.desc);
    let rows;
    if (hierarchical) {
      const children = new Map();
      for (const q of queues) {
        const p = q.parent && byName.has(q.parent) && q.parent !== q.name ? q.parent : "";
        if (!children.has(p)) children.set(p, []);
        children.get(p).push(q);
      }
      rows = [];
      const seen = new Set();
      const walk = (parent, depth) => {
        for (const q of (children.get(parent) || []).sort(cmp)) {
          if (seen.has(q.name)) continue;
          seen.add(q.name);
          rows.push({ ...q, _depth: depth });
          walk(q.name, depth + 1);
        }
      };
      walk("", 0);
    } else {
      rows = queues.map((q) => ({ ...q, _depth: 0 })).sort(cmp);
    }
    if (!queues.length) {
      fill(body, el("p", { class: "muted empty", text: "No queues in the log yet." }));
      return;
    }
    fill(body,
      el("p", { class: "muted" }, hierarchical ? "Hierarchical queues (capacity plugin): children under their parent, sorted among siblings." : "Flat queues (proportion plugin).",
        " Bars: allocated (fill, red past deserved), deserved (dark tick), guarantee (green tick), request (short grey tick), scaled to the effective capability (or, without one, to the largest figure). req / inq: resources requested by the queue's jobs and by its Inqueue jobs."),
      sortableTable({
        columns, rows, sort, caption: `${queues.length} queues`,
        rowAttrs: (q) => ({ "data-queue": q.name, "aria-level": hierarchical ? q._depth + 1 : undefined }),
        onSort: (s) => { Object.assign(sort, s); setQuery({ sort: s.key, desc: s.desc ? "1" : "" }); draw(); },
      }));
  }

  await load();
  fill(main, heading("Queues"), el("div", { class: "table-wrap" }, body), historyBox);
  draw();
  drawHistory();
  return { refresh: async () => { await load(); draw(); drawHistory(); } };
}
