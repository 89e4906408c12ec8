"""`fumarole study sweep`: inflation experiments over workloads x policies x seeds, one table.

An `Experiment` is every parameter of one inflation run (pod list, node list, policy, engine, seed,
ratio, tuning, tie-break, node-search percentage); `run_experiment` runs it (reading its files, so
any worker can) and answers one row: the parameters and the outcome (pods of the tuned workload,
placed, failed, GPU capacity, GPU allocation when the arrived requests reach 100 % of capacity and
at the end, and fragmentation as % of capacity, CPU seconds).
`sweep` hands the experiments not done yet to a Dask client's workers and appends each answered row
to `rows.jsonl` in the output folder at once (flushed and fsynced), so an interrupted sweep rerun
with the same grid runs only what is missing; when all are done it writes `results.csv`, one row
per experiment in grid order, every parameter a column. The grid itself is `sweep.json`: another
grid in the same folder is refused. The client (local cluster or a scheduler's address) is made
by the command line (daemon/cli/study.py); this module only submits and gathers.
"""

from __future__ import annotations

import csv
import importlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

__all__ = ["COLUMNS", "Experiment", "SweepError", "grid", "run_experiment", "sweep"]

GRID_FILE = "sweep.json"
ROWS_FILE = "rows.jsonl"
RESULTS_FILE = "results.csv"


class SweepError(ValueError):
    """Bad sweep input (the output folder holds another grid, a file cannot be read)."""


@dataclass(frozen=True, slots=True)
class Experiment:
    workload: str  # pod list CSV
    nodes: str  # node list CSV
    policy: str
    engine: str  # core | fast
    seed: int
    ratio: float
    tune: str  # both | up
    tie_break: str  # first | seeded
    percentage_nodes_to_find: int  # core engine only (fast: every node)

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


OUTCOME = (
    "workload_pods",
    "placed",
    "failed",
    "gpu_capacity_milli",
    "gpu_allocated_pct_at_100",
    "gpu_allocated_pct",
    "gpu_fragmentation_pct",
    "cpu_seconds",
)
COLUMNS = tuple(f.name for f in fields(Experiment)) + OUTCOME


def grid(
    workloads: Sequence[str],
    nodes: str,
    policies: Sequence[tuple[str, str, int]],
    seeds: Sequence[int],
    *,
    engine: str,
    ratio: float,
    tune: str,
) -> list[Experiment]:
    """Every (workload, policy, seed); `policies` as (name, tie-break, node-search percentage)."""
    return [
        Experiment(w, nodes, p, engine, s, ratio, tune, ties, pct)
        for w in workloads
        for p, ties, pct in policies
        for s in seeds
    ]


def run_experiment(exp: Experiment) -> dict[str, Any]:
    """One inflation experiment, in this process: its row."""
    from fumarole.daemon.scheduler.framework.conf import parse_conf
    from fumarole.daemon.study.confs import preset_text
    from fumarole.daemon.study.core_engine import CoreCluster
    from fumarole.daemon.study.inflation import inflation_workload, typical_of
    from fumarole.daemon.study.placement import Cluster, Placement
    from fumarole.daemon.study.trace import read_nodes, read_pods

    began = time.process_time()
    nodes = read_nodes(Path(exp.nodes))
    pods = read_pods(Path(exp.workload))
    seeded = exp.tie_break == "seeded"
    fast_policy = exp.policy if exp.engine == "fast" else "fgd"
    cluster = Cluster(nodes, fast_policy, typical_of(pods), tie_seed=exp.seed if seeded else None)
    workload = inflation_workload(pods, cluster.gpu_capacity, exp.ratio, exp.seed, tune=exp.tune)
    core: dict[str, Placement] | None = None
    if exp.engine == "core":
        core = (
            CoreCluster(
                nodes,
                parse_conf(preset_text(exp.policy)),
                arrival_order=True,
                percentage_nodes_to_find=exp.percentage_nodes_to_find,
                tie_seed=exp.seed if seeded else None,
                typical=pods,
            )
            .run([(p, i * 1000) for i, p in enumerate(workload)], float(len(workload)))
            .placed
        )
    capacity = cluster.gpu_capacity
    placed = arrived = allocated = 0
    at_100: float | None = None  # allocated % when the arrived requests first reach 100 % of capacity
    for pod in workload:
        before = allocated
        arrived += pod.total_gpu_milli
        where = core.get(pod.name) if core is not None else cluster.place(pod)
        if where is not None:
            cluster.bind(pod, where)
            placed += 1
            allocated += pod.total_gpu_milli
        if at_100 is None and capacity and arrived >= capacity:
            # as the report's inflation points: this pod's outcome only if it lands exactly on 100 %
            at_100 = 100 * (allocated if arrived == capacity else before) / capacity
    return asdict(exp) | {
        "workload_pods": len(workload),
        "placed": placed,
        "failed": len(workload) - placed,
        "gpu_capacity_milli": capacity,
        "gpu_allocated_pct_at_100": round(at_100, 4) if at_100 is not None else "",
        "gpu_allocated_pct": round(100 * cluster.gpu_allocated() / capacity, 4) if capacity else 0.0,
        "gpu_fragmentation_pct": round(100 * cluster.fragmentation() / capacity, 4) if capacity else 0.0,
        "cpu_seconds": round(time.process_time() - began, 2),
    }


