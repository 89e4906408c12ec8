"""`fumarole report`: run logs to CSV numbers, figures (daemon.study.figures) and one HTML page.

Files in the output directory: summary.csv (per run, with its engine, trace and configuration),
utilisation.csv (per cycle: cpu/memory/GPU %, pending pods, evictions so far, GPU fragmentation %),
queues.csv, waits.csv; for inflation runs inflation.csv (allocated GPU % at each whole arrived %,
per run), inflation_mean.csv (mean/min/max per group) and table.csv (per workload x policy group:
allocated at 100 % arrived and at the end, the paper's beside when its expected results are
given); the figures in each format asked; index.html. Runs alike in every recorded parameter but
the seed form one group, one curve (`run_params`); labels name the parameters that differ.
Inflation runs get no figure over time (their time is arrival order); the time-series figures are
drawn for daemon runs and timelines, the queue figure only when queue shares were recorded.
"""

from __future__ import annotations

import csv
import hashlib
import html
import statistics
import textwrap
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fumarole.daemon.study.figures import fit_range, save_figure, style
from fumarole.daemon.study.paper_results import paper_curves
from fumarole.daemon.study.report_data import RunData, fold_run, read_events

__all__ = ["inflation_points", "summary_row", "write_report"]

SUMMARY_COLUMNS = (
    "run",
    "mode",
    "policy",
    "engine",
    "trace",
    "conf",
    "seed",
    "makespan_s",
    "wait_mean_s",
    "wait_p50_s",
    "wait_p95_s",
    "wait_p99_s",
    "cpu_util_pct",
    "mem_util_pct",
    "gpu_util_pct",
    "gpu_alloc_final_pct",
    "frag_final_pct",
    "evictions",
    "unplaceable",
)


def _r(x: float) -> float:
    return round(float(x), 3)


def summary_row(run: RunData) -> list[object]:
    """Makespan, wait statistics, time-weighted mean utilisation, final GPU allocation, counts."""
    waits = np.array([w for *_, w in run.waits]) if run.waits else np.zeros(1)
    s = np.array([x[1:4] for x in run.samples]) if run.samples else np.zeros((1, 3))
    t = np.array([x[0] for x in run.samples] or [0.0])
    # Time-weighted means: each sample holds until the next one.
    weights = np.diff(t, append=t[-1]) if t[-1] > t[0] else np.ones(len(t))
    last = run.samples[-1] if run.samples else (0.0, 0.0, 0.0, 0.0, 0, 0, 0.0)
    return [
        run.name,
        run.mode,
        run.params.get("policy", ""),
        run.params.get("engine", "fast" if run.mode in ("inflation", "timeline") else ""),
        run.params.get("trace", ""),
        run.params.get("conf", ""),
        run.params.get("seed", ""),
        _r(run.makespan_s),
        _r(waits.mean()),
        _r(np.percentile(waits, 50)),
        _r(np.percentile(waits, 95)),
        _r(np.percentile(waits, 99)),
        _r(np.average(s[:, 0], weights=weights)),
        _r(np.average(s[:, 1], weights=weights)),
        _r(np.average(s[:, 2], weights=weights)),
        _r(last[3]),
        _r(last[6]),
        run.evictions,
        run.unplaced,
    ]


def inflation_points(run: RunData, top: int = 130) -> list[tuple[int, float]]:
    """Allocated GPU % when the arrived workload first reaches each whole percent 0..top."""
    out: list[tuple[int, float]] = []
    k = 0
    last_alloc = 0.0
    for arrived, alloc in run.inflation:
        while k <= top and arrived >= k:
            out.append((k, _r(alloc if arrived == k else last_alloc)))
            k += 1
        last_alloc = alloc
    return out


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


# --- grouping: runs alike in every parameter but the seed are one curve ---------------------------

_NOT_GROUPED = ("seed", "mode", "workload_pods", "conf_text")
_ORDER = ("policy", "engine", "trace", "conf")


def run_params(run: RunData) -> dict[str, str]:
    """The parameters that make a run's group: everything its log records but the seed (a fast
    study run records no engine: `fast`; a configuration's text is named by a hash)."""
    p = {k: str(v) for k, v in run.params.items() if k not in _NOT_GROUPED}
    if run.mode in ("inflation", "timeline"):
        p.setdefault("engine", "fast")
    if "conf_text" in run.params:
        p["conf_hash"] = hashlib.sha256(str(run.params["conf_text"]).encode()).hexdigest()[:8]
    return p


