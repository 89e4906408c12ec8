"""The adapter contract: where observed facts come from (ClusterSource) and where decisions go (ClusterSink).

The runtime talks to a cluster only through these two protocols (plus, for a simulated
cluster, the lockstep clock of `SimulatedCluster`).  Every value crossing them is an event
of `fumarole.store.events`, so whatever an adapter says is written to the log verbatim and the
cache learns of it like of any other fact.

Contract, in the order the runtime uses it:

1. On start the runtime calls `ClusterSource.initial_events()` once and appends the result
   (a full listing: `ResyncStarted`, one upsert per object that exists now, `ResyncCompleted`,
   both markers naming `RESYNC_KINDS`).  The projection deletes objects of those kinds that
   the listing did not mention.
2. For each decision event (`BindDecided`, `EvictDecided`) the dispatcher calls
   `ClusterSink.apply(seq, decision)` with the decision's log sequence number, and appends
   the returned outcome (`decision_seq == seq`) together with the facts the cluster reports
   back, in one batch.  A sink must be idempotent per decision: the dispatcher re-forwards
   decisions after its checkpoint when it restarts, so the same `(seq, decision)` can arrive
   twice.  A repeated bind of a pod already bound where the decision says answers the same
   success with no new facts; an eviction of a pod that is gone (or was recreated with
   another uid) is a successful no-op.
3. A simulated cluster (`SimulatedCluster`) also owns the clock: between two scheduling
   cycles the runtime calls `advance(idle)` and appends what it returns; it stops when
   `drained()` is true.  After a crash it rebuilds the log's projection, then hands the
   adapter every observed and outcome event of the log, in log order, through `resume()`
   before calling anything else (`initial_events()` included).

4. A live cluster (`LiveCluster`, the Kubernetes adapter) has no lockstep: the runtime calls
   `connect()` before anything is created on disk, appends `list_all()` (changes since what
   the log holds, with their idempotency keys), runs `watch(submit)` and `run_election()` as
   tasks, runs cycles on a wall-clock timer while `leading`, forwards decisions with up to
   `concurrency` calls in flight, hands `report()` the PodGroup status changes, job
   explanations and queue figures each batch carries, and `close()`s it at the end.

Every method is synchronous in effect: `async` only so that a real cluster's adapter can do
I/O behind the same surface.  A batch returned by one call must be appended to the log in
one transaction (the simulator's `resume()` relies on never seeing half of a batch).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from fumarole.store.events import BindDecided, EvictDecided, ObservedEvent, OutcomeEvent
from fumarole.store.events.base import EventBase

__all__ = [
    "RESYNC_KINDS",
    "ClusterSink",
    "ClusterSource",
    "Decision",
    "LiveCluster",
    "PipelinedSink",
    "ReportingSink",
    "SimulatedCluster",
    "Submit",
]

Decision = BindDecided | EvictDecided
"""The decisions a sink acts on (pipelines and PodGroup statuses are not sent to a cluster)."""

RESYNC_KINDS: tuple[str, ...] = (
    "HyperNode",
    "Namespace",
    "Node",
    "Numatopology",
    "Pod",
    "PodDisruptionBudget",
    "PodGroup",
    "PriorityClass",
    "Queue",
    "ResourceQuota",
)
"""The object kinds (Kubernetes `kind` names) a full listing covers, as named in Resync markers."""


@runtime_checkable
class ClusterSource(Protocol):
    """Where observed facts come from."""

    async def initial_events(self) -> list[ObservedEvent]:
        """A full listing of the cluster as it is now, wrapped in ResyncStarted/ResyncCompleted.

        Each event's `at_ms` is the source's current time (virtual time for the simulator).
        """
        ...


@runtime_checkable
class ClusterSink(Protocol):
    """Where decisions go."""

    async def apply(self, seq: int, decision: Decision) -> tuple[OutcomeEvent, list[ObservedEvent]]:
        """Act on one decision; return its outcome and the facts the cluster reports back.

        The outcome is BindSucceeded/BindFailed for a bind, EvictSucceeded/EvictFailed for an
        eviction, always with `decision_seq == seq`.  The facts are what a watch would show
        afterwards: the pod upserted as Running on its node after a bind; the pod deleted
        after an eviction, followed by its replacement (a new uid, Pending, unbound) when a
        controller recreates it.  Idempotent per `seq` (see the module notes).
        """
        ...


@runtime_checkable
class SimulatedCluster(ClusterSource, ClusterSink, Protocol):
    """A source and sink that also owns a virtual clock, driven in lockstep by the runtime.

    Loop: `initial_events()`; then repeat { run a cycle on the projection with
    `now = now_ms / 1000`; `apply()` each of its binds and evictions; `advance(idle)` where
    `idle` is true when the cycle decided nothing (no bind, no eviction, no PodGroup status
    change) and applying changed nothing } until `drained()`.
    """

    @property
    def now_ms(self) -> int:
        """Current virtual time in milliseconds (0 at the start of the simulation)."""
        ...

    @property
    def period_ms(self) -> int:
        """The schedule period: how far a non-idle `advance` moves the clock."""
        ...

    def advance(self, idle: bool) -> list[ObservedEvent]:
        """Move virtual time and return what happened on the way (each event at its own time).

        `idle=False`: move by one period.  `idle=True`: jump to the next due event (a
        submission or a pod completion), at least one period ahead; when nothing at all is
        due, return [] and leave the clock where it is (the remaining pending pods are then
        unschedulable for good and `drained()` turns true).  The batch ends with
        ClockAdvanced(at_ms=new time, facts=how many events precede it in the batch) whenever
        the clock moved (the daemon's restart rule reads `facts`: daemon/runtime/lockstep.py).
        """
        ...

    def drained(self) -> bool:
        """True when the workload is over: see the implementation's rule."""
        ...

    def resume(self, events: list[EventBase]) -> None:
        """Rebuild the adapter's state from the observed and outcome events of the log, in log order."""
        ...


Submit = Callable[[list[ObservedEvent], list[str | None]], Awaitable[Any]]
"""How a live source appends: events and their idempotency keys (None: no key), one batch."""


@runtime_checkable
class ReportingSink(ClusterSink, Protocol):
    """A sink that also writes the scheduler's other results back to the cluster."""

    async def report(self, seq: int, event: Any) -> None:
        """Write one PodGroup status change, job explanation or queue figures (by its seq)."""
        ...


@runtime_checkable
class PipelinedSink(ReportingSink, Protocol):
    """A reporting sink that takes many decisions at once and orders its own calls (a live cluster).

    The dispatcher hands it every row in log order through `admit` (synchronous, before the row's
    `apply` or `report` starts), then runs each row's `apply` / `report` as its own task; `report`
    returns once its write is done (or found unnecessary, or covered by a newer report's write).
    `run()` is the sink's own background work (its Event writer), run beside the dispatcher.
    """

    def admit(self, seq: int, event: Any) -> None:
        """Note a row handed over (log order), before its `apply` or `report` runs."""
        ...

    async def run(self) -> None:
        """The sink's background work, until cancelled."""
        ...


@runtime_checkable
class LiveCluster(ReportingSink, Protocol):
    """A real cluster: listed and watched, acted on through its API, paced by the wall clock."""

    concurrency: int
    """How many sink calls may be in flight at once."""

    async def connect(self) -> None:
        """Credentials and the server's start-up checks; raises naming what is wrong."""
        ...

    async def close(self) -> None: ...

    def resume(self, facts: list[EventBase]) -> None:
        """The log's observed facts after a restart (what the source already logged)."""
        ...

    async def list_all(self) -> tuple[list[ObservedEvent], list[str | None]]:
        """What changed since the log's facts, with idempotency keys (a relisting)."""
        ...

    async def watch(self, submit: Submit) -> None:
        """Watch every kind and append each change through `submit` until cancelled."""
        ...

    async def run_election(self) -> None:
        """Keep the leader-election lease (returns at once without leader election)."""
        ...

    def deciding(self, first_seq: int) -> None:
        """A cycle is about to decide; its decisions take seqs from `first_seq` on."""
        ...

    @property
    def leading(self) -> bool:
        """Whether this replica may decide (always, without leader election)."""
        ...

    def leadership(self) -> tuple[bool | None, str]:
        """(whether this replica leads, the lease holder), or (None, "") without leader election."""
        ...
