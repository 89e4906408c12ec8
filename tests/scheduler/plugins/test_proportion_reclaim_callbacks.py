"""proportion's reclaim side: Reclaimable, Preemptive (one task or a list), Overused, and the
accounting that evictions, pipelines and discards leave in its queue figures."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import (
    add_tasks,
    mk_conf,
    mk_job,
    mk_node,
    mk_queue,
    mk_snapshot,
    mk_task,
    open_session,
    task_of,
)

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.framework.statement import Statement
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

S = TaskStatus
PROP = mk_conf("reclaim", ["proportion"])


def session(a_tasks: int = 4, c_tasks: int = 0, node_cpu: str = "4", **queue_kw: Any) -> Session:
    """Queue a runs `a_tasks` x 1 cpu, queue c `c_tasks` x 1 cpu, queue b has one pending 1-cpu task."""
    jobs = []
    a = mk_job("ajob", "a", phase="Running")
    add_tasks(a, a_tasks, "1", None, status=S.RUNNING, node="n1")
    jobs.append(a)
    if c_tasks:
        c = mk_job("cjob", "c", phase="Running")
        add_tasks(c, c_tasks, "1", None, status=S.RUNNING, node="n1")
        jobs.append(c)
    b = mk_job("bjob", "b", phase="Inqueue")
    mk_task(b, "bjob-0", "1", None)
    jobs.append(b)
    queues = [mk_queue("a"), mk_queue("b", **queue_kw), mk_queue("c")]
    return open_session(mk_snapshot([mk_node("n1", node_cpu, "8Gi")], jobs, queues), PROP)


def fn(ssn: Session, point: str) -> Any:
    return dict(ssn.callbacks(point))["proportion"]


def tasks(ssn: Session, job: str) -> list[TaskInfo]:
    return sorted(ssn.jobs[f"default/{job}"].tasks.values(), key=lambda t: t.uid)


def attrs(ssn: Session) -> Any:
    return ssn.plugins["proportion"].attrs  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- Reclaimable
def test_reclaimable_takes_victims_while_the_queue_is_over_deserved() -> None:
    ssn = session()
    assert attrs(ssn)["a"].deserved.cpu == 3000  # b asks 1 cpu, a gets the rest of 4
    reclaimer = task_of(ssn, "default/bjob", "bjob-0")
    victims, vote = fn(ssn, cb.RECLAIMABLE)(reclaimer, tasks(ssn, "ajob"))
    assert vote == cb.PERMIT
    # allocated 4 > 3: ajob-0 is a victim, then 3 <= 3: nobody else.
    assert [v.name for v in victims] == ["ajob-0"]


def test_reclaimable_walks_the_candidates_in_the_given_order() -> None:
    ssn = session()
    reclaimer = task_of(ssn, "default/bjob", "bjob-0")
    victims, _ = fn(ssn, cb.RECLAIMABLE)(reclaimer, list(reversed(tasks(ssn, "ajob"))))
    assert [v.name for v in victims] == ["ajob-3"]


def test_reclaimable_keeps_a_running_allocation_per_queue() -> None:
    # 6 cpu: every queue's request fits, so each deserves what it asks.
    ssn = session(a_tasks=3, c_tasks=2, node_cpu="6")
    reclaimer = task_of(ssn, "default/bjob", "bjob-0")
    candidates = [*tasks(ssn, "cjob"), *tasks(ssn, "ajob")]
    victims, _ = fn(ssn, cb.RECLAIMABLE)(reclaimer, candidates)
    deserved = {q: attrs(ssn)[q].deserved.cpu for q in ("a", "b", "c")}
    assert deserved == {"a": 3000, "b": 1000, "c": 2000}
    assert victims == []  # nobody is above deserved on 6 cpu

    ssn = session(a_tasks=3, c_tasks=3, node_cpu="6")
    reclaimer = task_of(ssn, "default/bjob", "bjob-0")
    candidates = [*tasks(ssn, "cjob"), *tasks(ssn, "ajob")]
    victims, _ = fn(ssn, cb.RECLAIMABLE)(reclaimer, candidates)
    # deserved a = c = 2.5 cpu; each runs 3: one victim from each queue, counted separately.
    assert [v.name for v in victims] == ["cjob-0", "ajob-0"]


def test_reclaimable_skips_tasks_of_jobs_outside_the_session() -> None:
    ssn = session()
    reclaimer = task_of(ssn, "default/bjob", "bjob-0")
    ghost = tasks(ssn, "ajob")[0].clone()
    ghost.job = "default/gone"
    victims, vote = fn(ssn, cb.RECLAIMABLE)(reclaimer, [ghost, *tasks(ssn, "ajob")])
    assert vote == cb.PERMIT
    assert [v.name for v in victims] == ["ajob-0"]


def test_reclaimable_is_gated_by_enable_reclaimable() -> None:
    conf = mk_conf("reclaim", [{"name": "proportion", "enableReclaimable": False}])
    ssn = open_session(two_queue_snapshot(), conf)
    assert dict(ssn.callbacks(cb.RECLAIMABLE)) == {}
    reclaimer = task_of(ssn, "default/bjob", "bjob-0")
    assert ssn.reclaimable(reclaimer, tasks(ssn, "ajob")) == []


def two_queue_snapshot() -> Any:
    a = mk_job("ajob", "a", phase="Running")
    add_tasks(a, 4, "1", None, status=S.RUNNING, node="n1")
    b = mk_job("bjob", "b", phase="Inqueue")
    mk_task(b, "bjob-0", "1", None)
    return mk_snapshot([mk_node("n1", "4", "8Gi")], [a, b], [mk_queue("a"), mk_queue("b")])


# --------------------------------------------------------------------------- Preemptive
def test_preemptive_one_task_within_deserved() -> None:
    ssn = session()
    b = ssn.queues["b"]
    assert fn(ssn, cb.PREEMPTIVE)(b, task_of(ssn, "default/bjob", "bjob-0")) is True


def test_preemptive_a_list_sums_the_requests() -> None:
    ssn = session()
    b = ssn.queues["b"]
    t = task_of(ssn, "default/bjob", "bjob-0")
    extra = t.clone()
    extra.uid = "extra"
    # b deserves 1 cpu (its request): one task fits, two together do not.
    assert fn(ssn, cb.PREEMPTIVE)(b, [t]) is True
    assert fn(ssn, cb.PREEMPTIVE)(b, [t, extra]) is False
    assert ssn.preemptive(b, [t, extra]) is False
    assert ssn.preemptive(b, []) is True


def test_preemptive_refuses_a_queue_that_is_not_open() -> None:
    ssn = session(state="Closed")
    assert fn(ssn, cb.PREEMPTIVE)(ssn.queues["b"], task_of(ssn, "default/bjob", "bjob-0")) is False


def test_preemptive_checks_only_the_requested_dimensions() -> None:
    # b's job asks cpu only; memory beyond deserved does not matter.
    ssn = session()
    attr = attrs(ssn)["b"]
    attr.allocated.memory = attr.deserved.memory + 10**9
    assert fn(ssn, cb.PREEMPTIVE)(ssn.queues["b"], task_of(ssn, "default/bjob", "bjob-0")) is True
    attr.allocated.cpu = attr.deserved.cpu
    assert fn(ssn, cb.PREEMPTIVE)(ssn.queues["b"], task_of(ssn, "default/bjob", "bjob-0")) is False


# --------------------------------------------------------------------------- Overused and accounting
def test_overused_once_allocated_reaches_deserved() -> None:
    ssn = session()
    assert ssn.overused(ssn.queues["a"]) is True
    assert ssn.overused(ssn.queues["b"]) is False


def test_evict_pipeline_and_discard_keep_the_figures_balanced() -> None:
    ssn = session()
    victim = tasks(ssn, "ajob")[0]
    reclaimer = task_of(ssn, "default/bjob", "bjob-0")
    a, b = attrs(ssn)["a"], attrs(ssn)["b"]
    stmt = Statement(ssn)
    stmt.evict(victim, "test")
    stmt.pipeline(reclaimer, "n1", True)
    assert (a.allocated.cpu, b.allocated.cpu) == (3000, 1000)
    # Overused compares every dimension, `pods` included: a now holds 3 pods of a deserved 4.
    assert ssn.overused(ssn.queues["a"]) is False
    assert ssn.overused(ssn.queues["b"]) is True
    stmt.discard()
    assert (a.allocated.cpu, b.allocated.cpu) == (4000, 0)
    assert victim.status is S.RUNNING and reclaimer.status is S.PENDING
