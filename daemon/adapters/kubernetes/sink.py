"""The Kubernetes sink: committed decisions become API calls, as Volcano's scheduler makes them, as
fast as the API server takes them.

What is written, per decision (Volcano's binder, evictor, job updater and recorder):

- A bind (`apply` of a BindDecided): POST `pods/NAME/binding` with a Binding naming the pod's uid
  and carrying the decision's annotations (deviceshare's card choice; the API server copies a
  Binding's annotations onto the pod, as Volcano's DefaultBinder relies on), then a `Scheduled`
  Event ("Successfully assigned NS/NAME to NODE").  201 is a success; a 409 whose pod turns out
  to be bound to the decided node already (a decision forwarded again after a restart) is a
  success too; a pod gone (404), recreated (another uid) or bound elsewhere is a failed outcome
  carrying the API's message, never retried.
- An eviction (an EvictDecided), as Volcano's evictor: an `Evict` Warning Event ("Pod is evicted,
  because of REASON"), the conditions `Ready=False (Evict)` and `DisruptionTarget=True
  (PreemptionByScheduler)` written through `pods/NAME/status`, then DELETE with the pod's uid as
  a precondition and its own grace period.  A pod already gone, or recreated under another uid,
  is a successful no-op.
- Reports (`report`, no outcome): a PodGroupStatusChanged is written onto the PodGroup (a merge
  patch of `status`; Volcano's PodGroup CRD has no status subresource); a QueueFiguresRecorded
  writes the queues' status through `queues/NAME/status`; a JobExplained sets, on each pending pod
  it names, `PodScheduled=False, reason Unschedulable` with our why-pending message and records a
  `FailedScheduling` Warning Event (only when the message changed, as Volcano's
  taskUnschedulable does).  Bodies and comparisons: status_writes.py.

How (issue 22: the API server, not the sink, must be the limit):

- Every call takes a slot of one `PrioritySlots` under an `AdaptiveLimit` (flow.py): binds and
  evictions first, then PodGroup/Queue statuses, then pods' conditions, then Events; within a
  lane, older decisions first.  The limit grows while the server answers as fast as usual and is
  cut on 429, 5xx, timeouts and rising latency; a 429's Retry-After pauses new calls.  Transient
  failures (unreachable, 408, 429, 5xx) are retried with backoff up to `retries` times, then a
  decision fails with the last reason.
- Events go through an EventRecorder (events.py: client-go's correlator — aggregation, identical
  events as count patches, the per-object spam filter — and its bounded, dropping queue), at the
  lowest priority, off the path of the binds.  A Scheduled Event's name is derived from the pod's
  uid and the decision's log seq, so a decision forwarded again after a crash neither writes a
  second Event nor loses one.
- Statuses are coalesced per object: a PodGroup (or Queue) status waiting to be written is
  replaced by a newer one; it is written only after every bind and eviction the dispatcher
  handed over before it for that PodGroup (or in that queue) has been answered (`admit`), and only
  when it differs from the newer of what we last wrote (a write-through memory with the
  resourceVersion the write answered) and what the API holds (the source's copy, newer than our
  write).  The watch's copy of our own earlier write, arriving late, no longer causes a rewrite.
- A PodGroup status decided in the cycle that bound pods of that PodGroup (Inqueue, as Volcano's
  session leaves a gang whose binds are still in flight) is held up to `status_hold` seconds (1.5
  schedule periods): the next cycle, seeing the binds, usually decides Running, which replaces it,
  so one write carries both (Volcano writes Inqueue, then Running).  Nothing waits on a PodGroup
  status here: pods that were bound exist already.
- A pod's why-pending message is written only when it differs from the last one we wrote or the
  one its PodScheduled condition in the API carries (so a restart does not repeat them).

Nothing here runs before its decision is committed to the log: the dispatcher reads decisions
from the log.  With leader election, a decision waits until this replica leads (`may_act_on(seq)`,
daemon/adapters/kubernetes/__init__.py); one made before another replica led is not acted on: it
gets a superseded outcome (BindFailed / EvictFailed with `superseded=True`, reason SUPERSEDED),
which the projection folds as a failed one (the pod is pending again and the leader re-decides
it), and which the dispatcher neither counts nor logs as a failure.  Reports wait likewise and are
dropped when superseded.  The sink reports no facts back: the watch brings the pods' new state.
"""