def _key(p: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(p.items()))


def _ordered(keys: set[str]) -> list[str]:
    return [k for k in _ORDER if k in keys] + sorted(keys - set(_ORDER))


def group_labels(params: Sequence[dict[str, str]]) -> tuple[list[str], str]:
    """A label per group naming the parameters that differ between groups (the policy always),
    and one line of the parameters all share."""
    keys = set().union(*params) if params else set()
    differ = {k for k in keys if len({p.get(k, "") for p in params}) > 1}
    if "conf" in differ:
        differ.discard("conf_hash")  # the names tell them apart already
    labels = []
    for p in params:
        parts = [p.get("policy", "?")] + [f"{k} {p.get(k, '-')}" for k in _ordered(differ - {"policy"})]
        labels.append(" · ".join(parts))
    common = [f"{k} {params[0][k]}" for k in _ordered(keys - differ - {"policy"}) if k != "conf_hash"]
    return labels, ", ".join(common)


# --- inflation: curves, the paper's references, the workload x policy table ---------------------


def _inflation(
    out: Path,
    runs: Sequence[RunData],
    formats: Sequence[str],
    paper: dict[tuple[str, float, str], list[list[float]]] | None,
    xlim: tuple[float, float] | None,
    ylim: tuple[float, float] | None,
) -> tuple[list[tuple[str, str]], str]:
    infl = [r for r in runs if r.mode == "inflation"]
    if not infl:
        return [], ""
    rows: list[list[object]] = []
    groups: dict[tuple[tuple[str, str], ...], list[RunData]] = defaultdict(list)
    for r in infl:
        pts = inflation_points(r)
        groups[_key(run_params(r))].append(r)
        rows.extend([r.name, r.params.get("policy"), r.params.get("seed"), k, a] for k, a in pts)
    _write_csv(out / "inflation.csv", ("run", "policy", "seed", "arrived_pct", "allocated_pct"), rows)
    keys = sorted(groups)
    params = [dict(k) for k in keys]
    labels, common = group_labels(params)
    curves: list[np.ndarray] = []
    agg: list[list[object]] = []
    for k, label, p in zip(keys, labels, params, strict=True):
        cs = [[a for _, a in inflation_points(r)] for r in groups[k]]
        n = min(len(c) for c in cs)
        m = np.array([c[:n] for c in cs])
        curves.append(m)
        agg.extend(
            [label, p.get("policy", ""), i, len(cs), _r(m[:, i].mean()), _r(m[:, i].min()), _r(m[:, i].max())]
            for i in range(n)
        )
    _write_csv(
        out / "inflation_mean.csv", ("group", "policy", "arrived_pct", "runs", "mean", "min", "max"), agg
    )

    # the paper's curves for the workloads (and tuning ratios) of these runs
    refs: list[tuple[str, str, np.ndarray]] = []  # (label, our policy, seeds x points)
    if paper:
        wanted = sorted({(Path(p.get("trace", "")).stem, float(p.get("ratio", "1.3"))) for p in params})
        ours = {p.get("policy", "") for p in params}
        several = len(wanted) > 1
        for workload, tune in wanted:
            found = [(pol, c) for (w, t, pol), c in sorted(paper.items()) if w == workload and t == tune]
            shown = [(pol, c) for pol, c in found if pol in ours] or found
            for pol, cs in shown:
                n = min(len(c) for c in cs)
                where = f" {workload}" if several else ""
                refs.append(
                    (
                        f"paper {pol}{where} (Weng et al., mean of {len(cs)} seeds)",
                        pol,
                        np.array([c[:n] for c in cs]),
                    )
                )

    def draw(ax: Any) -> list[Any]:
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        colour_of: dict[str, Any] = {}
        for i, (m, label, p) in enumerate(zip(curves, labels, params, strict=True)):
            st = style(i)
            colour_of.setdefault(p.get("policy", ""), st["color"])
            x = np.arange(m.shape[1])
            ax.plot(x, m.mean(axis=0), label=f"{label} (mean of {m.shape[0]})", lw=1.3, **st)
            if m.shape[0] > 1:
                ax.fill_between(x, m.min(axis=0), m.max(axis=0), color=st["color"], alpha=0.18, lw=0)
        for j, (label, pol, m) in enumerate(refs):
            colour = colour_of.get(pol, style(len(curves) + j)["color"])
            ax.plot(np.arange(m.shape[1]), m.mean(axis=0), "--", color=colour, lw=1.0, label=label)
        top = max([m.shape[1] for m in curves] + [m.shape[1] for _, _, m in refs]) - 1
        ax.plot([0, top], [0, top], ":", color="grey", lw=1)
        # axes that hold the data where curves part from the diagonal (everything placed) on
        means = [m.mean(axis=0) for m in curves] + [m.mean(axis=0) for _, _, m in refs]
        parted = [int(np.argmax(np.abs(c - np.arange(len(c))) > 2.5)) for c in means]
        parted = [k for k in parted if k > 0] or [0]
        x0 = xlim or (max(0.0, 5 * ((min(parted) - 10) // 5)), float(5 * -(-top // 5)))
        ax.set_xlim(*x0)
        lo = int(x0[0])
        seen = [float(v) for m in curves for v in m[:, lo:].ravel()] + [
            float(v) for _, _, m in refs for v in m.mean(axis=0)[lo:]
        ]
        ax.set_ylim(*(ylim or fit_range(seen, lo=0)))
        extra: list[Any] = [
            Line2D([], [], ls=":", color="grey", lw=1, label="diagonal: allocated = arrived (nothing failed)")
        ]
        if any(m.shape[0] > 1 for m in curves):
            extra.insert(0, Patch(color="grey", alpha=0.3, label="shaded band: min–max over seeds"))
        if refs:
            extra.append(
                Line2D([], [], ls="--", color="black", lw=1, label="dashed: the paper's curve, same colour")
            )
        return extra

    title = "GPU allocated vs arrived workload"
    if common:
        title += "\n" + textwrap.shorten(common, 110)
    save_figure(
        out / "inflation",
        formats,
        title,
        "arrived GPU requests (% of capacity)",
        "allocated GPUs (% of capacity)",
        draw,
    )
    html_table = _policy_table(out, keys, groups, paper)
    return [("inflation", "GPU allocated vs arrived workload (cf. Weng et al. Fig. 9(a))")], html_table


TABLE_COLUMNS = (
    "trace",
    "policy",
    "engine",
    "conf",
    "parameters",
    "runs",
    "alloc_at_100_mean",
    "alloc_at_100_min",
    "alloc_at_100_max",
    "alloc_end_mean",
    "alloc_end_min",
    "alloc_end_max",
    "paper_at_100_mean",
    "paper_at_130_mean",
)


def _policy_table(
    out: Path,
    keys: Sequence[tuple[tuple[str, str], ...]],
    groups: dict[tuple[tuple[str, str], ...], list[RunData]],
    paper: dict[tuple[str, float, str], list[list[float]]] | None,
) -> str:
    """table.csv and its HTML: per workload (row) and policy group (column), allocated GPU % at
    100 % arrived and at the end (mean over seeds), the paper's beside when given."""
    rows: list[list[object]] = []
    cells: dict[tuple[str, str], str] = {}
    cols: list[str] = []
    params = [dict(k) for k in keys]
    no_trace = [{k: v for k, v in p.items() if k != "trace"} for p in params]
    col_labels, _ = group_labels(no_trace)
    for k, p, col in zip(keys, params, col_labels, strict=True):
        trace = Path(p.get("trace", "")).stem
        at100 = [dict(inflation_points(r)).get(100) for r in groups[k]]
        at100v = [a for a in at100 if a is not None]
        end = [r.inflation[-1][1] if r.inflation else 0.0 for r in groups[k]]
        ref = (paper or {}).get((trace, float(p.get("ratio", "1.3")), p.get("policy", "")), [])
        p100 = statistics.mean(c[100] for c in ref) if ref and all(len(c) > 100 for c in ref) else None
        p130 = statistics.mean(c[-1] for c in ref) if ref else None
        others = "; ".join(
            f"{a} {b}" for a, b in sorted(p.items()) if a not in ("trace", "policy", "engine", "conf")
        )

        def stats(v: list[float]) -> list[object]:
            return [_r(statistics.mean(v)), _r(min(v)), _r(max(v))] if v else ["", "", ""]

        rows.append(
            [
                trace,
                p.get("policy", ""),
                p.get("engine", ""),
                p.get("conf", ""),
                others,
                len(groups[k]),
                *stats(at100v),
                *stats(end),
                "" if p100 is None else _r(p100),
                "" if p130 is None else _r(p130),
            ]
        )
        if col not in cols:
            cols.append(col)
        cell = (
            f"{statistics.mean(at100v):.2f} / {statistics.mean(end):.2f}"
            if at100v
            else f"– / {statistics.mean(end):.2f}"
        )
        if p130 is not None:
            cell += f" (paper {'–' if p100 is None else f'{p100:.2f}'} / {p130:.2f})"
        cells[(trace, col)] = cell + f" [{len(groups[k])}]"
    _write_csv(out / "table.csv", TABLE_COLUMNS, rows)
    traces = sorted({r[0] for r in rows}, key=str)
    head = "<th>workload</th>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        f"<tr><td>{html.escape(str(t))}</td>"
        + "".join(f"<td>{html.escape(cells.get((str(t), c), ''))}</td>" for c in cols)
        + "</tr>\n"
        for t in traces
    )
    return (
        "<h2>Allocated GPUs per workload and policy (cf. Weng et al. Fig. 9/10)</h2>\n"
        "<p>% of GPU capacity, mean over seeds: when the arrived requests reach 100 % of capacity / at the "
        "end of the run (130 % arrived); the paper's in parentheses when given; [runs]. "
        "Numbers: table.csv.</p>\n"
        f"<table><tr>{head}</tr>\n{body}</table>\n"
    )


# --- runs over time (daemon runs, timelines): not inflation, whose time is only arrival order ---


def _series_figures(
    out: Path, runs: Sequence[RunData], formats: Sequence[str]
) -> tuple[list[tuple[str, str]], str]:
    runs = [r for r in runs if r.mode != "inflation"]
    if not runs:
        return [], ""
    figs: list[tuple[str, str]] = []
    notes = ""

    def lines(col: int, scale: float) -> Callable[[Any], None]:
        def draw(ax: Any) -> None:
            for i, r in enumerate(runs):
                if r.samples:
                    t = [x[0] / scale for x in r.samples]
                    ax.plot(t, [x[col] for x in r.samples], label=r.label, lw=1, **style(i))

        return draw

    span = max((r.samples[-1][0] for r in runs if r.samples), default=0.0)
    scale, unit = (3600.0, "h") if span > 7200 else (1.0, "s")

    def util(ax: Any) -> list[Any]:
        from matplotlib.lines import Line2D

        dashes = {"cpu": "-", "memory": "--", "GPU": "-."}
        for i, r in enumerate(runs):
            t = [x[0] / scale for x in r.samples]
            for col, name in ((1, "cpu"), (2, "memory"), (3, "GPU")):
                ax.plot(
                    t,
                    [x[col] for x in r.samples],
                    dashes[name],
                    color=style(i)["color"],
                    lw=1,
                    label=f"{r.label}" if col == 1 else None,
                )
        return [Line2D([], [], ls=d, color="grey", lw=1, label=f"line style: {n}") for n, d in dashes.items()]

    for stem, title, ylabel, draw in (
        ("utilisation", "Utilisation (allocated / capacity)", "%", util),
        ("pending", "Pending pods", "pods", lines(4, scale)),
        ("evictions", "Evictions so far", "evictions", lines(5, scale)),
        ("fragmentation", "GPU fragmentation (Weng et al.)", "% of GPU capacity", lines(6, scale)),
    ):
        save_figure(out / stem, formats, title, f"virtual time ({unit})", ylabel, draw)
        figs.append((stem, title))

    with_queues = [r for r in runs if r.queues]

    def queues(ax: Any) -> list[Any]:
        from matplotlib.lines import Line2D

        i = 0
        for r in with_queues:
            by_q: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
            for t, q, a, d in r.queues:
                by_q[q].append((t / scale, a, d))
            for q, pts in sorted(by_q.items()):
                st = style(i)
                i += 1
                ax.plot(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    label=f"{q} · {r.label}",
                    lw=1,
                    color=st["color"],
                )
                ax.plot([p[0] for p in pts], [p[2] for p in pts], "--", lw=1, color=st["color"])
        return [
            Line2D([], [], color="grey", lw=1, label="solid: allocated cpu"),
            Line2D([], [], ls="--", color="grey", lw=1, label="dashed: deserved cpu (proportion)"),
        ]

    if with_queues:
        save_figure(
            out / "queues",
            formats,
            "Queue allocated vs deserved cpu",
            f"virtual time ({unit})",
            "cores",
            queues,
        )
        figs.append(("queues", "Queue allocated vs deserved cpu"))
    else:
        notes = (
            "<p>No queue figure: these runs record no queue shares (the proportion plugin's "
            "figures are logged by daemon runs).</p>\n"
        )

    def cdf(ax: Any) -> None:
        i = 0
        for r in runs:
            groups: dict[str, list[float]] = defaultdict(list)
            for _, q, qos, w in r.waits:
                groups[f"queue {q}"].append(w)
                if qos:
                    groups[f"QoS {qos}"].append(w)
            for g, ws in sorted(groups.items()):
                xs = np.sort(np.array(ws))
                ax.step(
                    xs,
                    np.arange(1, len(xs) + 1) / len(xs),
                    where="post",
                    label=f"{g} · {r.label}",
                    lw=1,
                    color=style(i)["color"],
                )
                i += 1

    save_figure(
        out / "waits", formats, "Wait time CDF per queue and QoS", "wait (s)", "fraction of pods", cdf
    )
    figs.append(("waits", "Wait time CDF per queue and QoS"))
    return figs, notes


def write_report(
    dbs: Sequence[Path],
    out: Path,
    progress: Callable[[str], None] | None = None,
    *,
    formats: Sequence[str] = ("png", "svg"),
    paper: Path | None = None,
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
) -> list[Path]:
    """Read each log (a file given twice once), write the CSVs, figures and index.html into `out`;
    the files written. `paper`: the simulator's analysis_allo_discrete.csv, its curves drawn for
    the workloads of the inflation runs (PaperError if it cannot be read)."""
    refs = paper_curves(paper) if paper is not None else None
    unique: list[Path] = []
    for db in dbs:
        if db.resolve() not in {u.resolve() for u in unique}:
            unique.append(db)
    runs: list[RunData] = []
    stems = [db.stem for db in unique]
    for db in unique:
        if progress is not None:
            progress(f"report: reading {db}")
        # Runs are named by file; by folder and file when two files have the same name.
        name = db.stem if stems.count(db.stem) == 1 else f"{db.parent.name}/{db.stem}"
        runs.append(fold_run(name, read_events(db)))
    out.mkdir(parents=True, exist_ok=True)
    summary = [summary_row(r) for r in runs]
    _write_csv(out / "summary.csv", SUMMARY_COLUMNS, summary)
    _write_csv(
        out / "utilisation.csv",
        ("run", "time_s", "cpu_pct", "mem_pct", "gpu_pct", "pending", "evictions", "frag_pct"),
        [[r.name, *[v if isinstance(v, int) else _r(v) for v in s]] for r in runs for s in r.samples],
    )
    _write_csv(
        out / "queues.csv",
        ("run", "time_s", "queue", "allocated_cpu", "deserved_cpu"),
        [[r.name, *q] for r in runs for q in r.queues],
    )
    _write_csv(
        out / "waits.csv",
        ("run", "pod", "queue", "qos", "wait_s"),
        [[r.name, *w] for r in runs for w in r.waits],
    )
    if progress is not None:
        progress("report: drawing figures")
    infl_figs, table_html = _inflation(out, runs, formats, refs, xlim, ylim)
    series_figs, notes = _series_figures(out, runs, formats)
    figs = infl_figs + series_figs
    table = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>\n" for row in summary
    )
    head = "".join(f"<th>{html.escape(c)}</th>" for c in SUMMARY_COLUMNS)
    shown = "png" if "png" in formats else formats[0]
    imgs = "".join(
        f"<h2>{html.escape(t)}</h2>\n"
        f'<img src="{f}.{shown}" alt="{html.escape(t)}" style="max-width:100%;width:900px">\n<p>'
        + " ".join(f'<a href="{f}.{x}">{x.upper()}</a>' for x in formats)
        + "</p>\n"
        for f, t in figs
    )
    page = (
        "<!doctype html>\n<html><head><meta charset='utf-8'><title>Fumarole report</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}</style></head><body>\n"
        f"<h1>Fumarole report: {len(runs)} run(s)</h1>\n"
        f"<table><tr>{head}</tr>\n{table}</table>\n{table_html}{imgs}{notes}"
        "<p>Numbers behind each figure: the CSV files beside this page.</p></body></html>\n"
    )
    (out / "index.html").write_text(page, encoding="utf-8")
    return sorted(p for p in out.iterdir() if p.is_file())
