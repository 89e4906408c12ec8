"""Benchmark of `fumarole schedule` as a whole process, on issue 11's generated cluster.

Generates the input with bench/schedule_input.py (1,000 nodes, 10,552 pending pods in 2,000
gangs, ~3.9 MB of YAML, Volcano's default configuration plus binpack; a fixed seed), then runs
`python -m fumarole.daemon.cli schedule --timings` as a subprocess `--repeat` times per input format and
prints one JSON object per format: the best whole-process wall time, its CPU seconds (user +
system of the child), the phases the command reports on stderr (imports and configuration,
load, build, sessions, output: wall and CPU seconds each) and "startup and exit", the rest of
the wall time (interpreter start, the CLI's own imports, teardown).  The output's sha256 is
printed too, so that a faster build can be checked to decide exactly as before, and the machine's
1-minute load average before and after the runs (`load_1min`): the machine is shared.

    python bench/schedule.py                       # YAML and JSON input, 3 runs each
    python bench/schedule.py --formats yaml --repeat 5 --nodes 1000 --gangs 2000 --pods 10552
    python bench/schedule.py --baseline /tmp/base   # before/after, runs alternating (a checkout)

Compiled modules are cached for the runs (in the temporary directory, after a warm-up run per
tree), as an installed package has them; `--no-bytecode-cache` runs in this environment as it is.

Volcano's own scheduler code needs ~35 s for one session on the same input on these machines
(issue 11): `vs_volcano` is that figure divided by the best wall time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from schedule_input import write_inputs  # noqa: E402

VOLCANO_SECONDS = 35.0


def child_env(pycache: Path | None) -> dict[str, str]:
    """The command's environment: compiled modules cached under `pycache` (as an installed
    package has them; PYTHONDONTWRITEBYTECODE=1 would compile the project's modules on each run, ~0.06 CPU
    s here), or this environment unchanged when None."""
    env = dict(os.environ)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def run_once(
    conf: Path, cluster: Path, tree: Path = ROOT, timings: bool = True, env: dict[str, str] | None = None
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "fumarole.daemon.cli",
        "schedule",
        "--conf",
        str(conf),
        "--cluster",
        str(cluster),
    ]
    cmd += ["--now", "manifests", *(["--timings"] if timings else [])]
    before = os.times()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tree, check=False, env=env)
    wall = time.perf_counter() - t0
    after = os.times()
    if p.returncode != 0:
        raise SystemExit(f"fumarole schedule failed ({p.returncode}):\n{p.stderr}")
    timings: dict[str, dict[str, float]] = {}
    for line in p.stderr.splitlines():
        if line.startswith('{"timings"'):
            timings = json.loads(line)["timings"]
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    out = json.loads(p.stdout)
    return {
        "wall_seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "phases": timings,
        "startup_and_exit_seconds": round(wall - sum(v["wall"] for v in timings.values()), 3),
        "binds": len(out["binds"]),
        "output_sha256": hashlib.sha256(p.stdout.encode()).hexdigest(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", nargs="*", default=["yaml", "json"], choices=["yaml", "json"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gangs", type=int, default=2000)
    ap.add_argument("--pods", type=int, default=10552)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="also time the same runs in another checkout (e.g. the base commit; no phase split), "
        "alternating with this tree's runs",
    )
    ap.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="leave the environment as it is (with PYTHONDONTWRITEBYTECODE=1 every run compiles every "
        "module); by default the runs cache compiled modules in a temporary directory, after one "
        "untimed warm-up run per tree",
    )
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fumarole-bench-schedule-") as tmp:
        paths = write_inputs(Path(tmp), a.nodes, a.gangs, a.pods, a.seed)
        env = child_env(None if a.no_bytecode_cache else Path(tmp) / "pycache")
        if not a.no_bytecode_cache:
            for tree in [ROOT, *([a.baseline.resolve()] if a.baseline is not None else [])]:
                run_once(paths["conf"], paths["json"], tree, timings=False, env=env)
        for fmt in a.formats:
            runs, base_runs = [], []
            load_before = os.getloadavg()[0]
            for _ in range(a.repeat):
                if a.baseline is not None:
                    base_runs.append(
                        run_once(paths["conf"], paths[fmt], a.baseline.resolve(), timings=False, env=env)
                    )
                runs.append(run_once(paths["conf"], paths[fmt], env=env))
            best = min(runs, key=lambda r: r["wall_seconds"])
            baseline = {}
            if base_runs:
                b = min(base_runs, key=lambda r: r["wall_seconds"])
                baseline = {
                    "baseline": {
                        "wall_seconds": b["wall_seconds"],
                        "cpu_seconds": b["cpu_seconds"],
                        "wall_seconds_all": [r["wall_seconds"] for r in base_runs],
                        "cpu_seconds_all": [r["cpu_seconds"] for r in base_runs],
                        "same_output": b["output_sha256"] == best["output_sha256"],
                    }
                }
            print(
                json.dumps(
                    {
                        "format": fmt,
                        "input_bytes": paths[fmt].stat().st_size,
                        "nodes": a.nodes,
                        "gangs": a.gangs,
                        "pending_pods": a.pods,
                        "runs": a.repeat,
                        **best,
                        "wall_seconds_all": [r["wall_seconds"] for r in runs],
                        "cpu_seconds_all": [r["cpu_seconds"] for r in runs],
                        "vs_volcano": round(VOLCANO_SECONDS / best["wall_seconds"], 1),
                        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                        **baseline,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
