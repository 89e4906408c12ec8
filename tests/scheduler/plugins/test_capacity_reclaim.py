"""Capacity's victim side: Reclaimable (flat and hierarchical), UnifiedEvictable, reclaim end to end."""

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
    mk_snapshot,
    open_session,
    rl,
    rl_map,
    run,
    task_of,
)

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins.capacity import CapacityPlugin

S = TaskStatus
GPU = "nvidia.com/gpu"
# As in capacity_test.go, gang only tells who is starving; capacity alone picks the victims.
GANG = {"name": "gang", "enableReclaimable": False, "enablePreemptable": False}
FLAT = mk_conf("enqueue, reclaim, allocate", ["capacity", "predicates", GANG])


def tree(level: int = 0) -> Any:
    return mk_conf(
        "enqueue, reclaim, allocate",
        [
            {"name": "capacity", "enableHierarchy": True, "arguments": {"ancestorReclaimLevel": level}},
            "predicates",
            GANG,
        ],
    )


def q(name: str, parent: str = "", **kw: Any) -> QueueInfo:
    return QueueInfo(name, parent=parent, **kw)


def running(
    queue: str, name: str, n: int = 1, cpu: str | None = "1", memory: str | None = "1Gi", **kw: Any
) -> Any:
    extra = kw.pop("extra", None)
    j = mk_job(name, queue, phase="Running", **kw)
    add_tasks(j, n, cpu, memory, status=S.RUNNING, node="n1", extra=extra)
    return j


def pending(
    queue: str, name: str, n: int = 1, cpu: str | None = "1", memory: str | None = "1Gi", **kw: Any
) -> Any:
    extra = kw.pop("extra", None)
    j = mk_job(name, queue, **kw)
    add_tasks(j, n, cpu, memory, extra=extra)
    return j


def plugin(ssn: Session) -> CapacityPlugin:
    p = ssn.plugins["capacity"]
    assert isinstance(p, CapacityPlugin)
    return p


def running_tasks(ssn: Session) -> list[TaskInfo]:
    return [
        t
        for uid in sorted(ssn.jobs)
        for t in sorted(ssn.jobs[uid].tasks.values(), key=lambda t: t.name)
        if t.status is S.RUNNING
    ]


def names(ts: list[TaskInfo]) -> list[str]:
    return sorted(t.name for t in ts)


# --------------------------------------------------------------------------- flat
def test_only_queues_above_deserved_give_up_tasks_and_only_down_to_deserved() -> None:
    queues = [
        q("root"),
        q("default"),
        q("hungry", deserved=rl(cpu="4")),
        q("over", deserved=rl(cpu="1")),
        q("under", deserved=rl(cpu="4")),
    ]
    jobs = [running("over", "o", 3), running("under", "u", 2), pending("hungry", "h")]
    ssn = open_session(mk_snapshot([mk_node("n1", "8", "16Gi")], jobs, queues), FLAT)
    reclaimer = task_of(ssn, "default/h", "h-0")
    victims, vote = plugin(ssn).reclaimable(ssn, reclaimer, running_tasks(ssn))
    assert vote == cb.PERMIT
    # over: 3 cpu allocated, deserved 1 -> two tasks go (3 > 1, 2 > 1), the last stays (1 == 1)
    assert len(victims) == 2
    assert all(t.job == "default/o" for t in victims)


def test_guarantee_is_never_reclaimed() -> None:
    queues = [
        q("root"),
        q("default"),
        q("hungry", deserved=rl(cpu="4")),
        q("g", deserved=rl(cpu="1"), guarantee=rl(cpu="2")),
    ]
    jobs = [running("g", "o", 3), pending("hungry", "h")]
    ssn = open_session(mk_snapshot([mk_node("n1", "8", "16Gi")], jobs, queues), FLAT)
    reclaimer = task_of(ssn, "default/h", "h-0")
    victims, _ = plugin(ssn).reclaimable(ssn, reclaimer, running_tasks(ssn))
    # deserved is raised to the guarantee (2): 3 -> 2, then taking another would go below 2
    assert len(victims) == 1


def test_task_using_nothing_its_queue_deserves_is_an_immediate_victim() -> None:
    queues = [
        q("root"),
        q("default"),
        q("hungry", deserved=rl(cpu="4")),
        q("gpu-only", deserved=rl_map({GPU: "1"})),
    ]
    jobs = [running("gpu-only", "cpu-user", 1), pending("hungry", "h")]
    ssn = open_session(mk_snapshot([mk_node("n1", "8", "16Gi")], jobs, queues), FLAT)
    reclaimer = task_of(ssn, "default/h", "h-0")
    victims, _ = plugin(ssn).reclaimable(ssn, reclaimer, running_tasks(ssn))
    assert names(victims) == ["cpu-user-0"]


