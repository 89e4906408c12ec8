"""The cycle function: one scheduling session over a frozen snapshot, as the ordered decision events.

`decide(snapshot, conf, cycle=…, watermark=…, conf_hash=…)` is pure and synchronous: it runs
`fumarole.daemon.scheduler.framework.run.run_session` and turns the SessionResult into the events one
cycle writes, in this order:

1. `CycleOpened` (cycle, watermark, now_ms = the snapshot's virtual now, conf_hash, seed 0),
   then `CalloutsRecorded` with the answers the session got from outside services (the
   extender plugin) through the `callouts` port, in call order, when it asked any;
2. `BindDecided` per bound task, in the session's dispatch order;
3. `EvictDecided` per eviction, in the session's order (action and reason kept);
4. `PipelineDecided` per pipelined task, sorted by pod key;
5. `PodGroupStatusChanged` for the PodGroups whose status the session changed, sorted by job;
6. `JobExplained` for every job with unbound tasks whose explanation differs from `previous`
   (the explanations the projection holds at the same watermark), sorted by job; a job that
   was explained before and now has nothing pending (or is gone) gets an empty explanation
   (message "", no reasons), which the projection folds as "no longer waiting";
7. `QueueFiguresRecorded` with the queue-share plugin's per-queue figures and, for every queue of
   the session, the `status.allocated` Volcano's session close writes (queues sorted), only
   when they differ from `previous_queues` (the figures the projection holds at the watermark;
   None = unknown, always written when there are figures);
8. `CycleClosed` with counts and the measured timings.

The daemon's session loop and `fumarole replay` both call this function, so replay compares
like with like.  `comparable(event)` blanks what is measured or run-specific (timings, trace
ids) and `first_difference(recorded, recomputed)` names the first decision that differs.

Structured reasons: the session's per-pod explanations (daemon/scheduler/framework/explain.py)
are classified into `fumarole.store.events.PendingReason` codes (see `REASON_CODES`), aggregated per job
(one reason per code, counting pods) and ranked (0 = most important).  Fit-error histograms
("0/6 nodes are unavailable: 4 Insufficient cpu, 2 node(s) had untolerated taint.") fill
`total_nodes` and `nodes`; gang summaries fill `placeable` and `min_member`; enqueue
rejections name the plugin and resource.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import msgspec

from fumarole.daemon.cache.projection import session_id
from fumarole.daemon.runtime.job_tally import JobTally
from fumarole.daemon.scheduler.framework.callout import CalloutAnswer, CalloutPort, CalloutRecord
from fumarole.daemon.scheduler.framework.conf import SchedulerConf
from fumarole.daemon.scheduler.framework.run import SessionResult, run_session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.resources import Resource, finite_quantities, resource_list
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskInfo
from fumarole.store.events import (
    BindDecided,
    CalloutCall,
    CalloutsRecorded,
    CycleClosed,
    CycleOpened,
    EvictDecided,
    JobExplained,
    PendingReason,
    PipelineDecided,
    PodGroupConditionRecord,
    PodGroupStatusChanged,
    QueueFigures,
    QueueFiguresRecorded,
)

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = [
    "REASON_CODES",
    "CycleDecisions",
    "CycleEvent",
    "call_records",
    "callout_calls",
    "classify_reason",
    "comparable",
    "decide",
    "describe",
    "explanation_key",
    "first_difference",
    "queue_figures",
    "session_id",
]

CycleEvent = (
    CycleOpened
    | CalloutsRecorded
    | BindDecided
    | EvictDecided
    | PipelineDecided
    | PodGroupStatusChanged
    | JobExplained
    | QueueFiguresRecorded
    | CycleClosed
)

# code -> importance (lower first) when a job has several reasons.
REASON_CODES: dict[str, int] = {
    "queue-missing": 0,
    "queue-closed": 1,
    "enqueue-rejected": 2,
    "not-enqueued": 3,
    "job-invalid": 4,
    "predicates-failed": 5,
    "queue-capability": 6,
    "queue-overused": 7,
    "gang-unsatisfied": 8,
    "pipelined": 9,
    "best-effort": 10,
    "gang-stopped": 11,
    "not-reached": 12,
    "other": 13,
}


@dataclass(frozen=True, slots=True)
class CycleDecisions:
    """One cycle's decision events (CycleOpened first, CycleClosed last) and the session's result."""

    cycle: int
    events: list[CycleEvent]
    result: SessionResult
    duration_s: float

    @property
    def opened(self) -> CycleOpened:
        ev = self.events[0]
        assert isinstance(ev, CycleOpened)
        return ev

    @property
    def closed(self) -> CycleClosed:
        ev = self.events[-1]
        assert isinstance(ev, CycleClosed)
        return ev


def decide(
    snapshot: ClusterSnapshot,
    conf: SchedulerConf,
    *,
    cycle: int,
    watermark: int,
    conf_hash: str,
    trace_id: str = "",
    previous: Mapping[str, JobExplained] | None = None,
    tracer_provider: TracerProvider | None = None,
    previous_queues: Mapping[str, QueueFigures] | None = None,
    reuse: SessionResult | None = None,
    tally: JobTally | None = None,
    callouts: CalloutPort | None = None,
) -> CycleDecisions:
    """Run one session over `snapshot` and return its decision events (see the module notes).

    `snapshot` is not modified (the session works on a clone); its `session_id` is replaced by
    `session_id(cycle)`.  `previous` are the job explanations in force at `watermark`
    (Projection.explanations()); only changed explanations are emitted.  `previous_queues` are
    the queue figures in force at `watermark` (Projection.queue_figures_in_force()).  `reuse` is a
    result the caller has proved equal to what this session would give (session_memo.py): it is
    used instead of running the session.  `tally` is a JobTally updated with `snapshot`
    (job_tally.py): the task count and the pod-key lookups are read from it instead of passing
    over every task of the snapshot.  `callouts` is the session's callout port: a RecordingPort
    (live) or a ReplayPort (replay), whose `records` (the calls made, in order) become the
    cycle's CalloutsRecorded; None: the session has no port (a plugin that calls out fails).
    """
    if tally is not None and tally.jobs is not snapshot.jobs:
        raise ValueError("decide: the tally was not updated with this snapshot")
    t0 = time.perf_counter()
    snap = replace(snapshot, session_id=session_id(cycle))
    result = (
        reuse
        if reuse is not None
        else run_session(snap, conf, tracer_provider=tracer_provider, callouts=callouts)
    )
    duration = time.perf_counter() - t0
    needed = {*result.bind_order, *(ev.task for ev in result.evictions), *result.pipelined, *result.pending}
    tasks = tally.lookup(needed) if tally is not None else _task_index(snap, needed)
    now_ms = round(snap.now * 1000)
    events: list[CycleEvent] = [
        CycleOpened(cycle=cycle, watermark=watermark, now_ms=now_ms, conf_hash=conf_hash, trace_id=trace_id)
    ]
    records: list[CalloutRecord] = list(getattr(callouts, "records", ())) if reuse is None else []
    if records:
        events.append(CalloutsRecorded(cycle=cycle, calls=callout_calls(records), trace_id=trace_id))
    seen: set[str] = set()
    for key in result.bind_order:
        node = result.binds.get(key)
        if node is None or key in seen:
            continue
        seen.add(key)
        t, j = _lookup(tasks, key)
        events.append(
            BindDecided(
                cycle=cycle,
                namespace=t.namespace if t else key.partition("/")[0],
                name=t.name if t else key.partition("/")[2],
                uid=t.uid if t else "",
                node=node,
                job=j.uid if j else "",
                queue=j.queue if j else "",
                trace_id=trace_id,
                annotations=dict(result.bind_annotations.get(key, {})),
            )
        )
    for ev in result.evictions:
        t, j = _lookup(tasks, ev.task)
        events.append(
            EvictDecided(
                cycle=cycle,
                namespace=t.namespace if t else ev.task.partition("/")[0],
                name=t.name if t else ev.task.partition("/")[2],
                uid=t.uid if t else "",
                node=ev.node,
                job=j.uid if j else "",
                queue=j.queue if j else "",
                action=ev.action,
                reason=ev.reason,
                trace_id=trace_id,
            )
        )
    for key in sorted(result.pipelined):
        t, j = _lookup(tasks, key)
        events.append(
            PipelineDecided(
                cycle=cycle,
                namespace=t.namespace if t else key.partition("/")[0],
                name=t.name if t else key.partition("/")[2],
                uid=t.uid if t else "",
                node=result.pipelined[key],
                job=j.uid if j else "",
                queue=j.queue if j else "",
                trace_id=trace_id,
            )
        )
    for uid in sorted(result.changed_podgroups):
        pg = result.podgroups.get(uid)
        if pg is None:
            continue
        ns, _, name = uid.partition("/")
        events.append(
            PodGroupStatusChanged(
                cycle=cycle,
                namespace=ns,
                name=name,
                phase=pg.phase,
                running=pg.running,
                succeeded=pg.succeeded,
                failed=pg.failed,
                conditions=tuple(
                    PodGroupConditionRecord(
                        type=c.type,
                        status=c.status,
                        reason=c.reason,
                        message=c.message,
                        transition_id=c.transition_id,
                    )
                    for c in pg.conditions
                ),
                trace_id=trace_id,
            )
        )
    events.extend(_explanations(snap, result, tasks, cycle, trace_id, previous or {}))
    figures = queue_figures(result.queues, result.queue_allocated)
    if figures and (previous_queues is None or dict(previous_queues) != figures):
        events.append(QueueFiguresRecorded(cycle=cycle, queues=figures, trace_id=trace_id))
    n_tasks = tally.tasks if tally is not None else sum(len(j.tasks) for j in snap.jobs.values())
    events.append(
        CycleClosed(
            cycle=cycle,
            binds=len(seen),
            evictions=len(result.evictions),
            pipelined=len(result.pipelined),
            jobs=len(snap.jobs),
            tasks=n_tasks,
            pending_tasks=len(result.pending),
            duration_s=round(duration, 6),
            plugin_seconds=_plugin_seconds(result),
            action_seconds=dict(result.action_seconds),
            trace_id=trace_id,
        )
    )
    return CycleDecisions(cycle=cycle, events=events, result=result, duration_s=duration)


# ---------------------------------------------------------------------------------------------
# lookups


def _task_index(snap: ClusterSnapshot, keys: set[str]) -> dict[str, tuple[TaskInfo, JobInfo]]:
    """The first task (in job, then task order) of each pod key in `keys`, with its job.

    Only the keys a cycle's events name are indexed: an idle cycle names none and pays nothing.
    """
    idx: dict[str, tuple[TaskInfo, JobInfo]] = {}
    if not keys:
        return idx
    names = {k.partition("/")[2] for k in keys}
    for job in snap.jobs.values():
        for t in job.tasks.values():
            if t.name in names:
                key = t.key
                if key in keys:
                    idx.setdefault(key, (t, job))
    return idx


def _lookup(idx: Mapping[str, tuple[TaskInfo, JobInfo]], key: str) -> tuple[TaskInfo | None, JobInfo | None]:
    hit = idx.get(key)
    return (hit[0], hit[1]) if hit is not None else (None, None)


def _plugin_seconds(result: SessionResult) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, figures in result.stats.items():
        plugin = key.split(".", 1)[0]
        out[plugin] = out.get(plugin, 0.0) + float(figures.get("seconds", 0.0))
    return {k: round(v, 6) for k, v in sorted(out.items())}


def _quantities(r: Any) -> dict[str, str]:
    if not isinstance(r, Resource):
        return {}
    return finite_quantities(r)


def queue_figures(
    raw: Mapping[str, Mapping[str, Any]], status_allocated: Mapping[str, Resource] | None = None
) -> dict[str, QueueFigures]:
    """SessionResult.queues (Resource objects from proportion/capacity) as QueueFigures, by queue name.

    `status_allocated` is SessionResult.queue_allocated (every queue of the session): each
    queue's `status_allocated`, in Volcano's ResourceList form; a queue the plugin has no
    figures for gets an entry with that figure alone.
    """
    written = status_allocated or {}
    out: dict[str, QueueFigures] = {}
    for name in sorted({*raw, *written}):
        f = raw.get(name, {})
        weight = f.get("weight", 0)
        share = f.get("share", 0.0)
        parent = f.get("parent", "")
        out[name] = QueueFigures(
            weight=int(weight) if isinstance(weight, int | float) else 0,
            deserved=_quantities(f.get("deserved")),
            allocated=_quantities(f.get("allocated")),
            capability=_quantities(f.get("capability")),
            guarantee=_quantities(f.get("guarantee")),
            request=_quantities(f.get("request")),
            inqueue=_quantities(f.get("inqueue")),
            share=round(float(share), 6) if isinstance(share, int | float) else 0.0,
            parent=parent if isinstance(parent, str) else "",
            status_allocated=resource_list(written[name]) if name in written else {},
        )
    return out


# ---------------------------------------------------------------------------------------------
# explanations


_GANG = re.compile(r"gang: (\d+)/(\d+) tasks schedulable \(minMember (\d+)\)")
_FIT = re.compile(r"(?:^|; )0/(\d+) nodes are unavailable(?:: (.*?))?\.?$")
_HIST_ITEM = re.compile(r"^(\d+) (.+)$")
_RESOURCE = re.compile(r"(?:insufficient|overused) ([^,;]+)")
_PLUGIN = re.compile(r"^([a-z][a-z0-9-]*): ")


def classify_reason(message: str) -> PendingReason:
    """One pod's explanation (explain.task_reason) as a structured PendingReason (rank 0)."""
    code = "other"
    plugin = resource = ""
    placeable = min_member = total_nodes = 0
    nodes: dict[str, int] = {}
    m = message
    if m.startswith("queue ") and m.endswith(" does not exist"):
        code = "queue-missing"
    elif " not admitted (Pending): " in m:
        code = "enqueue-rejected"
        why = m.split(" not admitted (Pending): ", 1)[1]
        pm = _PLUGIN.match(why)
        if pm:
            plugin = pm.group(1)
        rm = _RESOURCE.search(why)
        if rm:
            resource = rm.group(1).strip()
        if "is not open" in why:
            code = "queue-closed"
    elif " is Pending: not admitted by enqueue" in m:
        code = "not-enqueued"
    elif " is not valid: " in m:
        code = "job-invalid"
        if "gang-scheduling" in m:
            plugin = "gang"
    elif m.startswith("pipelined on "):
        code = "pipelined"
    elif m.startswith(("can be placed on ", "could be placed on ", "could wait for ")):
        code = "gang-unsatisfied"
        plugin = "gang"
    elif "refused the task (Allocatable)" in m or "has no room within its deserved share" in m:
        code = "queue-capability"
    elif m.startswith("queue ") and " is overused" in m:
        code = "queue-overused"
    elif m.startswith("queue ") and " is " in m:
        code = "queue-closed"
    elif m.startswith("best-effort pod"):
        code = "best-effort"
    elif "another task of the job did not fit" in m:
        code = "gang-stopped"
    elif "not reached in this cycle" in m:
        code = "not-reached"
    fm = _FIT.search(m)
    if fm and code in ("other", "not-reached"):
        code = "predicates-failed"
    if fm:
        total_nodes = int(fm.group(1))
        for part in (fm.group(2) or "").split(", "):
            hm = _HIST_ITEM.match(part.strip())
            if hm:
                nodes[hm.group(2)] = nodes.get(hm.group(2), 0) + int(hm.group(1))
        if code == "predicates-failed" and not resource:
            insufficient = sorted(k[len("Insufficient ") :] for k in nodes if k.startswith("Insufficient "))
            if insufficient:
                resource = insufficient[0]
    elif "has already predicated failed" in m and code == "other":
        code = "predicates-failed"
    gm = _GANG.search(m)
    if gm:
        placeable, min_member = int(gm.group(1)), int(gm.group(3))
        if code == "other":
            code = "gang-unsatisfied"
    return PendingReason(
        code=code,
        message=m,
        plugin=plugin,
        resource=resource,
        placeable=placeable,
        min_member=min_member,
        total_nodes=total_nodes,
        nodes=dict(sorted(nodes.items())),
    )


