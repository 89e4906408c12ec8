"""Decisions: what a scheduling cycle decided, written in one transaction per cycle.

A cycle is `CycleOpened`, then its binds / evictions / pipelines / PodGroup status changes /
job explanations / queue figures (when changed), then `CycleClosed`.  `CycleOpened.watermark`
is the last log sequence the cycle's snapshot includes; with the configuration (by hash; the
text is in the latest `ConfigurationRecorded` of that hash) it is everything replay needs.  Pods are named by
namespace, name and uid; jobs as "<namespace>/<podgroup>".  `trace_id` is the cycle's
OpenTelemetry trace id as 32 hex digits ("" when tracing is off).
"""

from __future__ import annotations

import msgspec

from fumarole.store.events.base import EventBase


class ConfigurationRecorded(EventBase, frozen=True, tag="config.recorded"):
    """The scheduler configuration text in force from now on (sha256 hex of the text)."""

    conf_hash: str
    text: str
    source: str = ""


class ConfigurationRejected(EventBase, frozen=True, tag="config.rejected"):
    """A changed configuration file failed to load; the last good one stays in force."""

    source: str
    error: str
    conf_hash: str = ""


class CycleOpened(EventBase, frozen=True, tag="cycle.opened"):
    cycle: int
    watermark: int
    now_ms: int
    conf_hash: str
    seed: int = 0
    trace_id: str = ""


class CalloutCall(msgspec.Struct, frozen=True, kw_only=True):
    """One question a session asked an outside service, and its answer as the session read it.

    `digest` is the SHA-256 hex of `url`, a NUL byte and the request body (the body itself is
    not kept); `status` is the HTTP status (0 when `error` says why there is none), `body` the
    answer's text (not kept for verbs whose answer is not read), `error` a transport failure
    (refused, timed out, too large) in the words the plugin saw.
    """

    verb: str
    url: str
    digest: str
    status: int = 0
    body: str = ""
    error: str = ""


class CalloutsRecorded(EventBase, frozen=True, tag="cycle.callouts"):
    """The answers a cycle's session got from outside services (the extender plugin), in call
    order; written right after the cycle's CycleOpened, before its decisions, and only when the
    session called out.  Replay answers the re-run session from it and never calls out."""

    cycle: int
    calls: tuple[CalloutCall, ...] = ()
    trace_id: str = ""


class BindDecided(EventBase, frozen=True, tag="decision.bind"):
    """A bind; `annotations` are written on the pod with it (e.g. deviceshare's GPU card index)."""

    cycle: int
    namespace: str
    name: str
    uid: str
    node: str
    job: str
    queue: str
    trace_id: str = ""
    annotations: dict[str, str] = msgspec.field(default_factory=dict)


class EvictDecided(EventBase, frozen=True, tag="decision.evict"):
    """An eviction with its cause: the action, and in `reason` the preemptor/queue and plugin."""

    cycle: int
    namespace: str
    name: str
    uid: str
    node: str
    job: str
    queue: str
    action: str
    reason: str
    trace_id: str = ""


class PipelineDecided(EventBase, frozen=True, tag="decision.pipeline"):
    """A task pipelined onto a node's future-idle resources (no bind is sent)."""

    cycle: int
    namespace: str
    name: str
    uid: str
    node: str
    job: str
    queue: str
    trace_id: str = ""


class PodGroupConditionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One PodGroup condition as Volcano writes it (`type`: Scheduled, Unschedulable, ...)."""

    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    transition_id: str = ""


class PodGroupStatusChanged(EventBase, frozen=True, kw_only=True, tag="decision.podgroup_status"):
    """A PodGroup's status as the session left it.  v2: a condition's kind is keyed `type` (v1
    wrote `type_`; store/codec.py upcasts)."""

    cycle: int
    namespace: str
    name: str
    phase: str
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    conditions: tuple[PodGroupConditionRecord, ...] = ()
    trace_id: str = ""
    v: int = 2


class PendingReason(msgspec.Struct, frozen=True, kw_only=True):
    """One machine-readable reason a job waits, ranked by `rank` (0 = most important).

    `code`: enqueue-rejected, queue-overused, queue-capability, gang-unsatisfied,
    predicates-failed, queue-closed, job-invalid, ...  `plugin` names the plugin that said
    no, `resource` the resource at fault and `shortfall` by how much (a quantity string);
    `nodes` counts nodes per predicate failure reason ({"Insufficient nvidia.com/gpu": 900}).
    """

    code: str
    message: str
    rank: int = 0
    plugin: str = ""
    resource: str = ""
    shortfall: str = ""
    placeable: int = 0
    min_member: int = 0
    total_nodes: int = 0
    nodes: dict[str, int] = msgspec.field(default_factory=dict)


class JobExplained(EventBase, frozen=True, tag="decision.job_explained"):
    """Why a job did not get (all of) its pods this cycle; written when the explanation changes."""

    cycle: int
    namespace: str
    name: str
    queue: str
    message: str
    reasons: tuple[PendingReason, ...] = ()
    queue_position: int = 0
    pods: dict[str, str] = msgspec.field(default_factory=dict)
    trace_id: str = ""


class QueueFigures(msgspec.Struct, frozen=True, kw_only=True):
    """One queue as the queue-share plugin in force (proportion or capacity) saw it in a session.

    Resources are Kubernetes quantity strings by resource name (unlimited dimensions left out);
    `share` is the plugin's dominant share, rounded to 6 digits.  Fields the plugin does not
    compute stay empty (proportion has no `guarantee`/`parent`, capacity no `weight`).

    `status_allocated` is not the plugin's: it is the Queue's `status.allocated` as Volcano's
    session close writes it (framework/session.go updateQueueStatus) — the requests of the
    tasks Allocated, Binding, Bound or Running, rolled up to `root`; pipelined tasks, which the
    plugin's `allocated` counts, are not — in util.ConvertRes2ResList's form (`cpu` and
    `memory` always).  Every queue of the session has it, so queues the plugin does not track
    (`root`, an idle `default`) appear with it alone.  Empty in events written before it existed
    (read: not known, nothing to write).
    """

    weight: int = 0
    deserved: dict[str, str] = msgspec.field(default_factory=dict)
    allocated: dict[str, str] = msgspec.field(default_factory=dict)
    capability: dict[str, str] = msgspec.field(default_factory=dict)
    guarantee: dict[str, str] = msgspec.field(default_factory=dict)
    request: dict[str, str] = msgspec.field(default_factory=dict)
    inqueue: dict[str, str] = msgspec.field(default_factory=dict)
    share: float = 0.0
    parent: str = ""
    status_allocated: dict[str, str] = msgspec.field(default_factory=dict)


class QueueFiguresRecorded(EventBase, frozen=True, tag="decision.queue_figures"):
    """The per-queue figures of a cycle, written only when they differ from the last recorded ones."""

    cycle: int
    queues: dict[str, QueueFigures] = msgspec.field(default_factory=dict)
    trace_id: str = ""


class CycleClosed(EventBase, frozen=True, tag="cycle.closed"):
    """Counts and timings (seconds, measured, not part of the decision) of a finished cycle."""

    cycle: int
    binds: int = 0
    evictions: int = 0
    pipelined: int = 0
    jobs: int = 0
    tasks: int = 0
    pending_tasks: int = 0
    duration_s: float = 0.0
    action_seconds: dict[str, float] = msgspec.field(default_factory=dict)
    plugin_seconds: dict[str, float] = msgspec.field(default_factory=dict)
    trace_id: str = ""


DecisionEvent = (
    ConfigurationRecorded
    | ConfigurationRejected
    | CycleOpened
    | CalloutsRecorded
    | BindDecided
    | EvictDecided
    | PipelineDecided
    | PodGroupStatusChanged
    | JobExplained
    | QueueFiguresRecorded
    | CycleClosed
)
