"""Benchmark of the trace studies on the whole Alibaba GPU trace (issue 12); prints one JSON object.

Each case runs `fumarole study ...` in process (reading the CSVs, placing, writing the SQLite event
log) and reports wall and process CPU seconds (the machine may be shared: CPU seconds are the
steadier figure): the timeline (the trace's 8,152 pods on its 1,523 nodes) per policy, one
inflation experiment (seed 42, 130% of GPU capacity, ~10,850 pods) per policy, and
`fumarole report` on one inflation log. Goal: each run under 60 s on the project's 2-core machine.

Both engines are measured (`--engines core,fast`): core (real scheduler sessions under the Volcano
configuration presets) and fast (the numpy study placer).

Usage: python bench/study.py [--trace ../shared/traces/alibaba-gpu-v2023] [--policies binpack,spread,fgd]
       [--engines core,fast] [--modes timeline,inflation]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fumarole.daemon.cli.main import main as fumarole


def timed(argv: list[str]) -> dict[str, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    rc = fumarole(argv)
    if rc != 0:
        raise SystemExit(f"fumarole {' '.join(argv)}: exit {rc}")
    return {"wall_s": round(time.perf_counter() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2)}


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", default=str(root.parent / "shared/traces/alibaba-gpu-v2023"))
    p.add_argument("--policies", default="binpack,spread,fgd")
    p.add_argument("--engines", default="core,fast")
    p.add_argument("--modes", default="timeline,inflation")
    args = p.parse_args()
    out: dict[str, dict[str, float]] = {}
    modes = args.modes.split(",")
    with tempfile.TemporaryDirectory() as d:
        for engine in args.engines.split(","):
            for policy in args.policies.split(","):
                common = ["--trace", args.trace, "--policy", policy, "--engine", engine]
                if "timeline" in modes:
                    db = f"{d}/timeline-{engine}-{policy}.db"
                    out[f"timeline_{engine}_{policy}"] = timed(["study", "timeline", *common, "--out", db])
                if "inflation" in modes:
                    db = f"{d}/inflation-{engine}-{policy}.db"
                    out[f"inflation_{engine}_{policy}_seed42"] = timed(
                        ["study", "inflation", *common, "--seeds", "42", "--out", db]
                    )
        last = f"{args.engines.split(',')[-1]}-{args.policies.split(',')[-1]}"
        if "inflation" in modes:
            out["report_one_inflation_run"] = timed(
                ["report", "--db", f"{d}/inflation-{last}.db", "--out", f"{d}/rep"]
            )
        if "timeline" in modes:
            out["report_timeline_run"] = timed(
                ["report", "--db", f"{d}/timeline-{last}.db", "--out", f"{d}/rep-tl"]
            )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
