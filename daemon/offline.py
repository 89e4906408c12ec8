"""Offline multi-cycle dry runs (`fumarole schedule`): run sessions and apply decisions between them.

Between two sessions a bound pod becomes Running on its node, an evicted pod is removed, and
each PodGroup takes the status the session wrote; pipelining lives only inside a session.
Virtual time starts at the newest creationTimestamp of the inputs and advances one
schedulePeriod (1 s) per cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from daemon.scheduler.framework.conf import SchedulerConf
from daemon.scheduler.framework.run import SessionResult, run_session
from daemon.scheduler.model.resources import Resource
from daemon.scheduler.model.snapshot import ClusterSnapshot
from daemon.scheduler.model.task import TaskInfo, TaskStatus

SCHEDULE_PERIOD_SECONDS = 1.0


@dataclass(slots=True)
class DryRunResult:
    cycles: int
    binds: dict[str, str] = field(default_factory=dict)
    evictions: list[str] = field(default_factory=list)
    eviction_reasons: dict[str, str] = field(default_factory=dict)
    last: SessionResult | None = None
    warnings: list[str] = field(default_factory=list)


def start_time(snapshot: ClusterSnapshot) -> float:
    latest = 0.0
    for job in snapshot.jobs.values():
        latest = max(latest, job.creation)
        for t in job.tasks.values():
            latest = max(latest, t.creation)
    return latest


def _task_index(snapshot: ClusterSnapshot) -> dict[str, tuple[str, TaskInfo]]:
    idx: dict[str, tuple[str, TaskInfo]] = {}
    for uid, job in snapshot.jobs.items():
        for t in job.tasks.values():
            idx[t.key] = (uid, t)
    return idx


def apply_result(snapshot: ClusterSnapshot, result: SessionResult) -> None:
    """Fold one session's decisions into the snapshot, as the cluster would answer them."""
    idx = _task_index(snapshot)
    nodes = {n.name: n for n in snapshot.nodes}
    for key in result.bind_order:
        node_name = result.binds.get(key)
        if node_name is None or key not in idx:
            continue
        job_uid, task = idx[key]
        job = snapshot.jobs[job_uid]
        node = nodes.get(node_name)
        if node is None:
            continue
        job.update_task_status(task, TaskStatus.RUNNING)
        task.node_name = node_name
        task.last_tx = None
        # The binder writes these on the pod (deviceshare's card choice): later cycles see them.
        task.bind_annotations = dict(result.bind_annotations.get(key, {}))
        if task.uid in node.tasks:
            node.update_task(task)
        else:
            node.add_task(task)
    for ev in result.evictions:
        if ev.task not in idx:
            continue
        job_uid, task = idx[ev.task]
        job = snapshot.jobs[job_uid]
        node = nodes.get(task.node_name)
        if node is not None and task.uid in node.tasks:
            node.remove_task(task)
        job.delete_task(task)
    for uid, pg in result.podgroups.items():
        pg_job = snapshot.jobs.get(uid)
        if pg_job is None:
            continue
        job = pg_job
        job.status.phase = pg.phase
        job.status.conditions = list(pg.conditions)
        job.status.running = pg.running
        job.status.succeeded = pg.succeeded
        job.status.failed = pg.failed


def dry_run(
    snapshot: ClusterSnapshot, conf: SchedulerConf, cycles: int, *, tracer_provider: Any = None
) -> DryRunResult:
    out = DryRunResult(cycles=cycles)
    now = start_time(snapshot)
    for i in range(cycles):
        snapshot.now = now + i * SCHEDULE_PERIOD_SECONDS
        snapshot.session_id = f"session-{i + 1}"
        result = run_session(snapshot, conf, tracer_provider=tracer_provider)
        for key in result.bind_order:
            out.binds[key] = result.binds[key]
        for ev in result.evictions:
            out.evictions.append(ev.task)
            out.eviction_reasons[ev.task] = f"{ev.action}: {ev.reason}" if ev.reason else ev.action
            out.binds.pop(ev.task, None)
        out.warnings.extend(w for w in result.warnings if w not in out.warnings)
        out.last = result
        if i + 1 < cycles:
            apply_result(snapshot, result)
    return out


def quantities(r: Resource | None) -> dict[str, str]:
    """Kubernetes quantity strings; unlimited (infinite) dimensions are left out."""
    if r is None:
        return {}
    finite = Resource(
        r.cpu if math.isfinite(r.cpu) else 0,
        r.memory if math.isfinite(r.memory) else 0,
        {k: v for k, v in r.scalars.items() if math.isfinite(v)},
    )
    out = finite.to_quantities()
    if not math.isfinite(r.cpu):
        out.pop("cpu", None)
    if not math.isfinite(r.memory):
        out.pop("memory", None)
    return out


def to_json(res: DryRunResult) -> dict[str, Any]:
    last = res.last
    assert last is not None
    podgroups = {
        uid: {
            "phase": pg.phase,
            "conditions": [{"type": c.type, "reason": c.reason, "message": c.message} for c in pg.conditions],
        }
        for uid, pg in last.podgroups.items()
    }
    queues = {}
    for name, q in last.queues.items():
        queues[name] = {
            "deserved": quantities(q.get("deserved")),
            "allocated": quantities(q.get("allocated")),
            "capability": quantities(q.get("capability")),
            "share": round(float(q.get("share", 0.0)), 6),
        }
    return {
        "cycles": res.cycles,
        "binds": dict(sorted(res.binds.items())),
        "pipelined": dict(sorted(last.pipelined.items())),
        "evictions": sorted(dict.fromkeys(res.evictions)),
        "evictionReasons": dict(sorted(res.eviction_reasons.items())),
        "podgroups": dict(sorted(podgroups.items())),
        "queues": dict(sorted(queues.items())),
        "pending": dict(sorted(last.pending.items())),
    }
