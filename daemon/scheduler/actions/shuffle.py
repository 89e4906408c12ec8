"""The shuffle action (actions/shuffle/shuffle.go): evict the Running tasks the VictimTasks plugins pick.

Every Running task of every job in the session is offered to the VictimTasks callbacks
(plugins with `enabledVictim`; within a tier their answers are united, the first tier with a
non-empty answer decides).  Each victim is evicted at once through the session, with no
statement and no gang check; the action has no arguments.  Without a plugin that registers
VictimTasks (tdm, pdb, rescheduling), shuffle evicts nothing.
Volcano walks its victim set in random order; we evict by task uid.
"""

from __future__ import annotations

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

NAME = "shuffle"
VICTIM_FLAG = "victim"  # conf attribute of `enabledVictim`


def running_tasks(ssn: Session) -> list[TaskInfo]:
    """The candidates: every Running task, by job uid then task uid."""
    out: list[TaskInfo] = []
    for uid in sorted(ssn.jobs):
        job = ssn.jobs[uid]
        for tid in sorted(job.tasks):
            t = job.tasks[tid]
            if t.status is TaskStatus.RUNNING:
                out.append(t)
    return out


def victims_with_deciders(ssn: Session, tasks: list[TaskInfo]) -> list[tuple[TaskInfo, list[str]]]:
    """ssn.VictimTasks, remembering which plugins named each victim.

    Tiers in order; in a tier every enabled VictimTasks callback is asked and the answers are
    united; the first tier with a victim decides.  Victims come back by task uid.
    """
    registered = ssn.fns.get(cb.VICTIM_TASKS, {})
    for tier in ssn.tiers:
        chosen: dict[str, TaskInfo] = {}
        deciders: dict[str, list[str]] = {}
        for opt in tier.plugins:
            fn = registered.get(opt.name)
            if fn is None or not opt.enabled(VICTIM_FLAG):
                continue
            for v in fn(tasks):
                chosen.setdefault(v.uid, v)
                names = deciders.setdefault(v.uid, [])
                if opt.name not in names:
                    names.append(opt.name)
        if chosen:
            return [(chosen[uid], deciders[uid]) for uid in sorted(chosen)]
    return []


def shuffle_reason(deciders: list[str]) -> str:
    """The eviction cause recorded for a shuffle victim."""
    return "victim chosen by " + ", ".join(deciders)


class Shuffle:
    name = NAME

    def execute(self, ssn: Session) -> None:
        for victim, deciders in victims_with_deciders(ssn, running_tasks(ssn)):
            job = ssn.jobs.get(victim.job)
            if job is None:
                continue
            ssn.evict(job.tasks.get(victim.uid, victim), shuffle_reason(deciders))


def new() -> Shuffle:
    return Shuffle()