from __future__ import annotations

import datetime as dt
import heapq
import itertools
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from fumarole.daemon.adapters.kubernetes.client import (
    TRANSIENT_CODES,
    KubeApi,
    KubeTransientError,
    message_of,
)
from fumarole.daemon.adapters.kubernetes.events import EventRecorder, ObjectRef
from fumarole.daemon.adapters.kubernetes.flow import (
    LANE_CONDITIONS,
    LANE_DECISIONS,
    LANE_EVENTS,
    LANE_STATUS,
    AdaptiveLimit,
    PrioritySlots,
)
from fumarole.daemon.adapters.kubernetes.status_writes import (
    PODGROUP_STATUS_FIELDS,
    podgroup_status_body,
    podgroup_status_equal,
    queue_status_bodies,
    queue_status_equal,
)
from fumarole.store.events import (
    BindDecided,
    BindFailed,
    BindSucceeded,
    EvictDecided,
    EvictFailed,
    EvictSucceeded,
    JobExplained,
    ObservedEvent,
    OutcomeEvent,
    PodDeleted,
    PodGroupDeleted,
    PodGroupStatusChanged,
    PodGroupUpserted,
    PodUpserted,
    QueueDeleted,
    QueueFiguresRecorded,
    QueueUpserted,
)
from fumarole.store.events.base import EventBase

log = logging.getLogger("fumarole.kubernetes.sink")

COMPONENT = "volcano"  # the Events' source component, as Volcano's scheduler names itself
SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"
EVENT_QUEUE = 10_000