def _job_reasons(pods: Mapping[str, str]) -> tuple[PendingReason, ...]:
    """One reason per code (the first pod's, by pod key), ranked by importance then pod count."""
    by_code: dict[str, tuple[PendingReason, int]] = {}
    for key in sorted(pods):
        r = classify_reason(pods[key])
        first = by_code.get(r.code)
        by_code[r.code] = (first[0], first[1] + 1) if first is not None else (r, 1)
    ordered = sorted(by_code.values(), key=lambda rc: (REASON_CODES.get(rc[0].code, 99), -rc[1], rc[0].code))
    return tuple(msgspec.structs.replace(r, rank=i) for i, (r, _) in enumerate(ordered))


def _queue_positions(jobs: Iterable[JobInfo]) -> dict[str, int]:
    """1-based position of each waiting job in its queue: priority (high first), creation, uid.

    Informational: the session's real job order also involves the job-order plugins.
    """
    per_queue: dict[str, list[JobInfo]] = {}
    for j in jobs:
        per_queue.setdefault(j.queue, []).append(j)
    out: dict[str, int] = {}
    for q in sorted(per_queue):
        for i, j in enumerate(sorted(per_queue[q], key=lambda j: (-j.priority, j.creation, j.uid)), 1):
            out[j.uid] = i
    return out


