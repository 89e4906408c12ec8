"""Where the simulator lockstep stands in the log, and which step the loop takes next.

With the simulator the daemon lists the cluster once, then repeats: advance the clock (the facts
due on the way and `clock.advanced`, one batch) → run a cycle (one batch) → dispatch its binds
and evictions (outcomes and the facts they bring, one or more batches) → advance …  A crash can
only cut the log between two batches.  `LockstepTracker` folds the log's events and tells, at
any batch boundary, the next step and its input (`Position`).  The live loop asks the same
tracker after every step, so an uninterrupted run and a restarted one follow one rule: a restart
takes the lockstep up exactly where the log stops, never repeating or skipping a step.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from fumarole.store.events import (
    EVENT_TYPES,
    OBSERVED,
    OUTCOMES,
    BindDecided,
    BindFailed,
    BindSucceeded,
    ClockAdvanced,
    CycleOpened,
    Event,
    EvictDecided,
    EvictFailed,
    EvictSucceeded,
    PodGroupStatusChanged,
    ResyncCompleted,
    ResyncStarted,
)
from fumarole.store.events.base import EventBase

__all__ = ["TRACKED_TYPES", "LockstepTracker", "Position", "Step", "next_idle"]


class Step(enum.Enum):
    """The next step of the lockstep."""

    LIST = "list"
    """Nothing listed yet: append the source's initial listing."""
    ADVANCE = "advance"
    """The last cycle is in the log: forward its decisions still without outcome, then advance the clock."""
    CYCLE = "cycle"
    """The clock advance is in the log and its cycle is not: run the cycle."""


@dataclass(frozen=True, slots=True)
class Position:
    step: Step
    cycle: int = 0
    """The last cycle in the log (0: none yet)."""
    idle: bool = False
    """For ADVANCE: the `idle` argument of the advance (see `next_idle`)."""
    exhausted: bool = False
    """For ADVANCE: the last advance found nothing left to happen (it moved no clock) and nothing
    changed since; the loop stops here (the simulator is drained)."""
    undispatched: tuple[int, ...] = ()
    """The seqs of the last cycle's binds and evictions that have no outcome yet."""


def next_idle(cycle_decided: bool, advance_facts: int) -> bool:
    """Whether the advance after a cycle is idle (jumps to the next submission or completion).

    Idle when the cycle decided nothing (no bind, eviction or PodGroup status change) and the
    advance it followed brought no fact: the cluster will not change before the next due event.
    """
    return not cycle_decided and advance_facts == 0


_FACTS = tuple(c for c in OBSERVED if c not in (ClockAdvanced, ResyncStarted, ResyncCompleted))


_TAGS: dict[type[EventBase], str] = {cls: tag for tag, cls in EVENT_TYPES.items()}
_TRACKED: tuple[type[EventBase], ...] = (
    *OBSERVED,
    *OUTCOMES,
    CycleOpened,
    BindDecided,
    EvictDecided,
    PodGroupStatusChanged,
)
TRACKED_TYPES: tuple[str, ...] = tuple(_TAGS[c] for c in _TRACKED)
"""The event types `LockstepTracker.fold` looks at (a restart reads only these from the log)."""


@dataclass(slots=True)
class LockstepTracker:
    """Folds log events (in seq order) into the lockstep's position; `position()` says what is next."""

    listed: bool = False
    cycle: int = 0
    clock_pending: bool = False
    """A clock advance is in the log after the last cycle (its cycle is not)."""
    advance_facts: int = 0
    """The facts of that pending advance."""
    cycle_followed_clock: bool = False
    """Whether the last cycle followed a clock advance (it did not when the advance moved nothing)."""
    cycle_advance_facts: int = 0
    """The facts of the advance the last cycle followed."""
    cycle_decided: bool = False
    facts_since_cycle: bool = False
    """A fact (not a clock move) was logged after the last cycle opened (its decisions' effects)."""
    undispatched: set[int] = field(default_factory=set)

    def fold(self, seq: int, ev: Event) -> None:
        if isinstance(ev, ResyncCompleted):
            self.listed = True
        elif isinstance(ev, ClockAdvanced):
            self.listed = True
            self.clock_pending = True
            self.advance_facts = ev.facts
        elif isinstance(ev, CycleOpened):
            self.listed = True
            self.cycle = ev.cycle
            self.cycle_followed_clock = self.clock_pending
            self.cycle_advance_facts = self.advance_facts if self.clock_pending else 0
            self.clock_pending = False
            self.advance_facts = 0
            self.cycle_decided = False
            self.facts_since_cycle = False
            self.undispatched.clear()
        elif isinstance(ev, BindDecided | EvictDecided):
            self.cycle_decided = True
            self.undispatched.add(seq)
        elif isinstance(ev, PodGroupStatusChanged):
            self.cycle_decided = True
        elif isinstance(ev, BindSucceeded | BindFailed | EvictSucceeded | EvictFailed):
            self.undispatched.discard(ev.decision_seq)
        elif isinstance(ev, _FACTS) and self.cycle:
            self.facts_since_cycle = True

    def position(self) -> Position:
        if not self.listed:
            return Position(Step.LIST)
        if self.clock_pending:
            return Position(Step.CYCLE, self.cycle)
        if not self.cycle:
            return Position(Step.ADVANCE)
        return Position(
            Step.ADVANCE,
            self.cycle,
            idle=next_idle(self.cycle_decided, self.cycle_advance_facts),
            exhausted=not self.cycle_followed_clock and not self.facts_since_cycle,
            undispatched=tuple(sorted(self.undispatched)),
        )
