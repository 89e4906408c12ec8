"""The Kubernetes sink: committed decisions become API calls, as Volcano's scheduler makes them.

Binds (`apply` of a BindDecided): POST `pods/NAME/binding` with a Binding naming the pod's uid and
carrying the decision's annotations (deviceshare's card choice) — the API server copies a
Binding's annotations onto the pod, which is how Volcano's DefaultBinder writes them — then a
`Scheduled` Event ("Successfully assigned NS/NAME to NODE").  Outcomes: 201 is a success; a 409
whose pod turns out to be bound to the decided node already (a decision forwarded again after a
restart) is a success too; a pod that is gone (404) or was recreated (another uid), or bound
elsewhere, is a failed outcome carrying the API's message, never retried; transient errors
(unreachable server, 429, 5xx) are retried with backoff up to `retries` times, then failed.

Evictions (an EvictDecided): as Volcano's evictor: an `Evict` Warning Event ("Pod is evicted,
because of REASON"), the pod's conditions `Ready=False (Evict)` and `DisruptionTarget=True
(PreemptionByScheduler)` written through `pods/NAME/status`, then DELETE with the pod's uid as a
precondition and its own grace period.  A pod already gone, or recreated under another uid, is a
successful no-op (the adapter contract).

Reports (`report` of the other decisions, best effort, no outcome): a PodGroupStatusChanged is
written onto the PodGroup itself (a merge patch of `status`: phase, conditions, running/succeeded/
failed; Volcano's PodGroup CRD has no status subresource); a JobExplained sets, on each pending
pod it names, the condition `PodScheduled=False, reason Unschedulable` with our why-pending
message and records a `FailedScheduling` Warning Event (only when the message changed, as
Volcano's taskUnschedulable does); a QueueFiguresRecorded writes each queue's `status.allocated`
through `queues/NAME/status` when it changed (Volcano's session close does the same).

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
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from daemon.adapters.kubernetes.client import TRANSIENT_CODES, KubeApi, KubeTransientError, message_of
from store.events import (
    BindDecided,
    BindFailed,
    BindSucceeded,
    EvictDecided,
    EvictFailed,
    EvictSucceeded,
    JobExplained,
    ObservedEvent,
    OutcomeEvent,
    PodGroupStatusChanged,
    QueueFiguresRecorded,
)

log = logging.getLogger("fumarole.kubernetes.sink")

COMPONENT = "volcano"  # the Events' source component, as Volcano's scheduler names itself
SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


SUPERSEDED = "superseded: another replica led since this decision was made; the leader re-decides the pod"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_path(ns: str, name: str, sub: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/pods/{name}" + (f"/{sub}" if sub else "")


class KubeSink:
    def __init__(
        self,
        api: KubeApi,
        *,
        retries: int = 5,
        backoff: float = 0.2,
        scheduler_name: str = "volcano",
        instance: str = "",
        sleep: Callable[[float], Awaitable[Any]] = anyio.sleep,
        may_act: Callable[[], Awaitable[bool]] | None = None,
        may_act_on: Callable[[int], Awaitable[bool]] | None = None,
    ) -> None:
        self.api = api
        self.may_act = may_act or _always
        self.may_act_on = may_act_on
        self.retries = retries
        self.backoff = backoff
        self.scheduler_name = scheduler_name
        self.instance = instance or f"fumarole-{uuid.uuid4().hex[:8]}"
        self.sleep = sleep
        self._unschedulable: dict[tuple[str, str], str] = {}
        self._queue_allocated: dict[str, dict[str, str]] = {}

    async def _call(self, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        """A request retried on transient failures; (status, body), status 0 when it never got through."""
        delay = self.backoff
        why = ""
        for attempt in range(self.retries + 1):
            try:
                code, body = await self.api.request(method, path, **kw)
            except KubeTransientError as e:
                why = str(e)
            else:
                if code not in TRANSIENT_CODES:
                    return code, body
                why = f"{code} {message_of(body)}"
            if attempt < self.retries:
                log.info("%s %s: %s; retry %d in %.1fs", method, path, why, attempt + 1, delay)
                await self.sleep(delay)
                delay = min(delay * 2, 5.0)
        return 0, {"message": f"gave up after {self.retries + 1} attempts: {why}"}

    # ------------------------------------------------------------------ decisions with outcomes
    async def apply(
        self, seq: int, decision: BindDecided | EvictDecided
    ) -> tuple[OutcomeEvent, list[ObservedEvent]]:
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
                decision_seq=seq, namespace=d.namespace, name=d.name, reason=SUPERSEDED, superseded=True
            ), []
        if isinstance(decision, BindDecided):
            return await self._bind(seq, decision), []
        return await self._evict(seq, decision), []

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
        code, body = await self._call("POST", _pod_path(d.namespace, d.name, "binding"), body=binding)

        def failed(reason: str) -> OutcomeEvent:
            return BindFailed(
                decision_seq=seq, namespace=d.namespace, name=d.name, node=d.node, reason=reason
            )

        if code in (200, 201):
            self._unschedulable.pop((d.namespace, d.name), None)
            await self._event(
                d.namespace,
                d.name,
                d.uid,
                "Normal",
                "Scheduled",
                f"Successfully assigned {d.namespace}/{d.name} to {d.node}",
            )
            return BindSucceeded(decision_seq=seq, namespace=d.namespace, name=d.name, node=d.node)
        if code == 409:
            pcode, pod = await self._call("GET", _pod_path(d.namespace, d.name))
            if pcode == 200:
                meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
                if (not d.uid or meta.get("uid") == d.uid) and spec.get("nodeName") == d.node:
                    return BindSucceeded(decision_seq=seq, namespace=d.namespace, name=d.name, node=d.node)
            return failed(f"409 Conflict: {message_of(body)}")
        if code == 0:
            return failed(f"transient: {message_of(body)}")
        return failed(f"{code} {_reason(body)}: {message_of(body)}")

    async def _evict(self, seq: int, d: EvictDecided) -> OutcomeEvent:
        def ok() -> OutcomeEvent:
            return EvictSucceeded(decision_seq=seq, namespace=d.namespace, name=d.name)

        def failed(reason: str) -> OutcomeEvent:
            return EvictFailed(decision_seq=seq, namespace=d.namespace, name=d.name, reason=reason)

        code, pod = await self._call("GET", _pod_path(d.namespace, d.name))
        if code == 404:
            return ok()
        if code != 200:
            return failed(f"{code} {message_of(pod)}" if code else f"transient: {message_of(pod)}")
        uid = (pod.get("metadata") or {}).get("uid", "")
        if d.uid and uid != d.uid:
            return ok()
        message = f"Pod is evicted, because of {d.reason}"
        await self._event(d.namespace, d.name, uid, "Warning", "Evict", message)
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
            "PATCH", _pod_path(d.namespace, d.name, "status"), body=patch, content_type=SMP
        )
        if scode == 404:
            return ok()
        if scode not in (200, 201):
            log.warning("evict %s/%s: status update: %s %s", d.namespace, d.name, scode, message_of(sbody))
        dcode, dbody = await self._call(
            "DELETE",
            _pod_path(d.namespace, d.name),
            body={"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}},
        )
        if dcode in (200, 202, 404):
            return ok()
        if dcode == 409:  # the uid precondition failed: recreated meanwhile
            return ok()
        return failed(f"{dcode} {message_of(dbody)}" if dcode else f"transient: {message_of(dbody)}")

    # ------------------------------------------------------------------ reports (no outcome)
    async def report(self, seq: int, event: Any) -> None:
        if not await self.may_act():
            return
        if isinstance(event, PodGroupStatusChanged):
            await self._podgroup_status(event)
        elif isinstance(event, JobExplained):
            await self._unschedulable_pods(event)
        elif isinstance(event, QueueFiguresRecorded):
            await self._queue_status(event)

    async def _queue_status(self, e: QueueFiguresRecorded) -> None:
        """Queue `status.allocated`, as Volcano's session close writes it (only what changed)."""
        for name, figures in sorted(e.queues.items()):
            allocated = dict(figures.allocated)
            before = self._queue_allocated.get(name)
            if before == allocated:
                continue
            patch: dict[str, Any] = dict(allocated)
            for gone in (before or {}).keys() - allocated.keys():
                patch[gone] = None
            path = f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}/status"
            code, body = await self._call(
                "PATCH", path, body={"status": {"allocated": patch}}, content_type=MERGE
            )
            if code in (200, 201):
                self._queue_allocated[name] = allocated
            elif code != 404:
                log.warning("queue %s status: %s %s", name, code, message_of(body))

    async def _podgroup_status(self, e: PodGroupStatusChanged) -> None:
        now = _now()
        conditions = [
            {
                "type": c.type,
                "status": c.status,
                "transitionID": c.transition_id,
                "lastTransitionTime": now,
                "reason": c.reason,
                "message": c.message,
            }
            for c in e.conditions
        ]
        status: dict[str, Any] = {"phase": e.phase, "conditions": conditions}
        for k in ("running", "succeeded", "failed"):
            v = getattr(e, k)
            status[k] = v if v else None  # omitted when zero, as the Go client writes it
        path = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{e.namespace}/podgroups/{e.name}"
        code, body = await self._call("PATCH", path, body={"status": status}, content_type=MERGE)
        if code not in (200, 201, 404):
            log.warning("podgroup %s/%s status: %s %s", e.namespace, e.name, code, message_of(body))

    async def _unschedulable_pods(self, e: JobExplained) -> None:
        for key, message in sorted(e.pods.items()):
            ns, _, name = key.partition("/")
            if self._unschedulable.get((ns, name)) == message:
                continue
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
                "PATCH", _pod_path(ns, name, "status"), body=patch, content_type=SMP
            )
            if code in (200, 201):
                self._unschedulable[(ns, name)] = message
                uid = ((body or {}).get("metadata") or {}).get("uid", "")
                await self._event(ns, name, uid, "Warning", "FailedScheduling", message)
            elif code != 404:
                log.warning("pod %s/%s PodScheduled condition: %s %s", ns, name, code, message_of(body))

    async def _event(self, ns: str, name: str, uid: str, type_: str, reason: str, message: str) -> None:
        """A core/v1 Event about a pod, as client-go's recorder writes one (best effort)."""
        now = _now()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": ns},
            "involvedObject": {"kind": "Pod", "namespace": ns, "name": name, "uid": uid, "apiVersion": "v1"},
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": type_,
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
        }
        code, body = await self._call("POST", f"/api/v1/namespaces/{ns}/events", body=event)
        if code not in (200, 201):
            log.info("event %s on %s/%s: %s %s", reason, ns, name, code, message_of(body))


async def _always() -> bool:
    return True


def _reason(body: Any) -> str:
    return str(body.get("reason", "")) if isinstance(body, dict) else ""
