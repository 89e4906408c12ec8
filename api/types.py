"""The API's request and response types (msgspec Structs); /openapi.json is generated from them."""

from __future__ import annotations

import msgspec

from fumarole.store.events import CycleClosed, DecisionEvent, Event, ObservedEvent, PendingReason

__all__ = [
    "AheadRow",
    "BindStep",
    "CycleDetail",
    "CyclePage",
    "CycleRow",
    "DecisionPage",
    "DecisionRow",
    "EventPage",
    "EventRow",
    "EvictionStep",
    "Explanation",
    "GpuCard",
    "Health",
    "IngestItem",
    "IngestRequest",
    "IngestResponse",
    "JobDetail",
    "JobHistory",
    "JobList",
    "JobRow",
    "NodeList",
    "NodeRow",
    "PhaseStep",
    "Problem",
    "QueueList",
    "QueueRow",
    "Ready",
    "TaskRow",
    "WaitSpan",
]

Quantities = dict[str, str]  # Kubernetes quantity strings by resource name ({"cpu": "500m"})


class Problem(msgspec.Struct, kw_only=True):
    """An error: `error` is a short code, `detail` the human message, `path` the JSON path at fault."""

    error: str
    detail: str
    path: str = ""


class Health(msgspec.Struct, kw_only=True, omit_defaults=True):
    status: str
    leading: bool | None = None  # with leader election: whether this replica decides (else null)
    leader: str = ""  # with leader election: the lease holder's identity


class Ready(msgspec.Struct, kw_only=True, omit_defaults=True):
    ready: bool
    folded_seq: int
    last_seq: int
    leading: bool | None = None  # with leader election: whether this replica decides (else null)
    leader: str = ""  # with leader election: the lease holder's identity
    # The configuration's warnings (what it names that is skipped, e.g. a misspelt plugin), always
    # present: a run with one goes on as Volcano's does, and says so here.
    config_warnings: list[str]


# ----------------------------------------------------------------------------- cycles, decisions


class DecisionRow(msgspec.Struct, kw_only=True):
    """One decision event of the log with its sequence number."""

    seq: int
    type: str
    event: DecisionEvent


class CycleRow(msgspec.Struct, kw_only=True):
    """A cycle: its CycleOpened (watermark, configuration hash, virtual now, trace id) and, once
    written, its CycleClosed (counts, timings)."""

    cycle: int
    seq: int
    watermark: int
    conf_hash: str
    now_ms: int
    trace_id: str
    closed: CycleClosed | None = None


class CyclePage(msgspec.Struct, kw_only=True):
    """A keyset page of cycles; pass `next_since` as `since` for the next page (null at the end)."""

    items: list[CycleRow]
    next_since: int | None = None


class CycleDetail(msgspec.Struct, kw_only=True):
    """A cycle and its decision events (at most `limit`; `next_since` pages through the rest)."""

    cycle: CycleRow
    decisions: list[DecisionRow]
    next_since: int | None = None


class DecisionPage(msgspec.Struct, kw_only=True):
    items: list[DecisionRow]
    next_since: int | None = None


# ----------------------------------------------------------------------------- events


class EventRow(msgspec.Struct, kw_only=True):
    seq: int
    type: str
    idem_key: str | None = None
    event: Event


class EventPage(msgspec.Struct, kw_only=True):
    items: list[EventRow]
    next_since: int | None = None