def _done(out: Path) -> dict[str, dict[str, Any]]:
    """Rows already answered (a torn last line, from a crash mid-write, is ignored)."""
    rows: dict[str, dict[str, Any]] = {}
    path = out / ROWS_FILE
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
            exp = Experiment(**{f.name: row[f.name] for f in fields(Experiment)})
        except (ValueError, KeyError, TypeError):
            continue
        rows[exp.key()] = row
    return rows


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line left without its newline (a crash mid-write), so appends start a line."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def prepare(out: Path, experiments: Sequence[Experiment], create: bool = True) -> dict[str, dict[str, Any]]:
    """Check the output folder is new or holds this grid (SweepError otherwise), then (`create`)
    make it for this grid: the rows done."""
    text = json.dumps([asdict(e) for e in experiments], indent=1, sort_keys=True) + "\n"
    path = out / GRID_FILE
    if out.exists():
        if not out.is_dir():
            raise SweepError(f"--out: {out} is not a directory")
        if path.exists():
            if path.read_text(encoding="utf-8") != text:
                raise SweepError(f"--out: {out} holds another sweep ({GRID_FILE} differs); use a new folder")
        elif any(out.iterdir()):
            raise SweepError(f"--out: {out} exists and is not a sweep's folder")
    if not create:
        return {}
    out.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    return _done(out)


def sweep(
    client: Any,
    experiments: Sequence[Experiment],
    out: Path,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Run the experiments of `out` not done yet on the Dask `client`; write results.csv."""
    as_completed: Any = importlib.import_module("distributed").as_completed  # untyped

    done = prepare(out, experiments)
    todo = [e for e in experiments if e.key() not in done]
    say = progress or (lambda _line: None)
    say(
        f"sweep: {len(experiments)} experiments, {len(experiments) - len(todo)} done already, "
        f"{len(todo)} to run"
    )
    if todo:
        _drop_torn_tail(out / ROWS_FILE)
        futures = {
            client.submit(run_experiment, e, key=f"exp-{i}-{e.policy}-{e.seed}", pure=False): e
            for i, e in enumerate(todo)
        }
        with (out / ROWS_FILE).open("a", encoding="utf-8") as f:
            for n, fut in enumerate(as_completed(futures), 1):
                row = fut.result()
                f.write(json.dumps(row, sort_keys=True) + "\n")
                f.flush()
                os.fsync(f.fileno())
                done[Experiment(**{k.name: row[k.name] for k in fields(Experiment)}).key()] = row
                e = futures[fut]
                say(
                    f"sweep: {len(experiments) - len(todo) + n}/{len(experiments)} "
                    f"({Path(e.workload).name} {e.policy} seed {e.seed}: GPU {row['gpu_allocated_pct']:.2f}%)"
                )
    results = out / RESULTS_FILE
    with results.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(COLUMNS))
        w.writeheader()
        for e in experiments:
            w.writerow({c: done[e.key()].get(c, "") for c in COLUMNS})
    return results