SUPERSEDED = "superseded: another replica led since this decision was made; the leader re-decides the pod"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_path(ns: str, name: str, sub: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/pods/{name}" + (f"/{sub}" if sub else "")


def _rv(body: Any) -> int:
    """An object's resourceVersion as an integer (etcd's revision), 0 when absent or odd."""
    if isinstance(body, dict):
        rv = (body.get("metadata") or {}).get("resourceVersion", "")
        if isinstance(rv, str) and rv.isdigit():
            return int(rv)
    return 0


@dataclass(slots=True)
class _Known:
    """A status as last written by us or last seen in the API, with the resourceVersion it had."""

    status: dict[str, Any]
    rv: int


@dataclass(slots=True)
class _StatusSlot:
    """One object's status writes: the newest wanted status, and the reports its write covers."""

    desired: Any = None
    order: int = 0
    waiters: list[anyio.Event] = field(default_factory=list)
    writing: bool = False
    replaced: anyio.Event | None = None  # set when a newer status arrives (a held write stops waiting)


@dataclass(slots=True)
class SinkCounters:
    """API writes by kind and the writes spared (for the dispatcher's figures and /metrics)."""

    writes: Counter[str] = field(default_factory=Counter)
    spared: Counter[str] = field(default_factory=Counter)
    retries: int = 0


class KubeSink:
    def __init__(
        self,
        api: KubeApi,
        *,
        retries: int = 5,
        backoff: float = 0.2,
        scheduler_name: str = "volcano",
        sleep: Callable[[float], Awaitable[Any]] = anyio.sleep,
        may_act: Callable[[], Awaitable[bool]] | None = None,
        limit: AdaptiveLimit | None = None,
        clock: Callable[[], float] = time.monotonic,
        may_act_on: Callable[[int], Awaitable[bool]] | None = None,
        status_hold: float = 1.5,
    ) -> None:
        self.api = api
        self.may_act = may_act or _always
        self.may_act_on = may_act_on
        self.retries = retries
        self.backoff = backoff
        self.scheduler_name = scheduler_name
        self.sleep = sleep
        self.clock = clock
        self.slots = PrioritySlots(limit or AdaptiveLimit(), clock=clock)
        self.counters = SinkCounters()
        # Volcano's recorder names the scheduler as the Events' component (one scheduler name).  Its
        # queue holds 10,000 Events where client-go's broadcaster drops past 1,000: a burst of binds
        # records one Scheduled Event each, and a decision is done only once its Event is written.
        self.events = EventRecorder(
            component=scheduler_name or COMPONENT, concurrency=16, queue_size=EVENT_QUEUE
        )
        # Binds and evictions handed over (admitted) and not yet answered: the set says which, the
        # heap which is oldest (its top is always one not yet answered).
        self._unanswered: set[int] = set()
        self._acting: list[int] = []
        # The last cycle that bound pods of each job (PodGroup "ns/name"), for `_held`.
        self._bound_cycle: dict[str, int] = {}
        self.status_hold = status_hold
        # Statuses waiting for the actions before them: (their seq, tie, event), a heap.
        self._status_waiters: list[tuple[int, int, anyio.Event]] = []
        self._tie = itertools.count()
        self._podgroups: dict[tuple[str, str], _StatusSlot] = {}
        self._queues: dict[str, _StatusSlot] = {}
        self._pg_written: dict[tuple[str, str], _Known] = {}
        self._pg_api: dict[tuple[str, str], _Known] = {}
        self._queue_written: dict[str, _Known] = {}
        self._queue_api: dict[str, _Known] = {}
        self._unschedulable: dict[tuple[str, str], str] = {}  # pod -> why-pending message written/seen

    def summary(self) -> str:
        """One line of what the sink did: writes by kind, writes spared, flow control."""
        c, lim = self.counters, self.slots.limit
        writes = ", ".join(f"{k} {v}" for k, v in sorted(c.writes.items()))
        spared = ", ".join(f"{k} {v}" for k, v in sorted(c.spared.items()))
        return (
            f"API writes: {writes or 'none'}; spared: {spared or 'none'}; retries {c.retries}; "
            f"in flight: peak {self.slots.peak}, limit now {lim.slots} (cut {lim.cuts} times); "
            f"latency {lim.short_rtt * 1000:.1f} ms, least lately {lim.long_rtt * 1000:.1f} ms; "
            f"events dropped {self.events.counters.dropped}"
        )

    # ------------------------------------------------------------------ what the API holds
    def observe(self, events: Iterable[EventBase]) -> None:
        """Learn what the API holds from the source's listings, watches and the log on resume:
        PodGroup and Queue statuses (with resourceVersions) and pods' why-pending conditions."""
        for e in events:
            if isinstance(e, PodGroupUpserted):
                status = e.manifest.get("status")
                if isinstance(status, dict):
                    self._pg_api[(e.namespace, e.name)] = _Known(status, _rv(e.manifest))
            elif isinstance(e, QueueUpserted):
                status = e.manifest.get("status")
                if isinstance(status, dict):
                    self._queue_api[e.name] = _Known(status, _rv(e.manifest))
            elif isinstance(e, PodUpserted):
                message = _unschedulable_message(e.manifest)
                key = (e.namespace, e.name)
                if message is not None:
                    self._unschedulable[key] = message
                elif (e.manifest.get("spec") or {}).get("nodeName"):
                    self._unschedulable.pop(key, None)
            # What a deleted object leaves behind here is dropped, so the memories stay the size
            # of the cluster.
            elif isinstance(e, PodDeleted):
                self._unschedulable.pop((e.namespace, e.name), None)
            elif isinstance(e, PodGroupDeleted):
                key = (e.namespace, e.name)
                self._pg_written.pop(key, None)
                self._pg_api.pop(key, None)
                self._bound_cycle.pop(f"{e.namespace}/{e.name}", None)
            elif isinstance(e, QueueDeleted):
                self._queue_written.pop(e.name, None)
                self._queue_api.pop(e.name, None)

    # ------------------------------------------------------------------ calls
    async def _call(
        self, lane: int, order: int, method: str, path: str, *, kind: str, **kw: Any
    ) -> tuple[int, Any]:
        """One API call under flow control, retried on transient failures; (status, body), status 0
        when it never got through."""
        delay = self.backoff
        why = ""
        for attempt in range(self.retries + 1):
            await self.slots.acquire(lane, order)
            t0 = self.clock()
            try:
                code, body, retry_after = await self.api.request_full(method, path, **kw)
            except KubeTransientError as e:
                self.slots.release(self.clock() - t0, overloaded=True)
                why = str(e)
            except BaseException:
                self.slots.release(self.clock() - t0)
                raise
            else:
                overloaded = code in TRANSIENT_CODES
                self.slots.release(self.clock() - t0, overloaded=overloaded, retry_after=retry_after)
                if method != "GET":
                    self.counters.writes[kind] += 1
                if not overloaded:
                    return code, body
                why = f"{code} {message_of(body)}"
                if retry_after:
                    delay = max(delay, retry_after)
            if attempt < self.retries:
                self.counters.retries += 1
                log.info("%s %s: %s; retry %d in %.1fs", method, path, why, attempt + 1, delay)
                await self.sleep(delay)
                delay = min(delay * 2, 5.0)
        return 0, {"message": f"gave up after {self.retries + 1} attempts: {why}"}

    async def run(self) -> None:
        """The Event writer (lowest lane) until cancelled."""
        await self.events.run(self._send_event)

    async def _send_event(self, method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        return await self._call(
            LANE_EVENTS, 0, method, path, kind="events", body=body, content_type=content_type
        )

    # ------------------------------------------------------------------ ordering
    def admit(self, seq: int, event: Any) -> None:
        """Called by the dispatcher for every row it hands over, in log order, before `apply` or
        `report`: remembers the binds and evictions not yet answered, so a status waits for the
        actions decided before it."""
        if isinstance(event, BindDecided | EvictDecided):
            self._unanswered.add(seq)
            heapq.heappush(self._acting, seq)
            if isinstance(event, BindDecided):
                self._bound_cycle[event.job] = event.cycle

    def _answered(self, seq: int) -> None:
        """The API answered the action at `seq` (its Event may still be on its way); idempotent."""
        if seq not in self._unanswered:
            return
        self._unanswered.discard(seq)
        acting = self._acting
        while acting and acting[0] not in self._unanswered:
            heapq.heappop(acting)
        # Wake exactly the statuses whose predecessors are all answered now (not every waiter at
        # every answer: a backlog has thousands of answers and hundreds of waiting statuses).
        oldest = acting[0] if acting else None
        waiting = self._status_waiters
        while waiting and (oldest is None or waiting[0][0] <= oldest):
            heapq.heappop(waiting)[2].set()

    async def _until_answered(self, seq: int) -> None:
        """Wait until every bind and eviction admitted before `seq` has been answered."""
        if self._acting and self._acting[0] < seq:
            ready = anyio.Event()
            heapq.heappush(self._status_waiters, (seq, next(self._tie), ready))
            await ready.wait()

    # ------------------------------------------------------------------ decisions with outcomes
    async def apply(
        self, seq: int, decision: BindDecided | EvictDecided
    ) -> tuple[OutcomeEvent, list[ObservedEvent]]:
        try:
            allowed = await (self.may_act_on(seq) if self.may_act_on is not None else self.may_act())
            if not allowed:  # made before another replica led: the leader decides the pod again
                d = decision
                if isinstance(d, BindDecided):
                    return BindFailed(
                        decision_seq=seq,
                        namespace=d.namespace,
                        name=d.name,
                        node=d.node,
                        reason=SUPERSEDED,
                        superseded=True,
                    ), []
                return EvictFailed(
                    decision_seq=seq,
                    namespace=d.namespace,
                    name=d.name,
                    reason=SUPERSEDED,
                    superseded=True,
                ), []
            if isinstance(decision, BindDecided):
                return await self._bind(seq, decision), []
            return await self._evict(seq, decision), []
        finally:
            self._answered(seq)

    async def _bind(self, seq: int, d: BindDecided) -> OutcomeEvent:
        binding: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": d.name, "namespace": d.namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": d.node},
        }
        if d.uid:
            binding["metadata"]["uid"] = d.uid
        if d.annotations:
            binding["metadata"]["annotations"] = dict(d.annotations)
        code, body = await self._call(
            LANE_DECISIONS,
            seq,
            "POST",
            _pod_path(d.namespace, d.name, "binding"),
            kind="bindings",
            body=binding,
        )
        if code != 409:
            self._answered(seq)  # statuses may go; the Scheduled Event follows at the lowest priority

        def failed(reason: str) -> OutcomeEvent:
            return BindFailed(
                decision_seq=seq, namespace=d.namespace, name=d.name, node=d.node, reason=reason
            )

        async def succeeded() -> OutcomeEvent:
            self._unschedulable.pop((d.namespace, d.name), None)
            # The decision is done once its Event is written too: a crash before that forwards the
            # decision again (the bind answers 409 on the same node) and the Event is not lost.
            written = anyio.Event()
            if self.events.record(
                ObjectRef.pod(d.namespace, d.name, d.uid),
                "Normal",
                "Scheduled",
                f"Successfully assigned {d.namespace}/{d.name} to {d.node}",
                dedup_token=f"{d.uid}/{seq}",
                done=written,
            ):
                await written.wait()
            return BindSucceeded(decision_seq=seq, namespace=d.namespace, name=d.name, node=d.node)

        if code in (200, 201):
            return await succeeded()
        if code == 409:
            pcode, pod = await self._call(
                LANE_DECISIONS, seq, "GET", _pod_path(d.namespace, d.name), kind="pods"
            )
            self._answered(seq)
            if pcode == 200:
                meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
                if (not d.uid or meta.get("uid") == d.uid) and spec.get("nodeName") == d.node:
                    return await succeeded()
            return failed(f"409 Conflict: {message_of(body)}")
        if code == 0:
            return failed(f"transient: {message_of(body)}")
        return failed(f"{code} {_reason(body)}: {message_of(body)}")

    async def _evict(self, seq: int, d: EvictDecided) -> OutcomeEvent:
        def ok() -> OutcomeEvent:
            return EvictSucceeded(decision_seq=seq, namespace=d.namespace, name=d.name)

        def failed(reason: str) -> OutcomeEvent:
            return EvictFailed(decision_seq=seq, namespace=d.namespace, name=d.name, reason=reason)

        code, pod = await self._call(LANE_DECISIONS, seq, "GET", _pod_path(d.namespace, d.name), kind="pods")
        if code == 404:
            return ok()
        if code != 200:
            return failed(f"{code} {message_of(pod)}" if code else f"transient: {message_of(pod)}")
        uid = (pod.get("metadata") or {}).get("uid", "")
        if d.uid and uid != d.uid:
            return ok()
        message = f"Pod is evicted, because of {d.reason}"
        written = anyio.Event()
        if not self.events.record(
            ObjectRef.pod(d.namespace, d.name, uid),
            "Warning",
            "Evict",
            message,
            dedup_token=f"{uid}/{seq}",
            done=written,
        ):
            written.set()
        patch = {
            "metadata": {"uid": uid},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "False", "reason": "Evict", "message": message},
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                        "message": f"{self.scheduler_name}: preempting to accommodate a higher priority pod",
                        "lastTransitionTime": _now(),
                    },
                ]
            },
        }
        scode, sbody = await self._call(
            LANE_DECISIONS,
            seq,
            "PATCH",
            _pod_path(d.namespace, d.name, "status"),
            kind="pods/status",
            body=patch,
            content_type=SMP,
        )
        if scode == 404:
            return ok()
        if scode not in (200, 201):
            log.warning("evict %s/%s: status update: %s %s", d.namespace, d.name, scode, message_of(sbody))
        dcode, dbody = await self._call(
            LANE_DECISIONS,
            seq,
            "DELETE",
            _pod_path(d.namespace, d.name),
            kind="pods",
            body={"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}},
        )
        self._answered(seq)
        await written.wait()  # done once its Event is written too (as for a bind's Scheduled Event)
        if dcode in (200, 202, 404):
            return ok()
        if dcode == 409:  # the uid precondition failed: recreated meanwhile
            return ok()
        return failed(f"{dcode} {message_of(dbody)}" if dcode else f"transient: {message_of(dbody)}")

    # ------------------------------------------------------------------ reports (no outcome)
    async def report(self, seq: int, event: Any) -> None:
        """Write what a reported decision says; returns once it is written, found unnecessary, or
        covered by a newer report's write (see the module notes)."""
        if not await self.may_act():
            return
        if isinstance(event, PodGroupStatusChanged):
            key = (event.namespace, event.name)
            slot = self._podgroups.setdefault(key, _StatusSlot())
            await self._coalesced(slot, seq, event, self._write_podgroup, self._podgroups, key)
        elif isinstance(event, JobExplained):
            await self._unschedulable_pods(seq, event)
        elif isinstance(event, QueueFiguresRecorded):
            bodies = queue_status_bodies(event)
            async with anyio.create_task_group() as tg:
                for name, status in sorted(bodies.items()):
                    qslot = self._queues.setdefault(name, _StatusSlot())
                    tg.start_soon(
                        self._coalesced, qslot, seq, (name, status), self._write_queue, self._queues, name
                    )

    async def _coalesced(
        self,
        slot: _StatusSlot,
        seq: int,
        desired: Any,
        write: Callable[[int, Any], Awaitable[None]],
        slots: dict[Any, _StatusSlot],
        key: Any,
    ) -> None:
        done = anyio.Event()
        slot.desired, slot.order = desired, seq
        slot.waiters.append(done)
        if slot.replaced is not None:
            slot.replaced.set()
        if slot.writing:
            await done.wait()
            return
        slot.writing = True
        try:
            while slot.desired is not None:
                # Never ahead of the binds and evictions decided before it; a newer status that
                # arrives meanwhile replaces it (and waits for its own predecessors in turn).
                while self._acting and self._acting[0] < slot.order:
                    await self._until_answered(slot.order)  # slot.order may grow meanwhile
                if self._held(slot.desired):
                    # Its own cycle bound pods of this PodGroup: the next cycle, seeing them bound,
                    # usually decides Running; wait for it (a newer status) a little, write once.
                    slot.replaced = anyio.Event()
                    with anyio.move_on_after(self.status_hold):
                        await slot.replaced.wait()
                    slot.replaced = None
                    continue  # the newest status, behind its own predecessors
                want, order, waiters = slot.desired, slot.order, slot.waiters
                await write(order, want)
                if slot.desired is want:
                    slot.desired = None
                slot.waiters = [w for w in slot.waiters if w not in waiters]
                for w in waiters:
                    w.set()
        finally:
            slot.writing = False
            if slot.desired is None and not slot.waiters and slots.get(key) is slot:
                del slots[key]

    def _held(self, want: Any) -> bool:
        """Whether a status is held (see `status_hold`): a PodGroup status decided in a cycle that
        bound pods of that PodGroup, not held before."""
        if not isinstance(want, PodGroupStatusChanged) or not self.status_hold:
            return False
        key = f"{want.namespace}/{want.name}"
        if self._bound_cycle.get(key) != want.cycle:
            return False
        del self._bound_cycle[key]  # held once: the next status for it is written as it comes
        return True

    async def _write_podgroup(self, seq: int, e: PodGroupStatusChanged) -> None:
        key = (e.namespace, e.name)
        reference = _newer(self._pg_written.get(key), self._pg_api.get(key))
        status = podgroup_status_body(e, _now(), reference.status if reference else None)
        if reference is not None and podgroup_status_equal(reference.status, status):
            self.counters.spared["podgroups"] += 1
            return
        # Volcano PUTs the whole status: a merge patch must clear what the new status leaves out.
        patch = {k: status.get(k) for k in PODGROUP_STATUS_FIELDS} | status
        path = f"{VOLCANO}/namespaces/{e.namespace}/podgroups/{e.name}"
        code, body = await self._call(
            LANE_STATUS, seq, "PATCH", path, kind="podgroups", body={"status": patch}, content_type=MERGE
        )
        if code in (200, 201):
            self._pg_written[key] = _Known(status, _rv(body))
        elif code != 404:
            log.warning("podgroup %s/%s status: %s %s", e.namespace, e.name, code, message_of(body))

    async def _write_queue(self, seq: int, named: tuple[str, dict[str, Any]]) -> None:
        name, status = named
        reference = _newer(self._queue_written.get(name), self._queue_api.get(name))
        if reference is not None and queue_status_equal(reference.status, status):
            self.counters.spared["queues/status"] += 1
            return
        allocated: dict[str, Any] = dict(status.get("allocated") or {})
        before = (reference.status.get("allocated") if reference else None) or {}
        for gone in before.keys() - allocated.keys():
            allocated[gone] = None  # Volcano replaces the whole list (a PUT); a merge patch must drop
        path = f"{VOLCANO}/queues/{name}/status"
        code, body = await self._call(
            LANE_STATUS,
            seq,
            "PATCH",
            path,
            kind="queues/status",
            body={"status": {"allocated": allocated}},
            content_type=MERGE,
        )
        if code in (200, 201):
            self._queue_written[name] = _Known(dict(status), _rv(body))
        elif code != 404:
            log.warning("queue %s status: %s %s", name, code, message_of(body))

    async def _unschedulable_pods(self, seq: int, e: JobExplained) -> None:
        async def one(ns: str, name: str, message: str) -> None:
            patch = {
                "status": {
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": message,
                            "lastProbeTime": None,
                            "lastTransitionTime": _now(),
                        }
                    ]
                }
            }
            code, body = await self._call(
                LANE_CONDITIONS,
                seq,
                "PATCH",
                _pod_path(ns, name, "status"),
                kind="pods/status",
                body=patch,
                content_type=SMP,
            )
            if code in (200, 201):
                self._unschedulable[(ns, name)] = message
                uid = ((body or {}).get("metadata") or {}).get("uid", "")
                written = anyio.Event()
                if self.events.record(
                    ObjectRef.pod(ns, name, uid),
                    "Warning",
                    "FailedScheduling",
                    message,
                    dedup_token=message,  # the same message again after a restart: no second Event
                    done=written,
                ):
                    await written.wait()
            elif code != 404:
                log.warning("pod %s/%s PodScheduled condition: %s %s", ns, name, code, message_of(body))

        async with anyio.create_task_group() as tg:
            for key, message in sorted(e.pods.items()):
                ns, _, name = key.partition("/")
                if self._unschedulable.get((ns, name)) == message:
                    self.counters.spared["pods/status"] += 1
                    continue
                tg.start_soon(one, ns, name, message)


def _newer(written: _Known | None, api: _Known | None) -> _Known | None:
    """What the API holds as far as we know: our last write, unless the API showed a newer copy."""
    if written is None:
        return api
    if api is None or api.rv <= written.rv:
        return written
    return api


def _unschedulable_message(pod: dict[str, Any]) -> str | None:
    """The message of a pod's `PodScheduled=False, Unschedulable` condition, if it has one."""
    for c in (pod.get("status") or {}).get("conditions") or ():
        if (
            isinstance(c, dict)
            and c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
        ):
            return str(c.get("message", ""))
    return None


async def _always() -> bool:
    return True


def _reason(body: Any) -> str:
    return str(body.get("reason", "")) if isinstance(body, dict) else ""
