"""The restart rule of the simulator lockstep (daemon/runtime/lockstep.py) at every cut point.

A log is built batch by batch as the daemon appends it (listing; advance = facts + clock;
configuration; cycle; one batch per forwarded decision); after each batch the position must
name the next step the uninterrupted loop takes, with its input.
"""

from __future__ import annotations

from typing import Any

import pytest

from fumarole.daemon.runtime.lockstep import TRACKED_TYPES, LockstepTracker, Position, Step, next_idle
from fumarole.store.events import (
    BindDecided,
    BindFailed,
    BindSucceeded,
    ClockAdvanced,
    ConfigurationRecorded,
    CycleClosed,
    CycleOpened,
    EvictDecided,
    EvictSucceeded,
    JobExplained,
    NodeUpserted,
    PodDeleted,
    PodGroupStatusChanged,
    PodUpserted,
    ResyncCompleted,
    ResyncStarted,
    event_type,
)


class Log:
    """Appends batches, folding each event into a tracker, as the daemon's writer does."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.tracker = LockstepTracker()

    def append(self, *batch: Any) -> list[int]:
        seqs = []
        for ev in batch:
            self.events.append(ev)
            seq = len(self.events)
            self.tracker.fold(seq, ev)
            seqs.append(seq)
        return seqs

    def position(self) -> Position:
        return self.tracker.position()

    def refolded(self) -> Position:
        """The position a restart computes: a fresh tracker over the log's tracked types."""
        t = LockstepTracker()
        for seq, ev in enumerate(self.events, 1):
            if event_type(ev) in TRACKED_TYPES:
                t.fold(seq, ev)
        return t.position()


def pod(name: str, at: int, node: str = "", phase: str = "Pending") -> PodUpserted:
    manifest = {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }
    return PodUpserted(namespace="ns", name=name, manifest=manifest, at_ms=at)


def listing() -> list[Any]:
    return [
        ResyncStarted(source="simulator"),
        NodeUpserted(name="n1", manifest={"metadata": {"name": "n1"}}),
        ResyncCompleted(source="simulator"),
    ]


def advance(at: int, *facts: Any) -> list[Any]:
    return [*facts, ClockAdvanced(at_ms=at, facts=len(facts))]


def cycle(n: int, *decisions: Any) -> list[Any]:
    return [CycleOpened(cycle=n, watermark=0, now_ms=0, conf_hash="h"), *decisions, CycleClosed(cycle=n)]


def bind(c: int, name: str) -> BindDecided:
    return BindDecided(cycle=c, namespace="ns", name=name, uid=name, node="n1", job="ns/j", queue="q")


def evict(c: int, name: str) -> EvictDecided:
    return EvictDecided(
        cycle=c,
        namespace="ns",
        name=name,
        uid=name,
        node="n1",
        job="ns/j",
        queue="q",
        action="preempt",
        reason="r",
    )


def status(c: int) -> PodGroupStatusChanged:
    return PodGroupStatusChanged(cycle=c, namespace="ns", name="j", phase="Running")


def explained(c: int) -> JobExplained:
    return JobExplained(cycle=c, namespace="ns", name="j", queue="q", message="waiting")


def check(log: Log, want: Position) -> None:
    assert log.position() == want
    assert log.refolded() == want


def test_next_idle_only_when_the_cycle_decided_nothing_and_its_advance_brought_nothing() -> None:
    assert next_idle(False, 0) is True
    assert next_idle(True, 0) is False
    assert next_idle(False, 2) is False
    assert next_idle(True, 2) is False


