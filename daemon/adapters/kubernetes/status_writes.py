"""What Volcano's scheduler writes on Queues and PodGroups, as request bodies and Volcano's comparisons.

Pure functions (no I/O): the sink (sink.py) and the dispatcher call them.  What Volcano writes,
read in volcano-sh/volcano at ed72c7c:

Queue `status.allocated` — framework/session.go `updateQueueStatus`, run by `closeSession` at the
end of every session after the PodGroups: for every queue of the session (the scheduler's cache
holds every Queue; `root` and the default queue are created by the scheduler at start-up,
cache/cache.go `newDefaultAndRootQueue`), the sum of the requests of its jobs' tasks whose status
is Allocated, Binding, Bound or Running (api/helpers.go `AllocatedStatus`; Pipelined, Pending,
Releasing and finished tasks do not count), each task also added to every ancestor queue up to
`root` (a queue without `spec.parent` hangs under `root`); a queue without jobs gets zeros.  The
sum is converted by util/scheduler_helper.go `ConvertRes2ResList`: `cpu` and `memory` always,
plus every scalar the tasks requested (`pods` among them: each task requests one).  It is compared
with `equality.Semantic.DeepEqual` against the Queue's `status.allocated` in the session's copy of
the cache (the informer's object: quantities compared by value, the same names required) and
written only when it differs, by cache/cache.go `UpdateQueueStatus`: a PUT of the whole Queue to
the `status` subresource (the Queue CRD has one), i.e. the informer's status with `allocated`
replaced.  The other status fields — `state`, `pending`/`running`/`inqueue`/`unknown`/
`completed`, `reservation` — are the queue controller's (controllers/queue), never the
scheduler's.  The core computes the figure (daemon/scheduler/framework/close.py
`update_queue_allocated`) and records it as `QueueFigures.status_allocated`.

PodGroup status — framework/job_updater.go, run by `closeSession` first: for every job of the
session the status is the PodGroup's status with `phase`, `running`, `failed`, `succeeded`
recomputed (session.go `jobStatus`) and the conditions the session set (the gang plugin sets one
per job with tasks each session: `Unschedulable` or `Scheduled`, with `lastTransitionTime` now and
`transitionID` the session's id, replacing the condition of the same type in place, else
appended); `isPodGroupStatusUpdated` compares it with the status at session open, ignoring each
condition's `lastTransitionTime` and `transitionID` (conditions compared by position), and only a
changed one is written, by cache/cache.go `UpdateJobStatus` -> `UpdatePodGroup`: a PUT of the whole
PodGroup (the PodGroup CRD has no status subresource).  In the JSON, `phase`, `conditions`,
`running`, `succeeded`, `failed` and a condition's `transitionID`, `reason`, `message` are omitted
when empty (`omitempty`); `lastTransitionTime` is always there (RFC 3339, seconds).  A condition
the session did not set keeps its old `lastTransitionTime`; one it set again has the session's time
even when nothing else about it changed.

Not written here (the sink's other reports): after each job's status, cache.go
`RecordJobStatusEvent` records on the PodGroup a Warning `Unschedulable` event ("N/M tasks in gang
unschedulable: ...") every session while its phase is Pending, Inqueue or Unknown, else a Normal
`Scheduled` event ("pod group is ready") when its status was written; and `taskUnschedulable`
sets the `PodScheduled=False` condition (reason `Unschedulable`, or `Schedulable` for a task
allocated but waiting for its gang) and records a `FailedScheduling` event, only when the
condition's status, reason or message changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fumarole.daemon.scheduler.model.quantity import QuantityError, parse_quantity
from fumarole.store.events import PodGroupStatusChanged, QueueFiguresRecorded

__all__ = [
    "PODGROUP_STATUS_FIELDS",
    "podgroup_status_body",
    "podgroup_status_equal",
    "queue_status_bodies",
    "queue_status_equal",
]

PODGROUP_STATUS_FIELDS = ("phase", "conditions", "running", "succeeded", "failed")
"""The fields of a PodGroup's status (v1beta1 PodGroupStatus): a body leaves out the empty ones."""

_COUNTS = ("running", "succeeded", "failed")
_CONDITION_COMPARED = ("type", "status", "reason", "message")


