"""Offline multi-cycle dry runs (`fumarole schedule`): run sessions and apply decisions between them.

Between two sessions a bound pod becomes Running on its node, an evicted pod is removed, and
each PodGroup takes the status the session wrote; pipelining lives only inside a session.
The first session's clock ("now") is given by the caller — the wall clock read once at the CLI
edge, as Volcano's sessions read it, an explicit time, or (`--now manifests`) the newest
creationTimestamp of the inputs — and advances one schedulePeriod (1 s) per cycle.

A PodGroup whose Queue does not exist stays out of every session (as in Volcano), so its phase
never changes; the report still names it, and its pending pods, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fumarole.daemon.scheduler.framework.apply import apply_result
from fumarole.daemon.scheduler.framework.callout import CalloutPort
from fumarole.daemon.scheduler.framework.conf import SchedulerConf
from fumarole.daemon.scheduler.framework.run import SessionResult, run_session
from fumarole.daemon.scheduler.model.job import Condition
from fumarole.daemon.scheduler.model.resources import finite_quantities, resource_list
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskStatus

SCHEDULE_PERIOD_SECONDS = 1.0
NOW_FROM_MANIFESTS = "manifests"


class NowError(ValueError):
    """A `--now` value that is neither RFC 3339, Unix seconds nor "manifests"."""


@dataclass(slots=True)
class OutOfSession:
    """A PodGroup no session sees (its Queue does not exist): its phase as given, and why."""

    phase: str
    conditions: list[Condition]
    reason: str


@dataclass(slots=True)
class DryRunResult:
    cycles: int
    now: float = 0.0
    binds: dict[str, str] = field(default_factory=dict)
    evictions: list[str] = field(default_factory=list)
    eviction_reasons: dict[str, str] = field(default_factory=dict)
    last: SessionResult | None = None
    warnings: list[str] = field(default_factory=list)
    out_of_session: dict[str, OutOfSession] = field(default_factory=dict)
    out_of_session_pending: dict[str, str] = field(default_factory=dict)


def parse_now(value: str) -> float | None:
    """`--now`: Unix seconds, or an RFC 3339 time with its offset; None for "manifests"."""
    if value == NOW_FROM_MANIFESTS:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if math.isfinite(seconds):
            return seconds
        raise NowError(f"--now: {value!r} is not a finite number of Unix seconds")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None or "t" not in value.lower():
        raise NowError(
            f"--now: {value!r} is not an RFC 3339 time (e.g. 2024-03-05T12:00:00Z), "
            f"Unix seconds or {NOW_FROM_MANIFESTS!r}"
        )
    return when.timestamp()


def rfc3339(seconds: float) -> str:
    """UTC, with a fraction only when there is one: 2024-03-05T12:00:00Z."""
    when = datetime.fromtimestamp(seconds, UTC)
    text = when.isoformat(timespec="microseconds" if when.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def start_time(snapshot: ClusterSnapshot) -> float:
    latest = 0.0
    for job in snapshot.jobs.values():
        latest = max(latest, job.creation)
        for t in job.tasks.values():
            latest = max(latest, t.creation)
    return latest


def out_of_session(snapshot: ClusterSnapshot) -> tuple[dict[str, OutOfSession], dict[str, str]]:
    """PodGroups Volcano leaves out of the session for want of their Queue, and their pending pods."""
    groups: dict[str, OutOfSession] = {}
    pending: dict[str, str] = {}
    for uid in sorted(snapshot.jobs):
        job = snapshot.jobs[uid]
        if not job.has_pod_group or job.queue in snapshot.queues:
            continue
        reason = f"queue {job.queue!r} does not exist: the PodGroup is left out of the session"
        groups[uid] = OutOfSession(job.status.phase, list(job.status.conditions), reason)
        for t in sorted(job.tasks.values(), key=lambda t: t.key):
            if t.status == TaskStatus.PENDING:
                pending[t.key] = reason
    return groups, pending


def dry_run(
    snapshot: ClusterSnapshot,
    conf: SchedulerConf,
    cycles: int,
    *,
    now: float | None = None,
    tracer_provider: Any = None,
    between_cycles: Callable[[], object] | None = None,
    callouts: CalloutPort | None = None,
    cycle_done: Callable[[int], object] | None = None,
) -> DryRunResult:
    """Run `cycles` sessions from `now` (None: the newest creationTimestamp of the inputs).

    `between_cycles` is called after applying a session's decisions, before the next session
    (the CLI collects garbage there).  `callouts` is the sessions' callout port (the extender
    plugin: live HTTP, or answers from a file); `cycle_done(i)` is called after each session.
    """
    no_timestamps = False
    if now is None:
        now = start_time(snapshot)
        no_timestamps = now == 0.0
    out = DryRunResult(cycles=cycles, now=now)
    if no_timestamps:
        out.warnings.append(
            "--now manifests: no pod or PodGroup has a metadata.creationTimestamp, so the clock "
            "starts at the Unix epoch (1970-01-01T00:00:00Z); pass --now TIME for another"
        )
    for i in range(cycles):
        snapshot.now = now + i * SCHEDULE_PERIOD_SECONDS
        snapshot.previous_now = now + (i - 1) * SCHEDULE_PERIOD_SECONDS if i else None
        snapshot.session_id = f"session-{i + 1}"
        result = run_session(snapshot, conf, tracer_provider=tracer_provider, callouts=callouts)
        if cycle_done is not None:
            cycle_done(i + 1)
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
            if between_cycles is not None:
                between_cycles()
    out.out_of_session, out.out_of_session_pending = out_of_session(snapshot)
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
    for uid, skipped in res.out_of_session.items():
        podgroups[uid] = {
            "phase": skipped.phase,
            "conditions": [
                {"type": c.type, "reason": c.reason, "message": c.message} for c in skipped.conditions
            ],
            "outOfSession": skipped.reason,
        }
    queues = {}
    for name in sorted({*last.queues, *last.queue_allocated}):
        q = last.queues.get(name, {})
        queues[name] = {
            "deserved": finite_quantities(q.get("deserved")),
            "allocated": finite_quantities(q.get("allocated")),
            "capability": finite_quantities(q.get("capability")),
            "share": round(float(q.get("share", 0.0)), 6),
        }
        written = last.queue_allocated.get(name)
        if written is not None:  # what the session close writes to the Queue's status.allocated
            queues[name]["statusAllocated"] = resource_list(written)
    return {
        "cycles": res.cycles,
        "now": rfc3339(res.now),
        "binds": dict(sorted(res.binds.items())),
        "pipelined": dict(sorted(last.pipelined.items())),
        "evictions": sorted(dict.fromkeys(res.evictions)),
        "evictionReasons": dict(sorted(res.eviction_reasons.items())),
        "podgroups": dict(sorted(podgroups.items())),
        "queues": dict(sorted(queues.items())),
        "pending": dict(sorted({**last.pending, **res.out_of_session_pending}.items())),
    }