def test_reclaimee_sharing_no_dimension_with_the_reclaimer_is_skipped() -> None:
    queues = [
        q("root"),
        q("default"),
        q("hungry", deserved=rl_map({GPU: "2"})),
        q("over", deserved=rl(cpu="1")),
    ]
    jobs = [running("over", "o", 3), pending("hungry", "h", cpu=None, memory=None, extra={GPU: "1"})]
    ssn = open_session(mk_snapshot([mk_node("n1", "8", "16Gi", extra={GPU: "2"})], jobs, queues), FLAT)
    reclaimer = task_of(ssn, "default/h", "h-0")
    victims, vote = plugin(ssn).reclaimable(ssn, reclaimer, running_tasks(ssn))
    assert (victims, vote) == ([], cb.PERMIT)


def test_reclaim_action_evicts_from_the_over_deserved_queue_only() -> None:
    queues = [
        q("root"),
        q("default"),
        q("hungry", deserved=rl(cpu="2", memory="2Gi")),
        q("over", deserved=rl(cpu="1", memory="1Gi")),
        q("fair", deserved=rl(cpu="2", memory="2Gi")),
    ]
    jobs = [running("over", "o", 2), running("fair", "f", 2), pending("hungry", "h")]
    res = run(mk_snapshot([mk_node("n1", "4", "4Gi")], jobs, queues), FLAT)
    assert [e.task for e in res.evictions] == ["default/o-1"]
    assert res.pipelined == {"default/h-0": "n1"}


def test_not_ready_rejects() -> None:
    queues = [q("root"), q("default"), q("bad", "missing")]
    ssn = open_session(mk_snapshot([mk_node("n1")], [pending("default", "h")], queues), tree())
    t = task_of(ssn, "default/h", "h-0")
    assert plugin(ssn).reclaimable(ssn, t, []) == ([], cb.REJECT)
    ctx = cb.EvictionContext(cb.EVICTION_KIND_GANG_RECLAIM, ssn.jobs["default/h"])
    assert plugin(ssn).unified_evictable(ssn, ctx, []) == ([], cb.REJECT)


# --------------------------------------------------------------------------- unified evictable
def test_unified_evictable_permits_all_for_gang_preempt_and_checks_queues_for_gang_reclaim() -> None:
    queues = [
        q("root"),
        q("default"),
        q("hungry", deserved=rl(cpu="4")),
        q("over", deserved=rl(cpu="1")),
        q("under", deserved=rl(cpu="4")),
    ]
    jobs = [running("over", "o", 3), running("under", "u", 2), pending("hungry", "h")]
    ssn = open_session(mk_snapshot([mk_node("n1", "8", "16Gi")], jobs, queues), FLAT)
    p = plugin(ssn)
    cands = running_tasks(ssn)
    job = ssn.jobs["default/h"]
    victims, vote = p.unified_evictable(ssn, cb.EvictionContext(cb.EVICTION_KIND_GANG_PREEMPT, job), cands)
    assert (names(victims), vote) == (names(cands), cb.PERMIT)
    victims, vote = p.unified_evictable(ssn, cb.EvictionContext(cb.EVICTION_KIND_GANG_RECLAIM, job), cands)
    assert vote == cb.PERMIT
    assert names(victims) == ["o-0", "o-1"]


# --------------------------------------------------------------------------- hierarchy
def _two_branch_tree(parent_b_deserved: str) -> list[QueueInfo]:
    """root -> pa -> qa (reclaimer) ; root -> pb -> qb (victim), qb over its own deserved."""
    return [
        q("root"),
        q("default"),
        q("pa", deserved=rl(cpu="2", memory="2Gi")),
        q("qa", "pa", deserved=rl(cpu="2", memory="2Gi")),
        q("pb", deserved=rl(cpu=parent_b_deserved, memory=parent_b_deserved + "Gi")),
        q("qb", "pb", deserved=rl(cpu="1", memory="1Gi")),
    ]


