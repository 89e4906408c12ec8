"""The paper's expected results: reference curves for `fumarole report --paper FILE`.

Reads the simulator's `experiments/analysis/expected_results/analysis_allo_discrete.csv`
(hkust-adsl/kubernetes-scheduler-simulator, the data of Weng et al.'s Fig. 9/10): one row per
(workload, sc_policy, tune, seed), the allocated GPU % at each whole arrived % in columns `0`…`130`.
`paper_curves` answers, per (workload, tune, our policy name), the curve of every seed. Its policy
names (`06-FGD`, …) map to the study presets (`fgd`, …) by `PAPER_POLICIES`.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

__all__ = ["PAPER_POLICIES", "PaperError", "paper_curves"]

PAPER_POLICIES = {
    "01-Random": "random",
    "02-DotProd": "dotprod",
    "03-GpuClustering": "gpuclustering",
    "04-GpuPacking": "gpupacking",
    "05-BestFit": "bestfit",
    "06-FGD": "fgd",
}
REQUIRED = ("workload", "sc_policy", "tune", "seed", "100")


class PaperError(ValueError):
    """The expected-results file cannot be read (one line naming file and line)."""


def paper_curves(path: Path) -> dict[tuple[str, float, str], list[list[float]]]:
    """(workload, tune, policy) -> one curve per seed, the allocated % at arrived 0, 1, … %."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise PaperError(f"--paper: {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise PaperError(f"--paper: {path}: not UTF-8 text (byte {e.start})") from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise PaperError(f"--paper: {path}: no column {missing[0]} (an analysis_allo_discrete.csv?)")
    out: dict[tuple[str, float, str], list[list[float]]] = defaultdict(list)
    for line, row in enumerate(reader, 2):
        policy = PAPER_POLICIES.get(row["sc_policy"], row["sc_policy"])
        try:
            tune = float(row["tune"])
            curve = []
            k = 0
            while str(k) in row and row[str(k)] not in ("", None):
                curve.append(float(row[str(k)]))
                k += 1
        except (TypeError, ValueError):
            raise PaperError(f"--paper: {path}: line {line}: not a number") from None
        out[(row["workload"], tune, policy)].append(curve)
    return dict(out)