# ------------------------------------------------------------------------------------------ queues
def queue_status_bodies(e: QueueFiguresRecorded) -> dict[str, dict[str, Any]]:
    """Queue name -> the `status` fields Volcano's session close writes (`{"allocated": {...}}`),
    for every queue of the session, in name order.

    A queue whose figures have no `status_allocated` (an event written before the core recorded
    it) is left out: what Volcano would write is not known.
    """
    return {
        name: {"allocated": dict(figures.status_allocated)}
        for name, figures in sorted(e.queues.items())
        if figures.status_allocated
    }


def queue_status_equal(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two Queue `status` objects hold the same `allocated`, as Volcano's updateQueueStatus
    decides (equality.Semantic.DeepEqual): the same resource names, each quantity equal by value
    ("1000m" equals "1"); missing, null and empty `allocated` are equal.  No other field is
    compared: `allocated` is all the scheduler writes.  A quantity that does not parse makes the
    two unequal (writing again repairs it)."""
    return _resource_lists_equal(_field(a, "allocated"), _field(b, "allocated"))


def _resource_lists_equal(a: Any, b: Any) -> bool:
    left = a if isinstance(a, Mapping) else {}
    right = b if isinstance(b, Mapping) else {}
    if left.keys() != right.keys():
        return False
    try:
        return all(_quantity(left[k]) == _quantity(right[k]) for k in left)
    except (QuantityError, TypeError, ValueError):
        return False


def _quantity(value: Any) -> Any:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise TypeError(f"not a quantity: {value!r}")
    return parse_quantity(value)


# -------------------------------------------------------------------------------------- podgroups
def podgroup_status_body(
    e: PodGroupStatusChanged, now: str, current: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The `status` object Volcano writes on the PodGroup for this change, as its JSON has it.

    Keys in Go's order, empty ones left out (see the module notes); `now` (RFC 3339) is the
    `lastTransitionTime` of the conditions the session set.  `current` is the PodGroup's status
    as the API holds it (or as last written), when known: a condition found there with the same
    type, status, reason, message and `transitionID` was not set by this session (each session
    sets its own id), so it keeps the time it has there, as Volcano's carried-over condition
    does; without `current` every condition gets `now`.
    """
    kept = _condition_times(current)
    conditions = []
    for c in e.conditions:
        cond: dict[str, Any] = {}
        if c.type:
            cond["type"] = c.type
        if c.status:
            cond["status"] = c.status
        if c.transition_id:
            cond["transitionID"] = c.transition_id
        cond["lastTransitionTime"] = kept.get((c.type, c.status, c.reason, c.message, c.transition_id), now)
        if c.reason:
            cond["reason"] = c.reason
        if c.message:
            cond["message"] = c.message
        conditions.append(cond)
    status: dict[str, Any] = {}
    if e.phase:
        status["phase"] = e.phase
    if conditions:
        status["conditions"] = conditions
    for k in _COUNTS:
        v = getattr(e, k)
        if v:
            status[k] = v
    return status


def _condition_times(current: Mapping[str, Any] | None) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for c in _conditions(current):
        when = c.get("lastTransitionTime")
        if when:
            key = tuple(str(c.get(k) or "") for k in (*_CONDITION_COMPARED, "transitionID"))
            out.setdefault(key, when)
    return out


def podgroup_status_equal(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two PodGroup `status` objects are the same to Volcano (job_updater.go
    isPodGroupStatusUpdated, negated): `phase` and the `running`/`succeeded`/`failed` counts
    equal (missing = "" / 0), the same number of conditions, and position by position the same
    `type`, `status`, `reason` and `message` — `lastTransitionTime` and `transitionID` ignored.
    Fields outside v1beta1 PodGroupStatus are ignored (Go's decoding drops them).  Works on a
    body from `podgroup_status_body` and on a PodGroup manifest's `status` alike."""
    if str(_field(a, "phase") or "") != str(_field(b, "phase") or ""):
        return False
    if any(_count(_field(a, k)) != _count(_field(b, k)) for k in _COUNTS):
        return False
    ca, cb = _conditions(a), _conditions(b)
    if len(ca) != len(cb):
        return False
    return all(
        str(x.get(k) or "") == str(y.get(k) or "")
        for x, y in zip(ca, cb, strict=True)
        for k in _CONDITION_COMPARED
    )


def _conditions(status: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    raw = _field(status, "conditions")
    if not isinstance(raw, list):
        return []
    return [c if isinstance(c, Mapping) else {} for c in raw]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _field(status: Mapping[str, Any] | None, name: str) -> Any:
    return status.get(name) if isinstance(status, Mapping) else None
