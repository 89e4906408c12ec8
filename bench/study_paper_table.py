"""The workload x policy table of docs/studies.md: sweep results against the paper's expected results.

Inputs: one or more `fumarole study sweep` results.csv files and the paper simulator's
`experiments/analysis/expected_results/analysis_allo_discrete.csv` (hkust-adsl/kubernetes-
scheduler-simulator; from your own clone, nothing of it is committed here). Output on stdout: a
Markdown table, one row per (workload, policy, node list): our mean over the seeds run (their
count) of the allocated GPU % at 100 % arrived and at the end (130 %), the paper's mean over its
10 seeds at the same two points, and the differences.

Usage: python bench/study_paper_table.py PAPER.csv RESULTS.csv [RESULTS.csv ...]
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fumarole.daemon.study.paper_results import paper_curves


def main() -> None:
    paper = paper_curves(Path(sys.argv[1]))
    ours: dict[tuple[str, str, str, float], list[dict[str, str]]] = defaultdict(list)
    for path in sys.argv[2:]:
        with open(path, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                key = (Path(r["workload"]).stem, r["policy"], Path(r["nodes"]).name, float(r["ratio"]))
                ours[key].append(r)
    print("| workload | policy | nodes | seeds | ours 100% | paper 100% | Δ | ours 130% | paper 130% | Δ |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (workload, policy, nodes, ratio), rows in sorted(ours.items()):
        a100 = statistics.mean(float(r["gpu_allocated_pct_at_100"]) for r in rows)
        end = statistics.mean(float(r["gpu_allocated_pct"]) for r in rows)
        ref = paper.get((workload, ratio, policy), [])
        p100 = statistics.mean(c[100] for c in ref) if ref else None
        p130 = statistics.mean(c[-1] for c in ref) if ref else None

        def d(a: float, b: float | None) -> str:
            return "" if b is None else f"{a - b:+.2f}"

        def v(b: float | None) -> str:
            return "" if b is None else f"{b:.2f}"

        print(
            f"| {workload.removeprefix('openb_pod_list_')} | {policy} | {nodes} | {len(rows)} | {a100:.2f} | "
            f"{v(p100)} | {d(a100, p100)} | {end:.2f} | {v(p130)} | {d(end, p130)} |"
        )


if __name__ == "__main__":
    main()
