"""`fumarole report`: run logs to CSV numbers, PNG figures (matplotlib, Agg) and one HTML page.

Files in the output directory: summary.csv, utilisation.csv (per cycle: cpu/memory/GPU %, pending
pods, evictions so far, GPU fragmentation %), queues.csv, waits.csv, inflation.csv (inflation runs:
allocated GPU % at each whole arrived %, per run, and mean/min/max per policy), the figures
*.png and index.html. Several logs (`--compare`) are overlaid in each figure.
"""

from __future__ import annotations

import csv
import html
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from daemon.study.report_data import RunData, fold_run, read_events

__all__ = ["inflation_points", "summary_row", "write_report"]

SUMMARY_COLUMNS = (
    "run",
    "mode",
    "policy",
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


def _figure(path: Path, title: str, xlabel: str, ylabel: str, draw: Callable[[object], None]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=80)
    draw(ax)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a long legend: tight layout does what it can
        fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _series_figures(out: Path, runs: Sequence[RunData]) -> list[tuple[str, str]]:
    figs: list[tuple[str, str]] = []

    def lines(col: int, scale: float = 1.0) -> Callable[[object], None]:
        def draw(ax: object) -> None:
            for r in runs:
                if r.samples:
                    t = [x[0] / scale for x in r.samples]
                    ax.plot(t, [x[col] for x in r.samples], label=r.label, lw=1)  # type: ignore[attr-defined]

        return draw

    span = max((r.samples[-1][0] for r in runs if r.samples), default=0.0)
    scale, unit = (3600.0, "h") if span > 7200 else (1.0, "s")

    def util(ax: object) -> None:
        for r in runs:
            t = [x[0] / scale for x in r.samples]
            for col, name in ((1, "cpu"), (2, "memory"), (3, "GPU")):
                ax.plot(t, [x[col] for x in r.samples], label=f"{name} {r.label}", lw=1)  # type: ignore[attr-defined]

    for fname, title, ylabel, draw in (
        ("utilisation.png", "Utilisation (allocated / capacity)", "%", util),
        ("pending.png", "Pending pods", "pods", lines(4, scale)),
        ("evictions.png", "Evictions so far", "evictions", lines(5, scale)),
        ("fragmentation.png", "GPU fragmentation (Weng et al.)", "% of GPU capacity", lines(6, scale)),
    ):
        _figure(out / fname, title, f"virtual time ({unit})", ylabel, draw)
        figs.append((fname, title))

    def queues(ax: object) -> None:
        for r in runs:
            by_q: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
            for t, q, a, d in r.queues:
                by_q[q].append((t / scale, a, d))
            for q, pts in sorted(by_q.items()):
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"{q} allocated {r.label}", lw=1)  # type: ignore[attr-defined]
                ax.plot([p[0] for p in pts], [p[2] for p in pts], "--", label=f"{q} deserved", lw=1)  # type: ignore[attr-defined]

    _figure(out / "queues.png", "Queue allocated vs deserved cpu", f"virtual time ({unit})", "cores", queues)
    figs.append(("queues.png", "Queue allocated vs deserved cpu"))

    def cdf(ax: object) -> None:
        for r in runs:
            groups: dict[str, list[float]] = defaultdict(list)
            for _, q, qos, w in r.waits:
                groups[f"queue {q}"].append(w)
                if qos:
                    groups[f"QoS {qos}"].append(w)
            for g, ws in sorted(groups.items()):
                xs = np.sort(np.array(ws))
                ax.step(xs, np.arange(1, len(xs) + 1) / len(xs), where="post", label=f"{g} {r.label}", lw=1)  # type: ignore[attr-defined]

    _figure(out / "waits.png", "Wait time CDF per queue and QoS", "wait (s)", "fraction of pods", cdf)
    figs.append(("waits.png", "Wait time CDF per queue and QoS"))
    return figs


def _inflation(out: Path, runs: Sequence[RunData]) -> list[tuple[str, str]]:
    infl = [r for r in runs if r.mode == "inflation"]
    if not infl:
        return []
    rows: list[list[object]] = []
    by_policy: dict[str, list[list[tuple[int, float]]]] = defaultdict(list)
    for r in infl:
        pts = inflation_points(r)
        by_policy[str(r.params.get("policy"))].append(pts)
        rows.extend([r.name, r.params.get("policy"), r.params.get("seed"), k, a] for k, a in pts)
    _write_csv(out / "inflation.csv", ("run", "policy", "seed", "arrived_pct", "allocated_pct"), rows)
    agg: list[list[object]] = []
    for policy, curves in sorted(by_policy.items()):
        n = min(len(c) for c in curves)
        m = np.array([[a for _, a in c[:n]] for c in curves])
        for k in range(n):
            agg.append([policy, k, len(curves), _r(m[:, k].mean()), _r(m[:, k].min()), _r(m[:, k].max())])
    _write_csv(out / "inflation_mean.csv", ("policy", "arrived_pct", "runs", "mean", "min", "max"), agg)

    def draw(ax: object) -> None:
        for policy in sorted(by_policy):
            pts = [r for r in agg if r[0] == policy]
            x = [float(str(p[1])) for p in pts]
            ax.plot(x, [p[3] for p in pts], label=f"{policy} (mean of {pts[0][2]})", lw=1.5)  # type: ignore[attr-defined]
            ax.fill_between(x, [p[4] for p in pts], [p[5] for p in pts], alpha=0.25)  # type: ignore[attr-defined]
        ax.plot([0, 130], [0, 130], ":", color="grey", lw=1)  # type: ignore[attr-defined]
        ax.set_xlim(70, 130)  # type: ignore[attr-defined]
        ax.set_ylim(70, 100)  # type: ignore[attr-defined]

    _figure(
        out / "inflation.png",
        "GPU allocated vs arrived workload",
        "arrived GPU requests (% of capacity)",
        "allocated GPUs (% of capacity)",
        draw,
    )
    return [("inflation.png", "GPU allocated vs arrived workload (cf. Weng et al. Fig. 9(a))")]


def write_report(dbs: Sequence[Path], out: Path, progress: Callable[[str], None] | None = None) -> list[Path]:
    """Read each log, write the CSVs, figures and index.html into `out`; the files written."""
    runs: list[RunData] = []
    stems = [db.stem for db in dbs]
    for db in dbs:
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
    figs = _inflation(out, runs) + _series_figures(out, runs)
    table = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>\n" for row in summary
    )
    head = "".join(f"<th>{html.escape(c)}</th>" for c in SUMMARY_COLUMNS)
    imgs = "".join(f'<h2>{html.escape(t)}</h2>\n<img src="{f}" alt="{html.escape(t)}">\n' for f, t in figs)
    page = (
        "<!doctype html>\n<html><head><meta charset='utf-8'><title>Fumarole report</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}</style></head><body>\n"
        f"<h1>Fumarole report: {html.escape(', '.join(r.name for r in runs))}</h1>\n"
        f"<table><tr>{head}</tr>\n{table}</table>\n{imgs}"
        "<p>Numbers behind each figure: the CSV files beside this page.</p></body></html>\n"
    )
    (out / "index.html").write_text(page, encoding="utf-8")
    return sorted(p for p in out.iterdir() if p.is_file())
