"""A synchronous, log-less stand-in for the runtime: drive a Simulator with the real scheduling core.

Each step is what the daemon does per schedule period, minus the database: build a
snapshot of the simulator's objects (`daemon.manifests.build_snapshot`) with the PodGroup
statuses the previous sessions wrote, run one session (`run_session`), record its binds
and evictions as decision events, hand each to the simulator's sink, then advance the
virtual clock (idle when the cycle changed nothing).  Everything that would be appended
to the log is kept in `Driver.log`, in log order, so tests can cut it anywhere and
`Simulator.resume` from it.  Used by the tests and as the reference loop for the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from daemon.adapters.simulator.engine import Simulator
from daemon.manifests import build_snapshot
from daemon.scheduler.framework.conf import SchedulerConf
from daemon.scheduler.framework.run import PodGroupOutcome, SessionResult, run_session
from daemon.scheduler.model.snapshot import ClusterSnapshot
from daemon.scheduler.model.task import TaskInfo
from store.events import BindDecided, BindSucceeded, EvictDecided
from store.events.base import EventBase

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
        self.summary = DriveSummary()
        self.statuses: dict[str, PodGroupOutcome] = {}
        self.started = False
        self.answered: set[int] = set()

    def start(self) -> None:
        self.log.extend(self.sim.initial_events_sync())
        self.started = True

    def snapshot(self) -> ClusterSnapshot:
        """The cluster now, with the PodGroup statuses the sessions wrote (as the daemon's cache holds it)."""
        snap = build_snapshot(self.sim.objects())
        for uid, job in snap.jobs.items():
            st = self.statuses.get(uid)
            if st is None or job.status.phase == "Completed":
                continue
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
        for uid in result.changed_podgroups:
            self.statuses[uid] = result.podgroups[uid]
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
            seqs.append(len(self.log))
            self.log.append(d)
        for seq, d in zip(seqs, decisions, strict=True):
            changed |= self.forward(seq, d)
        self.log.extend(self.sim.advance(idle=not changed))
        return result

    def forward(self, seq: int, decision: BindDecided | EvictDecided) -> bool:
        """Hand one logged decision to the simulator; log its outcome and facts. True if facts came back."""
        outcome, facts = self.sim.apply_sync(seq, decision)
        if seq not in self.answered:
            self.answered.add(seq)
            self.log.append(outcome)
            self.log.extend(facts)
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