def test_ancestor_reclaim_level_checks_the_victims_parent() -> None:
    jobs = [running("qb", "v", 2), pending("qa", "r")]
    node = mk_node("n1", "2", "2Gi")
    # pb deserves 4: the leaf qb is over (2 > 1) but its parent is not (2 < 4)
    queues = _two_branch_tree("4")
    # (victims of one job go last-scheduled first: v-1 before v-0)
    for level, want in ((0, ["v-1"]), (1, [])):
        ssn = open_session(mk_snapshot([node], jobs, queues), tree(level))
        t = task_of(ssn, "default/r", "r-0")
        victims, _ = plugin(ssn).reclaimable(ssn, t, running_tasks(ssn))
        assert names(victims) == want, level
    # pb deserves 1: parent over too -> level 1 lets one task go
    queues = _two_branch_tree("1")
    ssn = open_session(mk_snapshot([node], jobs, queues), tree(1))
    t = task_of(ssn, "default/r", "r-0")
    victims, _ = plugin(ssn).reclaimable(ssn, t, running_tasks(ssn))
    assert names(victims) == ["v-1"]


def test_siblings_without_deserved_do_not_reclaim_from_each_other_with_ancestor_level() -> None:
    # case8 in miniature: both leaves deserve nothing; an immediate victim in a sibling is spared
    # when the reclaimer's own queue deserves nothing of what it asks
    queues = [
        q("root"),
        q("default"),
        q("parent", deserved=rl(cpu="4", memory="4Gi"), capability=rl(cpu="4", memory="4Gi")),
        q("qa", "parent"),
        q("qb", "parent"),
    ]
    jobs = [running("qb", "v", 1, "2", "2Gi"), pending("qa", "r", 1, "2", "2Gi")]
    node = mk_node("n1", "2", "2Gi")
    for level, want in ((0, ["v-0"]), (1, [])):
        ssn = open_session(mk_snapshot([node], jobs, queues), tree(level))
        t = task_of(ssn, "default/r", "r-0")
        victims, _ = plugin(ssn).reclaimable(ssn, t, running_tasks(ssn))
        assert names(victims) == want, level


def test_preemptive_may_pass_on_an_ancestor_within_the_level_but_never_root() -> None:
    queues = [
        q("root"),
        q("default"),
        q("p", deserved=rl(cpu="8")),
        q("leaf", "p", deserved=rl(cpu="1")),
    ]
    jobs = [running("leaf", "x", 2), pending("leaf", "r")]
    for level, want in ((0, False), (1, True)):
        ssn = open_session(mk_snapshot([mk_node("n1", "8", "16Gi")], jobs, queues), tree(level))
        t = task_of(ssn, "default/r", "r-0")
        assert plugin(ssn).preemptive(ssn.queues["leaf"], [t]) is want, level
    # level 2 from `p` would reach root, which is never used
    queues = [q("root", deserved=rl(cpu="100")), q("default"), q("leaf", deserved=rl(cpu="1"))]
    ssn = open_session(mk_snapshot([mk_node("n1", "8", "16Gi")], jobs, queues), tree(2))
    t = task_of(ssn, "default/r", "r-0")
    assert plugin(ssn).preemptive(ssn.queues["leaf"], [t]) is False


def test_hierarchical_reclaim_takes_from_the_sibling_branch_over_its_deserved() -> None:
    # after hierarchy case3: q32 (deserved 2) reclaims; both its sibling q31 (3 cpu used, deserved
    # 2) and q4 (4 used, deserved 2, under another parent) are over their deserved, and capacity
    # offers a victim from each; the victim queue order puts the closer relative first and one
    # eviction is enough.
    queues = [
        q("root"),
        q("default"),
        q("q3", capability=rl(cpu="4", memory="4Gi"), deserved=rl(cpu="4", memory="4Gi")),
        q("q31", "q3", capability=rl(cpu="4", memory="4Gi"), deserved=rl(cpu="2", memory="2Gi")),
        q("q32", "q3", capability=rl(cpu="4", memory="4Gi"), deserved=rl(cpu="2", memory="2Gi")),
        q("q4", capability=rl(cpu="4", memory="4Gi"), deserved=rl(cpu="2", memory="2Gi")),
    ]
    jobs = [
        running("q4", "far", 1, "4", "4Gi"),
        running("q31", "near", 3, "1", "1Gi"),
        pending("q32", "want", 1, "1", "1Gi"),
    ]
    ssn = open_session(mk_snapshot([mk_node("n1", "7", "7Gi")], jobs, queues), tree())
    victims, _ = plugin(ssn).reclaimable(ssn, task_of(ssn, "default/want", "want-0"), running_tasks(ssn))
    assert [t.name for t in victims] == ["near-2", "far-0"]
    res = run(mk_snapshot([mk_node("n1", "7", "7Gi")], jobs, queues), tree())
    assert [e.task for e in res.evictions] == ["default/near-2"]
    assert res.pipelined == {"default/want-0": "n1"}