def test_every_cut_point_of_a_run_names_the_next_step() -> None:
    log = Log()
    check(log, Position(Step.LIST))  # empty log: list the cluster
    log.append(*listing())
    check(log, Position(Step.ADVANCE))  # listed: the first advance (never idle)
    log.append(*advance(1000, pod("a", 1000), pod("b", 1000)))
    check(log, Position(Step.CYCLE))  # clock advanced, facts folded: the cycle is next
    log.append(ConfigurationRecorded(conf_hash="h", text="x"))
    check(log, Position(Step.CYCLE))  # the configuration is the cycle's own first step
    s1, s2 = log.append(*cycle(1, bind(1, "a"), bind(1, "b"), explained(1)))[1:3]
    check(log, Position(Step.ADVANCE, 1, idle=False, undispatched=(s1, s2)))  # before dispatch
    log.append(
        BindSucceeded(decision_seq=s1, namespace="ns", name="a", node="n1"), pod("a", 1000, "n1", "Running")
    )
    check(log, Position(Step.ADVANCE, 1, idle=False, undispatched=(s2,)))  # mid-dispatch
    log.append(BindFailed(decision_seq=s2, namespace="ns", name="b", node="n1", reason="full"))
    check(log, Position(Step.ADVANCE, 1, idle=False))  # dispatched: advance, not idle (binds)

    # A cycle that decides nothing after an advance that brought nothing: the next advance is idle.
    log.append(*advance(2000))
    check(log, Position(Step.CYCLE, 1))
    log.append(*cycle(2, explained(2)))
    check(log, Position(Step.ADVANCE, 2, idle=True))
    # The idle advance jumps to the next due event and brings it: the cycle after it decided
    # nothing, yet the next advance is not idle (its advance changed the cluster).
    log.append(*advance(9000, pod("a", 9000, "n1", "Succeeded")))
    log.append(*cycle(3))
    check(log, Position(Step.ADVANCE, 3, idle=False))
    # A PodGroup status change alone counts as a decision.
    log.append(*advance(10_000))
    log.append(*cycle(4, status(4)))
    check(log, Position(Step.ADVANCE, 4, idle=False))
    # An eviction with its facts (pod deleted and recreated).
    log.append(*advance(11_000))
    (e1,) = log.append(*cycle(5, evict(5, "a")))[1:2]
    check(log, Position(Step.ADVANCE, 5, idle=False, undispatched=(e1,)))
    log.append(
        EvictSucceeded(decision_seq=e1, namespace="ns", name="a"), PodDeleted(namespace="ns", name="a")
    )
    check(log, Position(Step.ADVANCE, 5, idle=False))


def test_an_advance_that_moves_nothing_ends_the_run_after_one_last_cycle() -> None:
    log = Log()
    log.append(*listing())
    log.append(*advance(1000))
    log.append(*cycle(1))
    check(log, Position(Step.ADVANCE, 1, idle=True))
    # The idle advance finds nothing due (it logs nothing); the loop still runs the cycle.
    log.append(*cycle(2))
    check(log, Position(Step.ADVANCE, 2, idle=True, exhausted=True))


def test_facts_after_the_last_cycle_reopen_an_exhausted_run() -> None:
    log = Log()
    log.append(*listing())
    log.append(*advance(1000))
    log.append(*cycle(1))
    (s,) = log.append(*cycle(2, bind(2, "a")))[1:2]
    check(log, Position(Step.ADVANCE, 2, idle=False, exhausted=True, undispatched=(s,)))
    log.append(
        BindSucceeded(decision_seq=s, namespace="ns", name="a", node="n1"), pod("a", 1000, "n1", "Running")
    )
    check(log, Position(Step.ADVANCE, 2, idle=False, exhausted=False))


@pytest.mark.parametrize("facts", [0, 3])
def test_a_restart_after_the_advance_runs_the_cycle_and_keeps_the_advance_facts(facts: int) -> None:
    log = Log()
    log.append(*listing())
    log.append(*advance(1000))
    log.append(*cycle(1))
    log.append(*advance(5000, *[pod(f"p{i}", 5000) for i in range(facts)]))
    check(log, Position(Step.CYCLE, 1))
    log.append(*cycle(2))
    check(log, Position(Step.ADVANCE, 2, idle=facts == 0))
