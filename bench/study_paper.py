"""Draw Fumarole's inflation curves next to the published ones of "Beware of Fragmentation".

Inputs: the paper simulator's expected results, `experiments/analysis/expected_results/
analysis_allo_discrete.csv` of github.com/hkust-adsl/kubernetes-scheduler-simulator (from your own
clone: nothing of it is committed here), and the `inflation_mean.csv` of a `fumarole report` over
our inflation runs. Output: one PNG (the paper's mean and min-max band per policy, dashed, beside
ours, solid) and, on stdout, the table of docs/studies.md.

Usage: python bench/study_paper.py PAPER.csv OUR/inflation_mean.csv[=LABEL SUFFIX] [...] OUT.png
(several reports' curves may be drawn together; a suffix tells same-named policies apart, e.g.
`report-all/inflation_mean.csv=", all nodes"`).
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

PAPER_POLICIES = {"06-FGD": "paper FGD", "05-BestFit": "paper BestFit", "04-GpuPacking": "paper GpuPacking"}
COLUMNS = (90, 95, 100, 110, 120, 129)


def paper_curves(path: Path) -> dict[str, list[tuple[int, float, float, float]]]:
    out: dict[str, list[tuple[int, float, float, float]]] = {}
    with path.open() as f:
        rows = [
            r for r in csv.DictReader(f) if r["workload"] == "openb_pod_list_default" and r["tune"] == "1.3"
        ]
    for policy, label in PAPER_POLICIES.items():
        rs = [r for r in rows if r["sc_policy"] == policy]
        pts = []
        for k in range(0, 131):
            vals = [float(r[str(k)]) for r in rs]
            pts.append((k, statistics.mean(vals), min(vals), max(vals)))
        out[label] = pts
    return out


def our_curves(path: Path, suffix: str = "") -> dict[str, list[tuple[int, float, float, float]]]:
    out: dict[str, list[tuple[int, float, float, float]]] = defaultdict(list)
    with path.open() as f:
        for r in csv.DictReader(f):
            out[f"Fumarole {r.get('group', r['policy'])}{suffix}"].append(
                (int(r["arrived_pct"]), float(r["mean"]), float(r["min"]), float(r["max"]))
            )
    return out


def main() -> None:
    paper, png = Path(sys.argv[1]), Path(sys.argv[-1])
    ours: dict[str, list[tuple[int, float, float, float]]] = {}
    for arg in sys.argv[2:-1]:
        path, _, suffix = arg.partition("=")
        ours.update(our_curves(Path(path), suffix))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=80)
    curves = {**paper_curves(paper), **ours}
    for label, pts in curves.items():
        x = [p[0] for p in pts]
        style = "--" if label.startswith("paper") else "-"
        ax.plot(x, [p[1] for p in pts], style, label=label, lw=1.5)
        ax.fill_between(x, [p[2] for p in pts], [p[3] for p in pts], alpha=0.2)
    ax.set_xlim(80, 130)
    ax.set_ylim(84, 97)
    ax.set_xlabel("arrived GPU requests (% of capacity)")
    ax.set_ylabel("allocated GPUs (% of capacity)")
    ax.set_title("openb_pod_list_default, 10 seeds: Fumarole vs Weng et al. (Fig. 9(a) data)", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(png)
    print("| policy | " + " | ".join(f"{k}%" for k in COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for label, pts in curves.items():
        by = {p[0]: p for p in pts}
        cells = [f"{by[k][1]:.2f} ({by[k][2]:.2f}–{by[k][3]:.2f})" if k in by else "" for k in COLUMNS]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
