"""A synchronous, in-memory stand-in for the runtime: drive a Simulator with the daemon's own cycle.

Each step is what the daemon does per schedule period, minus the database: freeze the
projection (`fumarole.daemon.cache.Projection`, folded from every event appended so far), run
`fumarole.daemon.runtime.cycle.decide` (the same function the session loop and replay call), append
its events as one batch, hand each bind and eviction to the simulator's sink in log order
(appending outcome + facts as one batch), then advance the virtual clock (idle when the cycle
changed nothing).  `Driver.log` holds every event a daemon would append, in log order
(sequence = position + 1), and `Driver.batches` where each batch ends, so tests can cut the
log at any batch boundary and `Driver.restore` from it: that is the restart procedure the
runtime follows (resume the adapter from the log, relist, re-forward the decisions without
outcome, finish the interrupted cycle's clock advance).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from fumarole.daemon.adapters.simulator.engine import Simulator
from fumarole.daemon.cache import Projection
from fumarole.daemon.runtime.cycle import CycleDecisions, decide
from fumarole.daemon.scheduler.framework.callout import CalloutPort, RecordingPort
from fumarole.daemon.scheduler.framework.conf import SchedulerConf
from fumarole.store.events import (
    DECISIONS,
    BindDecided,
    BindFailed,
    BindSucceeded,
    ClockAdvanced,
    CycleOpened,
    EvictDecided,
    EvictFailed,
    EvictSucceeded,
    PodDeleted,
    PodGroupStatusChanged,
    PodUpserted,
)
from fumarole.store.events.base import EventBase

_OUTCOMES = (BindSucceeded, BindFailed, EvictSucceeded, EvictFailed)

__all__ = ["DriveSummary", "Driver"]


@dataclass(slots=True)
class DriveSummary:
    cycles: int = 0
    binds: int = 0
    evictions: dict[str, int] = field(default_factory=dict)
    """Evictions decided, per action (reclaim, preempt, ...)."""
    bind_failures: int = 0


class Driver:
    """Runs `Simulator` + the daemon's cycle in lockstep; `log` holds every event a daemon would append."""

    def __init__(self, sim: Simulator, conf: SchedulerConf, *, callouts: CalloutPort | None = None) -> None:
        self.sim = sim
        # The port sessions call out through (the extender plugin), recorded per cycle as the
        # daemon records it; None: a session that calls out fails.
        self.callouts = callouts
        self.conf = conf
        self.conf_hash = hashlib.sha256(conf.text.encode()).hexdigest()
        self.projection = Projection()
        self.log: list[EventBase] = []
        self.batches: list[int] = []
        """Log positions where each appended batch ends (valid cut points)."""
        self.summary = DriveSummary()
        self.started = False
        self.answered: set[int] = set()

    def _append(self, batch: list[EventBase]) -> None:
        for ev in batch:
            self.log.append(ev)
            self.projection.fold(len(self.log), ev)
        if batch:
            self.batches.append(len(self.log))

    def start(self) -> None:
        self._append(list(self.sim.initial_events_sync()))
        self.started = True

    @classmethod
    def restore(cls, sim: Simulator, conf: SchedulerConf, log: list[EventBase]) -> Driver:
        """A driver restarted on a log cut at a batch boundary, with `sim` a fresh simulator.

        Folds the log into the projection, resumes the simulator from the log's observed and
        outcome events, appends a relisting, forwards the decisions that have no outcome yet
        and, if the last cycle's clock advance is missing, does it.
        """
        d = cls(sim, conf)
        d._append(list(log))
        d.batches = [len(log)] if log else []
        sim.resume([e for e in log if not isinstance(e, DECISIONS)])
        d.started = True
        d.summary.cycles = d.projection.last_cycle
        last_cycle_at = -1
        changed = False
        for i, e in enumerate(log):
            if isinstance(e, CycleOpened):
                last_cycle_at = i
                changed = False
            elif isinstance(e, PodGroupStatusChanged):
                changed = True
            elif isinstance(e, PodUpserted | PodDeleted) and last_cycle_at >= 0:
                changed = True  # a fact the last cycle's decisions brought back
            elif isinstance(e, _OUTCOMES):
                d.answered.add(e.decision_seq)
        d._append(list(sim.initial_events_sync()))
        pending = [
            (i + 1, e)
            for i, e in enumerate(log)
            if isinstance(e, BindDecided | EvictDecided) and i + 1 not in d.answered
        ]
        for seq, dec in pending:
            changed |= d.forward(seq, dec)
        advanced = any(isinstance(e, ClockAdvanced) for e in log[last_cycle_at + 1 :])
        if last_cycle_at >= 0 and not advanced:
            d._append(list(sim.advance(idle=not changed)))
        return d

    def step(self) -> CycleDecisions:
        """One cycle: decide, forward the binds and evictions in log order, advance the clock."""
        if not self.started:
            self.start()
        p = self.projection
        cycle = self.summary.cycles + 1
        out = decide(
            p.freeze(cycle=cycle),
            self.conf,
            cycle=cycle,
            watermark=p.seq,
            conf_hash=self.conf_hash,
            previous=p.explanations(),
            previous_queues=p.queue_figures_in_force(),
            callouts=RecordingPort(self.callouts) if self.callouts is not None else None,
        )
        self.summary.cycles = cycle
        first = len(self.log) + 1
        self._append(list(out.events))
        changed = bool(out.result.changed_podgroups)
        for offset, ev in enumerate(out.events):
            if isinstance(ev, EvictDecided):
                self.summary.evictions[ev.action] = self.summary.evictions.get(ev.action, 0) + 1
            if isinstance(ev, BindDecided | EvictDecided):
                changed |= self.forward(first + offset, ev)
        self._append(list(self.sim.advance(idle=not changed)))
        return out

    def forward(self, seq: int, decision: BindDecided | EvictDecided) -> bool:
        """Hand one logged decision to the simulator; log its outcome and facts. True if facts came back."""
        outcome, facts = self.sim.apply_sync(seq, decision)
        if seq not in self.answered:
            self.answered.add(seq)
            self._append([outcome, *facts])
            if isinstance(decision, BindDecided):
                if isinstance(outcome, BindSucceeded):
                    self.summary.binds += 1
                else:
                    self.summary.bind_failures += 1
        return bool(facts)

    def run(self, *, max_cycles: int = 100_000) -> DriveSummary:
        """Step until the simulator is drained (or `max_cycles`, then RuntimeError)."""
        if not self.started:
            self.start()
        while not self.sim.drained():
            if self.summary.cycles >= max_cycles:
                raise RuntimeError(f"simulation did not drain within {max_cycles} cycles")
            self.step()
        return self.summary
