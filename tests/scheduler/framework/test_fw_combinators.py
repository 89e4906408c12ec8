"""How the session combines plugin callbacks across tiers (framework/session_plugins.go rules)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_queue, mk_snapshot, mk_task

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.combinators import compare_task_default
from fumarole.daemon.scheduler.framework.plugin import ValidateResult
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.task import TaskInfo

PERMIT, ABSTAIN, REJECT = cb.PERMIT, cb.ABSTAIN, cb.REJECT


def session(*tiers: list[Any]) -> Session:
    """A session over a tiny cluster whose conf lists the (fake) plugin names given."""
    j = mk_job("j")
    mk_task(j, "j-0")
    snap = mk_snapshot([mk_node("n1")], [j])
    return Session(snap, mk_conf("allocate", *tiers))


def reg(ssn: Session, point: str, **fns: Any) -> Session:
    for name, fn in fns.items():
        ssn.register(point, name, fn)
    return ssn


def const(value: Any) -> Any:
    """A callback of any arity that always answers `value`."""
    return lambda *args: value


def tasks(*names: str) -> list[TaskInfo]:
    return [mk_task("default/v", n, add=False) for n in names]


def names(ts: list[TaskInfo]) -> list[str]:
    return [t.name for t in ts]


# --------------------------------------------------------------------------- orders
def test_job_order_first_non_zero_wins_then_creation_then_uid() -> None:
    ssn = session(["a", "b"], ["c"])
    reg(ssn, cb.JOB_ORDER, a=lambda l, r: 0, b=lambda l, r: 1, c=lambda l, r: -1)
    ssn.compile_chains()
    x, y = mk_job("x"), mk_job("y")
    assert ssn.job_order_fn(x, y) is False  # b said l after r; c never asked
    assert ssn.job_order_compare(x, y) == 1

    ssn = session(["a"])
    reg(ssn, cb.JOB_ORDER, a=lambda l, r: 0)
    ssn.compile_chains()
    old, new = mk_job("z", creation=1.0), mk_job("a", creation=2.0)
    assert ssn.job_order_fn(old, new) and not ssn.job_order_fn(new, old)
    same1, same2 = mk_job("a", creation=5.0), mk_job("b", creation=5.0)
    assert ssn.job_order_fn(same1, same2) and not ssn.job_order_fn(same2, same1)
    assert ssn.job_order_compare(same1, same2) == 0


def test_disabled_flag_skips_the_plugin() -> None:
    ssn = session([{"name": "a", "enableJobOrder": False}, "b"])
    reg(ssn, cb.JOB_ORDER, a=lambda l, r: -1, b=lambda l, r: 1)
    ssn.compile_chains()
    assert ssn.job_order_fn(mk_job("x"), mk_job("y")) is False


def test_unlisted_plugin_is_never_called() -> None:
    ssn = session(["a"])
    reg(ssn, cb.JOB_ORDER, ghost=lambda l, r: -1)
    ssn.compile_chains()
    assert ssn.job_order_fn(mk_job("y"), mk_job("x")) is False  # uid fallback: x before y


def test_queue_order_fallback_creation_then_name() -> None:
    ssn = session(["a"])
    ssn.compile_chains()
    qa, qb = mk_queue("qa", creation=2.0), mk_queue("qb", creation=1.0)
    assert ssn.queue_order_fn(qb, qa) and not ssn.queue_order_fn(qa, qb)
    q1, q2 = mk_queue("q1"), mk_queue("q2")
    assert ssn.queue_order_fn(q1, q2) and not ssn.queue_order_fn(q2, q1)
    reg(ssn, cb.QUEUE_ORDER, a=lambda l, r: 1 if l.name == "q1" else -1)
    ssn.compile_chains()
    assert ssn.queue_order_fn(q2, q1) and not ssn.queue_order_fn(q1, q2)


def test_victim_queue_order_defaults_to_reverse_queue_order() -> None:
    ssn = session(["a"])
    ssn.compile_chains()
    q1, q2 = mk_queue("q1"), mk_queue("q2")
    assert ssn.victim_queue_order_fn(q2, q1, None) is True
    assert ssn.victim_queue_order_fn(q1, q2, None) is False
    # a registered victim-queue order has no flag and decides first
    ssn = session([{"name": "a", "enableQueueOrder": False}])
    reg(ssn, cb.VICTIM_QUEUE_ORDER, a=lambda l, r, p: -1 if l.name == "q1" else 1)
    ssn.compile_chains()
    assert ssn.victim_queue_order_fn(q1, q2, None) is True


def t(name: str, creation: float = 0.0, uid: str | None = None) -> TaskInfo:
    task = mk_task("default/j", name, creation=creation, add=False)
    if uid is not None:
        task.uid = uid
    return task


@pytest.mark.parametrize(
    ("l", "r", "expected"),
    [
        (t("job-a-9"), t("job-a-10"), True),  # numeric index: 9 before 10 (not string order)
        (t("job-a-10"), t("job-a-9"), False),
        (t("job-a-2", creation=5), t("job-b-3", creation=1), True),  # index beats creation
        (t("ab-2", creation=5), t("ab-1", creation=1), False),  # two parts: no index, creation decides
        (t("a-b-x", creation=1), t("a-b-1", creation=2), True),  # non-numeric: creation
        (t("a-b-1", creation=3, uid="u2"), t("c-d-1", creation=1, uid="u1"), False),  # equal index: creation
        (t("p-q-1", uid="u1"), t("r-s-1", uid="u2"), True),  # equal index and creation: uid
        (t("p-q-1", uid="u2"), t("r-s-1", uid="u1"), False),
        (t("x-y-+2"), t("x-y-10"), True),  # Atoi accepts a sign
    ],
)
def test_compare_task_default(l: TaskInfo, r: TaskInfo, expected: bool) -> None:
    assert compare_task_default(l, r) is expected


def test_task_order_plugin_then_default() -> None:
    ssn = session(["a"])
    reg(ssn, cb.TASK_ORDER, a=lambda l, r: r.priority - l.priority)
    ssn.compile_chains()
    hi, lo = t("j-x-5"), t("j-x-1")
    hi.priority, lo.priority = 10, 1
    assert ssn.task_order_fn(hi, lo) and not ssn.task_order_fn(lo, hi)
    lo.priority = 10
    assert ssn.task_order_fn(lo, hi)  # tie: index 1 before 5


# --------------------------------------------------------------------------- victims
def test_victims_abstain_is_ignored_and_intersection_keeps_running_order() -> None:
    a, b, c, d = tasks("a", "b", "c", "d")
    ssn = session(["p1", "p2", "p3"])
    reg(
        ssn,
        cb.PREEMPTABLE,
        p1=lambda p, cs: ([d, c, b, a], PERMIT),
        p2=lambda p, cs: ([], ABSTAIN),
        p3=lambda p, cs: ([a, b, d], PERMIT),
    )
    ssn.compile_chains()
    assert names(ssn.preemptable(a, [a, b, c, d])) == ["d", "b", "a"]


def test_victims_empty_answer_ends_the_tier_and_next_tier_decides() -> None:
    a, b, c = tasks("a", "b", "c")
    called: list[str] = []

    def p3(p, cs):
        called.append("p3")
        return [a], PERMIT

    ssn = session(["p1", "p2", "p3"], ["p4"])
    reg(
        ssn,
        cb.RECLAIMABLE,
        p1=lambda p, cs: ([a, b], PERMIT),
        p2=lambda p, cs: ([], PERMIT),
        p3=p3,
        p4=lambda p, cs: ([c], PERMIT),
    )
    ssn.compile_chains()
    assert names(ssn.reclaimable(a, [a, b, c])) == ["c"]
    assert called == []  # the rest of tier 1 is skipped


def test_victims_empty_intersection_restarts_from_next_plugin() -> None:
    a, b, c = tasks("a", "b", "c")
    ssn = session(["p1", "p2", "p3"])
    reg(
        ssn,
        cb.PREEMPTABLE,
        p1=lambda p, cs: ([a], PERMIT),
        p2=lambda p, cs: ([b], PERMIT),
        p3=lambda p, cs: ([c, b], PERMIT),
    )
    ssn.compile_chains()
    assert names(ssn.preemptable(a, [a, b, c])) == ["c", "b"]


def test_victims_first_deciding_tier_wins_and_none_decided_is_empty() -> None:
    a, b = tasks("a", "b")
    ssn = session(["p1"], ["p2"])
    reg(ssn, cb.PREEMPTABLE, p1=lambda p, cs: ([a], PERMIT), p2=lambda p, cs: ([b], PERMIT))
    ssn.compile_chains()
    assert names(ssn.preemptable(a, [a, b])) == ["a"]
    ssn = session(["p1"], ["p2"])
    reg(ssn, cb.PREEMPTABLE, p1=lambda p, cs: ([], PERMIT), p2=lambda p, cs: ([a], ABSTAIN))
    ssn.compile_chains()
    assert ssn.preemptable(a, [a, b]) == []
    # no plugin at all
    ssn = session(["p1"])
    ssn.compile_chains()
    assert ssn.reclaimable(a, [a, b]) == []


def test_victim_flags_are_separate() -> None:
    a, b = tasks("a", "b")
    ssn = session([{"name": "p1", "enablePreemptable": False}])
    reg(ssn, cb.PREEMPTABLE, p1=lambda p, cs: ([a], PERMIT))
    reg(ssn, cb.RECLAIMABLE, p1=lambda p, cs: ([b], PERMIT))
    ssn.compile_chains()
    assert ssn.preemptable(a, [a, b]) == []
    assert names(ssn.reclaimable(a, [a, b])) == ["b"]


# --------------------------------------------------------------------------- votes
J = mk_job("vote")


@pytest.mark.parametrize(
    ("tiers", "votes", "expected"),
    [
        ([["a", "b"]], {"a": REJECT, "b": PERMIT}, False),  # any reject
        ([["a", "b"], ["c"]], {"a": PERMIT, "b": ABSTAIN, "c": REJECT}, True),  # permit ends after tier 1
        ([["a"], ["c"]], {"a": ABSTAIN, "c": REJECT}, False),  # abstaining tier passes on
        ([["a", "b"], ["c"]], {"a": ABSTAIN, "b": ABSTAIN, "c": ABSTAIN}, True),  # all abstain
        ([["a", "b"]], {"a": PERMIT, "b": REJECT}, False),  # reject later in the same tier
        ([["a"]], {}, True),  # nobody registered
    ],
)
def test_job_pipelined_and_enqueueable_votes(tiers: list, votes: dict, expected: bool) -> None:
    for point, fn in ((cb.JOB_PIPELINED, "job_pipelined"), (cb.JOB_ENQUEUEABLE, "job_enqueueable")):
        ssn = session(*tiers)
        reg(ssn, point, **{k: const(v) for k, v in votes.items()})
        ssn.compile_chains()
        assert getattr(ssn, fn)(J) is expected, point


def test_enqueueable_is_gated_by_enable_job_enqueued() -> None:
    ssn = session([{"name": "a", "enableJobEnqueued": False}])
    reg(ssn, cb.JOB_ENQUEUEABLE, a=lambda job: REJECT)
    seen: list[str] = []
    reg(ssn, cb.JOB_ENQUEUED, a=lambda job: seen.append(job.uid))
    ssn.compile_chains()
    assert ssn.job_enqueueable(J) is True
    ssn.job_enqueued(J)
    assert seen == []


def test_job_enqueued_notifies_every_enabled_plugin() -> None:
    seen: list[str] = []
    ssn = session(["a"], ["b"])
    reg(ssn, cb.JOB_ENQUEUED, a=lambda job: seen.append("a"), b=lambda job: seen.append("b"))
    ssn.compile_chains()
    ssn.job_enqueued(J)
    assert seen == ["a", "b"]


def test_job_starving_first_tier_with_functions_decides() -> None:
    ssn = session(["a"], ["b", "c"], ["d"])
    reg(ssn, cb.JOB_STARVING, b=lambda j: True, c=lambda j: True, d=lambda j: False)
    ssn.compile_chains()
    assert ssn.job_starving(J) is True
    ssn = session(["a", "b"], ["c"])
    reg(ssn, cb.JOB_STARVING, a=lambda j: True, b=lambda j: False, c=lambda j: True)
    ssn.compile_chains()
    assert ssn.job_starving(J) is False
    ssn = session(["a"])
    ssn.compile_chains()
    assert ssn.job_starving(J) is False  # no voter: not starving


@pytest.mark.parametrize(
    ("answers", "overused", "allocatable"),
    [
        ({}, False, True),
        ({"a": False, "b": False}, False, False),
        ({"a": True, "b": False}, True, False),
        ({"a": True, "b": True}, True, True),
    ],
)
def test_overused_or_allocatable_and(answers: dict, overused: bool, allocatable: bool) -> None:
    ssn = session(["a"], ["b"])
    reg(ssn, cb.OVERUSED, **{k: const(v) for k, v in answers.items()})
    reg(ssn, cb.ALLOCATABLE, **{k: const(v) for k, v in answers.items()})
    reg(ssn, cb.PREEMPTIVE, **{k: const(v) for k, v in answers.items()})
    reg(ssn, cb.JOB_READY, **{k: const(v) for k, v in answers.items()})
    ssn.compile_chains()
    q = mk_queue("q")
    task = tasks("x")[0]
    assert ssn.overused(q) is overused
    assert ssn.allocatable_fn(q, task) is allocatable
    assert ssn.preemptive(q, task) is allocatable
    assert ssn.job_ready(J) is allocatable


def test_job_valid_has_no_flag_and_first_failure_wins() -> None:
    ssn = session(
        [{"name": "a", "enableJobOrder": False, "enableJobReady": False}],
        ["b", "c"],
    )
    reg(
        ssn,
        cb.JOB_VALID,
        a=lambda job: None,
        b=lambda job: ValidateResult(False, "R1", "first"),
        c=lambda job: ValidateResult(False, "R2", "second"),
    )
    ssn.compile_chains()
    vr = ssn.job_valid(J)
    assert vr is not None and (vr.reason, vr.message) == ("R1", "first")
    ssn = session(["a"])
    reg(ssn, cb.JOB_VALID, a=lambda job: ValidateResult(True))
    ssn.compile_chains()
    assert ssn.job_valid(J) is None


def test_predicates_first_error_and_gated_by_enable_predicate() -> None:
    err1, err2 = ValueError("one"), ValueError("two")
    ssn = session(["a", "b"])
    reg(ssn, cb.PREDICATE, a=lambda task, node: None, b=lambda task, node: err1)
    reg(ssn, cb.PRE_PREDICATE, a=lambda task: err2, b=lambda task: err1)
    ssn.compile_chains()
    task = tasks("x")[0]
    assert ssn.predicate_fn(task, ssn.node_list[0]) is err1
    assert ssn.pre_predicate_fn(task) is err2
    ssn = session([{"name": "a", "enablePredicate": False}])
    reg(ssn, cb.PRE_PREDICATE, a=lambda task: err2)
    ssn.compile_chains()
    assert ssn.pre_predicate_fn(task) is None


def test_simulate_add_task_enabled_by_preemptable_or_allocatable() -> None:
    ssn = session([{"name": "a", "enablePreemptable": False, "enabledAllocatable": True}])
    reg(ssn, cb.SIMULATE_ADD_TASK, a=lambda *args: None)
    ssn.compile_chains()
    assert ssn.has(cb.SIMULATE_ADD_TASK)
    ssn = session([{"name": "a", "enablePreemptable": False, "enabledAllocatable": False}])
    reg(ssn, cb.SIMULATE_ADD_TASK, a=lambda *args: None)
    ssn.compile_chains()
    assert not ssn.has(cb.SIMULATE_ADD_TASK)


def test_job_order_with_real_jobs_sorted() -> None:
    """A full sort through the combinator: plugin first, then creation, then uid."""
    import functools

    ssn = session(["a"])
    reg(ssn, cb.JOB_ORDER, a=lambda l, r: r.priority - l.priority)
    ssn.compile_chains()
    jobs: list[JobInfo] = [
        mk_job("b", priority=1, creation=3),
        mk_job("a", priority=1, creation=3),
        mk_job("c", priority=5, creation=9),
        mk_job("d", priority=1, creation=1),
    ]
    key = functools.cmp_to_key(
        lambda l, r: -1 if ssn.job_order_fn(l, r) else (1 if ssn.job_order_fn(r, l) else 0)
    )
    assert [j.name for j in sorted(jobs, key=key)] == ["c", "d", "a", "b"]
