"""A synchronous, in-memory stand-in for the runtime: drive a Simulator with the real scheduling core.

Each step is what the daemon does per schedule period, minus the database: build a
snapshot of the simulator's objects (`daemon.manifests.build_snapshot`) with the PodGroup
statuses the previous sessions wrote, run one session (`run_session`), append the cycle
(CycleOpened, evictions, binds, PodGroupStatusChanged, CycleClosed) as one batch, hand
each decision to the simulator's sink (appending outcome + facts as one batch), then
advance the virtual clock (idle when the cycle changed nothing).  `Driver.log` holds
every event a daemon would append, in log order, and `Driver.batches` where each batch
ends, so tests can cut the log at any batch boundary and `Driver.restore` from it: that
is the restart procedure the runtime follows (resume the adapter from the log, relist,
re-forward the decisions without outcome, finish the interrupted cycle's clock advance).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from daemon.adapters.simulator.engine import Simulator
from daemon.manifests import build_snapshot
from daemon.scheduler.framework.conf import SchedulerConf
from daemon.scheduler.framework.run import PodGroupOutcome, SessionResult, run_session
from daemon.scheduler.model.job import Condition
from daemon.scheduler.model.snapshot import ClusterSnapshot
from daemon.scheduler.model.task import TaskInfo
from store.events import (
    BindDecided,
    BindFailed,
    BindSucceeded,
    ClockAdvanced,
    CycleClosed,
    CycleOpened,
    EvictDecided,
    EvictFailed,
    EvictSucceeded,
    PodDeleted,
    PodGroupConditionRecord,
    PodGroupStatusChanged,
    PodUpserted,
)
from store.events.base import EventBase

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
    """Runs `Simulator` + `run_session` in lockstep; `log` holds every event a daemon would append."""

    def __init__(self, sim: Simulator, conf: SchedulerConf) -> None:
        self.sim = sim
        self.conf = conf
        self.log: list[EventBase] = []
        self.batches: list[int] = []
        """Log positions where each appended batch ends (valid cut points)."""
        self.summary = DriveSummary()
        self.statuses: dict[str, PodGroupOutcome] = {}
        self.started = False
        self.answered: set[int] = set()

    def _append(self, batch: list[EventBase]) -> None:
        if batch:
            self.log.extend(batch)
            self.batches.append(len(self.log))

    def start(self) -> None:
        self._append(list(self.sim.initial_events_sync()))
        self.started = True

    @classmethod
    def restore(cls, sim: Simulator, conf: SchedulerConf, log: list[EventBase]) -> Driver:
        """A driver restarted on a log cut at a batch boundary, with `sim` a fresh simulator.

        Resumes the simulator from the log's observed and outcome events, rebuilds the
        PodGroup statuses and the cycle count, appends a relisting, forwards the decisions
        that have no outcome yet and, if the last cycle's clock advance is missing, does it.
        """
        d = cls(sim, conf)
        d.log = list(log)
        d.batches = [len(log)] if log else []
        sim.resume([e for e in log if not isinstance(e, _DECISIONS)])
        d.started = True
        last_cycle_at = -1
        changed = False
        for i, e in enumerate(log):
            if isinstance(e, CycleOpened):
                d.summary.cycles = e.cycle
                last_cycle_at = i
                changed = False
            elif isinstance(e, PodGroupStatusChanged):
                d.statuses[f"{e.namespace}/{e.name}"] = _outcome(e)
                changed = True
            elif isinstance(e, PodUpserted | PodDeleted) and last_cycle_at >= 0:
                changed = True  # a fact the last cycle's decisions brought back
            elif isinstance(e, _OUTCOMES):
                d.answered.add(e.decision_seq)
        d._append(list(sim.initial_events_sync()))
        pending = [
            (i, e)
            for i, e in enumerate(log)
            if isinstance(e, BindDecided | EvictDecided) and i not in d.answered
        ]
        for seq, dec in pending:
            changed |= d.forward(seq, dec)
        advanced = any(isinstance(e, ClockAdvanced) for e in log[last_cycle_at + 1 :])
        if last_cycle_at >= 0 and not advanced:
            d._append(list(sim.advance(idle=not changed)))
        return d

    def snapshot(self) -> ClusterSnapshot:
        """The cluster now, with the PodGroup statuses the sessions wrote (as the daemon's cache holds it)."""
        snap = build_snapshot(self.sim.objects())
        for uid, job in snap.jobs.items():
            st = self.statuses.get(uid)
            if st is None:
                continue
            # The simulator's Completed (a fact) wins over an older phase; the conditions and
            # counts the scheduler wrote are kept either way, or the session would find the
            # status changed every cycle and the run would never be idle.
            if job.status.phase != "Completed":
                job.status.phase = st.phase
            job.status.conditions = list(st.conditions)
            job.status.running = st.running
            job.status.succeeded = st.succeeded
            job.status.failed = st.failed
        snap.now = self.sim.now_ms / 1000
        snap.session_id = f"cycle-{self.summary.cycles + 1}"
        return snap

    def step(self) -> SessionResult:
        """One cycle: session, decisions applied (evictions, then binds in bind order), clock advanced."""
        if not self.started:
            self.start()
        snap = self.snapshot()
        tasks: dict[str, TaskInfo] = {t.key: t for j in snap.jobs.values() for t in j.tasks.values()}
        result = run_session(snap, self.conf, explain=False)
        self.summary.cycles += 1
        cycle = self.summary.cycles
        changed = bool(result.changed_podgroups)
        batch: list[EventBase] = [
            CycleOpened(
                cycle=cycle, watermark=len(self.log) - 1, now_ms=self.sim.now_ms, conf_hash=self.conf.digest
            )
        ]
        decisions: list[BindDecided | EvictDecided] = []
        for ev in result.evictions:
            t = tasks[ev.task]
            job = snap.jobs[t.job]
            decisions.append(
                EvictDecided(
                    cycle=cycle,
                    namespace=t.namespace,
                    name=t.name,
                    uid=t.uid,
                    node=ev.node,
                    job=t.job,
                    queue=job.queue,
                    action=ev.action,
                    reason=ev.reason,
                )
            )
            self.summary.evictions[ev.action] = self.summary.evictions.get(ev.action, 0) + 1
        for key in result.bind_order:
            if key not in result.binds:
                continue
            t = tasks[key]
            decisions.append(
                BindDecided(
                    cycle=cycle,
                    namespace=t.namespace,
                    name=t.name,
                    uid=t.uid,
                    node=result.binds[key],
                    job=t.job,
                    queue=snap.jobs[t.job].queue,
                )
            )
        seqs = []
        for d in decisions:
            seqs.append(len(self.log) + len(batch))
            batch.append(d)
        for uid in result.changed_podgroups:
            pg = result.podgroups[uid]
            self.statuses[uid] = pg
            ns, name = uid.split("/", 1)
            batch.append(_status_event(cycle, ns, name, pg))
        batch.append(CycleClosed(cycle=cycle, binds=len(result.binds), evictions=len(result.evictions)))
        self._append(batch)
        for seq, d in zip(seqs, decisions, strict=True):
            changed |= self.forward(seq, d)
        self._append(list(self.sim.advance(idle=not changed)))
        return result

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


_DECISIONS = (CycleOpened, CycleClosed, BindDecided, EvictDecided, PodGroupStatusChanged)


def _status_event(cycle: int, ns: str, name: str, pg: PodGroupOutcome) -> PodGroupStatusChanged:
    return PodGroupStatusChanged(
        cycle=cycle,
        namespace=ns,
        name=name,
        phase=pg.phase,
        running=pg.running,
        succeeded=pg.succeeded,
        failed=pg.failed,
        conditions=tuple(
            PodGroupConditionRecord(
                type_=c.type,
                status=c.status,
                reason=c.reason,
                message=c.message,
                transition_id=c.transition_id,
            )
            for c in pg.conditions
        ),
    )


def _outcome(e: PodGroupStatusChanged) -> PodGroupOutcome:
    return PodGroupOutcome(
        phase=e.phase,
        conditions=[Condition(c.type_, c.status, c.reason, c.message, c.transition_id) for c in e.conditions],
        running=e.running,
        succeeded=e.succeeded,
        failed=e.failed,
    )