def explanation_key(ev: JobExplained) -> tuple[Any, ...]:
    """What decides whether an explanation changed (not the cycle or the trace id)."""
    return (ev.queue, ev.message, ev.reasons, ev.queue_position, tuple(sorted(ev.pods.items())))


def _explanations(
    snap: ClusterSnapshot,
    result: SessionResult,
    tasks: Mapping[str, tuple[TaskInfo, JobInfo]],
    cycle: int,
    trace_id: str,
    previous: Mapping[str, JobExplained],
) -> list[JobExplained]:
    per_job: dict[str, dict[str, str]] = {}
    jobs: dict[str, JobInfo] = {}
    for key in sorted(result.pending):
        hit = tasks.get(key)
        if hit is None:
            continue
        job = hit[1]
        jobs[job.uid] = job
        per_job.setdefault(job.uid, {})[key] = result.pending[key]
    positions = _queue_positions(jobs.values())
    out: list[JobExplained] = []
    for uid in sorted(set(per_job) | set(previous)):
        pods = per_job.get(uid)
        ns, _, name = uid.partition("/")
        if pods is None:
            old = previous[uid]
            if old.message or old.reasons:
                out.append(
                    JobExplained(
                        cycle=cycle, namespace=ns, name=name, queue=old.queue, message="", trace_id=trace_id
                    )
                )
            continue
        job = jobs[uid]
        reasons = _job_reasons(pods)
        top = reasons[0] if reasons else None
        message = f"{len(pods)}/{len(job.tasks)} pods pending"
        if top is not None:
            message += f"; {top.message}"
        ev = JobExplained(
            cycle=cycle,
            namespace=ns,
            name=name,
            queue=job.queue,
            message=message,
            reasons=reasons,
            queue_position=positions.get(uid, 0),
            pods=dict(sorted(pods.items())),
            trace_id=trace_id,
        )
        before = previous.get(uid)
        if before is None or explanation_key(before) != explanation_key(ev):
            out.append(ev)
    return out