class IngestItem(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One observed event to append; a key already in the log is accepted once (same seq back)."""

    idem_key: str = msgspec.field(name="idem_key")
    event: ObservedEvent


class IngestRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    events: list[IngestItem]


class IngestResponse(msgspec.Struct, kw_only=True):
    """`seqs[i]` is the log position of `events[i]` (the original one for a repeated key)."""

    seqs: list[int]
    written: int
    duplicates: int


# ----------------------------------------------------------------------------- jobs


class Explanation(msgspec.Struct, kw_only=True):
    """Why a job waits, as of `cycle`: `message` for humans, `reasons` ranked (0 first), the job's
    position in its queue (1 = next), and each waiting pod's own reason."""

    cycle: int
    message: str
    reasons: list[PendingReason]
    queue_position: int
    pods: dict[str, str]


class TaskRow(msgspec.Struct, kw_only=True):
    name: str
    status: str
    node: str = ""


class JobRow(msgspec.Struct, kw_only=True):
    """A job (PodGroup) now.  `pending`: some of its pods wait (a Running job may have some);
    `waited_ms`: the virtual time from the first cycle of its current wait to the log's last cycle
    (null when it does not wait; daemon/runtime/wait_clock.py); `wait_reason`: the most important
    reason code of its explanation ("" when none); `queue_exists`: false when its queue is not a
    Queue the cluster has (the commonest typo)."""

    namespace: str
    name: str
    queue: str
    phase: str
    min_member: int
    tasks: int
    tasks_by_status: dict[str, int]
    pending: bool
    waited_ms: int | None = None
    wait_reason: str = ""
    queue_exists: bool = True


class JobList(msgspec.Struct, kw_only=True):
    items: list[JobRow]
    folded_seq: int


class WaitSpan(msgspec.Struct, kw_only=True):
    """Consecutive cycles in which the job waited for the same set of reasons.

    It waited from cycle `first_cycle` (virtual time `from_ms`) through `last_cycle` (`cycles`
    cycles ran in between), until cycle `until_cycle` (`until_ms`), whose explanation has other
    reasons or none (the job stopped waiting); `until_*` are null while it still waits at the end
    of the log.  `reasons`: the reason codes, most important first, and `message` the explanation,
    as recorded in `first_cycle`."""

    first_cycle: int
    last_cycle: int
    cycles: int
    from_ms: int
    until_cycle: int | None
    until_ms: int | None
    reasons: list[str]
    message: str


class BindStep(msgspec.Struct, kw_only=True):
    """The pods of the job a cycle bound (pod -> node), at the cycle's virtual time."""

    cycle: int
    at_ms: int
    pods: dict[str, str]


class EvictionStep(msgspec.Struct, kw_only=True):
    """A pod of the job a cycle evicted: from which node, by which action, why."""

    cycle: int
    at_ms: int
    pod: str
    node: str
    action: str
    reason: str


class PhaseStep(msgspec.Struct, kw_only=True):
    """The cycle that moved the PodGroup to `phase` (Pending, Inqueue, Running, Completed, ...)."""

    cycle: int
    at_ms: int
    phase: str


class JobHistory(msgspec.Struct, kw_only=True):
    """What the log's decisions say about the job over time (cycle ids and virtual times).

    `waited_ms` / `wait_cycles`: the virtual time and the number of cycles it spent waiting in
    all; it waited from `waited_from_cycle` to `waited_until_cycle` (null while it still waits:
    `waiting`).  The lists are oldest first and hold the most recent `listed` entries of each
    kind; `*_total` counts them all."""

    waiting: bool
    waited_ms: int
    wait_cycles: int
    waited_from_cycle: int | None
    waited_from_ms: int | None
    waited_until_cycle: int | None
    waited_until_ms: int | None
    waits: list[WaitSpan]
    waits_total: int
    binds: list[BindStep]
    binds_total: int
    evictions: list[EvictionStep]
    evictions_total: int
    phases: list[PhaseStep]
    phases_total: int
    listed: int


class AheadRow(msgspec.Struct, kw_only=True):
    """A waiting job of the same queue placed before this one (its recorded queue position)."""

    namespace: str
    name: str
    position: int
    phase: str
    wait_reason: str


class JobDetail(msgspec.Struct, kw_only=True):
    """A job (PodGroup) now: phase, conditions, tasks by status, why it waits (null when it does not),
    and its history: when and why it waited, when it was bound, evictions, phase changes."""

    namespace: str
    name: str
    queue: str
    phase: str
    min_member: int
    priority: int
    tasks_by_status: dict[str, int]
    tasks: list[TaskRow]
    conditions: list[dict[str, str]]
    pending: bool
    explanation: Explanation | None
    folded_seq: int
    history: JobHistory
    # as in JobRow; `ahead`: the waiting jobs of its queue recorded before it (by queue position,
    # at most 50 listed; `ahead_total` counts them all)
    waited_ms: int | None = None
    queue_exists: bool = True
    ahead: list[AheadRow] = msgspec.field(default_factory=list)
    ahead_total: int = 0


# ----------------------------------------------------------------------------- queues, nodes


class QueueRow(msgspec.Struct, kw_only=True):
    """A queue's spec (weight, capability, guarantee, state, parent) and the queue-share plugin's
    figures (deserved, allocated, inqueue, request, real capability, share) as last recorded."""

    name: str
    weight: int
    state: str
    parent: str
    reclaimable: bool
    capability: Quantities
    guarantee: Quantities
    deserved: Quantities
    allocated: Quantities
    inqueue: Quantities
    request: Quantities
    real_capability: Quantities
    share: float


class QueueList(msgspec.Struct, kw_only=True):
    items: list[QueueRow]
    folded_seq: int


class QueueSeries(msgspec.Struct, kw_only=True):
    """One queue over the sampled cycles of a QueueHistory: one value per sample cycle.

    `allocated` and `deserved` are numbers by resource (cpu in cores, memory in bytes, other
    resources in their own units), null where the queue-share plugin recorded no such figure at that
    cycle; `share` is the plugin's dominant share (null when it recorded neither deserved nor
    allocated for the queue); `waiting` counts the queue's jobs whose last explanation says they wait.
    """

    name: str
    allocated: dict[str, list[float | None]]
    deserved: dict[str, list[float | None]]
    share: list[float | None]
    waiting: list[int]


class QueueHistory(msgspec.Struct, kw_only=True):
    """Every queue's figures over a range of cycles (GET /v1/queue-history), downsampled to at most
    `points` sample cycles, each the state as of that cycle (figures are recorded when they change).
    `recorded` counts the queue-figure events the log holds in the range."""

    from_cycle: int
    to_cycle: int
    last_cycle: int
    cycles: list[int]
    recorded: int
    queues: list[QueueSeries]


class GpuCard(msgspec.Struct, kw_only=True):
    """One GPU card of a node as deviceshare's gpushare sees it (nodes with volcano.sh/gpu-memory and
    volcano.sh/gpu-number): its memory and what the pods naming it (volcano.sh/gpu-index) use, in the
    units of volcano.sh/gpu-memory (MiB)."""

    index: int
    memory: int
    used_memory: int
    pods: list[str]


class NodeRow(msgspec.Struct, kw_only=True):
    name: str
    allocatable: Quantities
    idle: Quantities
    used: Quantities
    releasing: Quantities
    pods: list[str]
    gpus: list[GpuCard] = msgspec.field(default_factory=list)  # empty unless the node has gpushare cards
    labels: dict[str, str] = msgspec.field(default_factory=dict)  # the node's metadata.labels
    # each pod of `pods` ("namespace/name") -> its job ("namespace/name" of its PodGroup)
    pod_jobs: dict[str, str] = msgspec.field(default_factory=dict)


class NodeList(msgspec.Struct, kw_only=True):
    items: list[NodeRow]
    folded_seq: int


class HyperNodeRow(msgspec.Struct, kw_only=True):
    """One HyperNode (topology.volcano.sh/v1alpha1) resolved against the cluster's nodes as a session
    resolves it (daemon/scheduler/model/hypernode.py build_topology): its tier, its parent HyperNode
    ("" for none), its HyperNode children, and `nodes`, every node it holds (its Node members by exact
    name, regex or labels, plus its HyperNode members' nodes), in the nodes' order."""

    name: str
    tier: int
    tier_name: str
    parent: str
    children: list[str]
    nodes: list[str]


class HyperNodeList(msgspec.Struct, kw_only=True):
    """Every HyperNode by name (GET /v1/hypernodes); `tiers` the tiers they use, ascending; `ready` false
    (with `problem`) when the topology is broken (a member with two parents, a cycle), when Volcano
    schedules no job with a network topology."""

    items: list[HyperNodeRow]
    tiers: list[int]
    ready: bool
    problem: str
    folded_seq: int