# ---------------------------------------------------------------------------------------------
# comparison


def callout_calls(records: Sequence[CalloutRecord]) -> tuple[CalloutCall, ...]:
    """The core's call records as the log's CalloutCall entries."""
    return tuple(
        CalloutCall(
            verb=r.verb,
            url=r.url,
            digest=r.digest,
            status=r.answer.status,
            body=r.answer.body,
            error=r.answer.error,
        )
        for r in records
    )


def call_records(event: CalloutsRecorded) -> list[CalloutRecord]:
    """A CalloutsRecorded event's calls as the core's records (what a ReplayPort answers from)."""
    return [
        CalloutRecord(c.verb, c.url, c.digest, CalloutAnswer(status=c.status, body=c.body, error=c.error))
        for c in event.calls
    ]


def comparable(event: Any) -> Any:
    """The event with what is measured or run-specific blanked: timings and trace ids."""
    if isinstance(event, CycleClosed):
        return msgspec.structs.replace(
            event, duration_s=0.0, action_seconds={}, plugin_seconds={}, trace_id=""
        )
    if hasattr(event, "trace_id"):
        return msgspec.structs.replace(event, trace_id="")
    return event


def describe(event: Any) -> str:
    """A short human name for a decision event (used in replay reports)."""
    tag = event.__struct_config__.tag if hasattr(event, "__struct_config__") else type(event).__name__
    if isinstance(event, BindDecided | PipelineDecided):
        return f"{tag} {event.namespace}/{event.name} -> {event.node}"
    if isinstance(event, EvictDecided):
        return f"{tag} {event.namespace}/{event.name} on {event.node} ({event.action})"
    if isinstance(event, PodGroupStatusChanged):
        return f"{tag} {event.namespace}/{event.name} phase {event.phase}"
    if isinstance(event, JobExplained):
        return f"{tag} {event.namespace}/{event.name}: {event.message or '(no longer waiting)'}"
    if isinstance(event, QueueFiguresRecorded):
        return f"{tag} cycle {event.cycle}: {', '.join(event.queues) or '(no queues)'}"
    if isinstance(event, CalloutsRecorded):
        verbs = ", ".join(dict.fromkeys(c.verb for c in event.calls))
        return f"{tag} cycle {event.cycle}: {len(event.calls)} call(s) ({verbs})"
    if isinstance(event, CycleOpened):
        return f"{tag} cycle {event.cycle} watermark {event.watermark} now_ms {event.now_ms}"
    if isinstance(event, CycleClosed):
        return (
            f"{tag} cycle {event.cycle}: {event.binds} binds, {event.evictions} evictions, "
            f"{event.pipelined} pipelined, {event.pending_tasks} pending"
        )
    return str(tag)


def first_difference(recorded: Sequence[Any], recomputed: Sequence[Any]) -> str | None:
    """None when both lists are equal once made comparable; else the first differing decision."""
    for i, (a, b) in enumerate(zip(recorded, recomputed, strict=False)):
        if comparable(a) != comparable(b):
            return f"decision {i}: recorded {describe(a)}; recomputed {describe(b)}"
    if len(recorded) > len(recomputed):
        return (
            f"decision {len(recomputed)}: recorded {describe(recorded[len(recomputed)])}; recomputed nothing"
        )
    if len(recomputed) > len(recorded):
        return f"decision {len(recorded)}: recorded nothing; recomputed {describe(recomputed[len(recorded)])}"
    return None
