"""The capacity plugin with enableHierarchy: the queue tree, inheritance, checks at every level."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import (
    add_tasks,
    mk_conf,
    mk_job,
    mk_node,
    mk_snapshot,
    mk_task,
    open_session,
    rl,
    rl_map,
    run,
    run_actions,
    task_of,
)

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskStatus
from fumarole.daemon.scheduler.plugins.capacity import CapacityPlugin, CapacityState

S = TaskStatus
INF = float("inf")
GI = 1024**3
TREE = mk_conf("enqueue, allocate", [{"name": "capacity", "enableHierarchy": True}])


def q(name: str, parent: str = "", **kw: Any) -> QueueInfo:
    return QueueInfo(name, parent=parent, **kw)


def plugin(ssn: Session) -> CapacityPlugin:
    p = ssn.plugins["capacity"]
    assert isinstance(p, CapacityPlugin)
    return p


def snap(
    queues: list[QueueInfo], jobs: list[Any], cpu: str = "16", memory: str = "16Gi", **kw: Any
) -> ClusterSnapshot:
    return mk_snapshot([mk_node("n1", cpu, memory, **kw)], jobs, queues)


def pending(
    queue: str, name: str, cpu: str | None = "1", memory: str | None = "1Gi", n: int = 1, **kw: Any
) -> Any:
    extra = kw.pop("extra", None)
    j = mk_job(name, queue, **kw)
    add_tasks(j, n, cpu, memory, extra=extra)
    return j


def running(queue: str, name: str, cpu: str = "1", memory: str = "1Gi", n: int = 1, **kw: Any) -> Any:
    extra = kw.pop("extra", None)
    j = mk_job(name, queue, phase="Running", **kw)
    add_tasks(j, n, cpu, memory, status=S.RUNNING, node="n1", extra=extra)
    return j


# --------------------------------------------------------------------------- the tree
def test_tree_links_parents_default_root_and_rolls_usage_up() -> None:
    queues = [
        q("root"),
        q("default"),
        q("eng", capability=rl(cpu="8", memory="8Gi")),  # no parent -> root
        q("dev", "eng", deserved=rl(cpu="2")),
        q("ops", "eng"),
    ]
    jobs = [running("dev", "r", "2", "1Gi"), pending("dev", "p", "1", "1Gi")]
    ssn = open_session(snap(queues, jobs), TREE)
    a = plugin(ssn).attrs
    assert sorted(a) == ["default", "dev", "eng", "ops", "root"]
    assert a["dev"].ancestors == ["root", "eng"]
    assert a["eng"].ancestors == ["root"]
    assert sorted(a["root"].children) == ["default", "eng"]
    assert sorted(a["eng"].children) == ["dev", "ops"]
    for name in ("dev", "eng", "root"):
        assert a[name].allocated.cpu == 2000, name
        assert a[name].request.cpu == 3000, name
    assert a["ops"].allocated.cpu == 0


def test_missing_capability_dimensions_are_inherited_from_the_parent() -> None:
    gpu, rdma = "nvidia.com/gpu", "example.com/rdma"
    queues = [
        q("root"),
        q("default"),
        q("p", capability=rl_map({"cpu": "8", "memory": "8Gi", gpu: "4", rdma: "10"})),
        q("c1", "p"),  # nothing: everything from p
        q("c2", "p", capability=rl_map({"memory": "2Gi", gpu: "1"})),  # cpu and rdma inherited
        q("g", "c2"),  # grandchild: inherits c2's (already inherited) figures
    ]
    ssn = open_session(snap(queues, []), TREE)
    a = plugin(ssn).attrs
    assert (a["c1"].capability.cpu, a["c1"].capability.memory) == (8000, 8 * GI)
    # root's default capability is unlimited on every cluster scalar (here `pods`), inherited too
    assert a["p"].capability.scalars == {gpu: 4000, rdma: 10000, "pods": INF}
    assert a["c1"].capability.scalars == {gpu: 4000, rdma: 10000, "pods": INF}
    assert (a["c2"].capability.cpu, a["c2"].capability.memory) == (8000, 2 * GI)
    assert a["c2"].capability.scalars == {gpu: 1000, rdma: 10000, "pods": INF}
    assert (a["g"].capability.cpu, a["g"].capability.memory) == (8000, 2 * GI)
    assert a["g"].capability.scalars == {gpu: 1000, rdma: 10000, "pods": INF}
    assert a["g"].real_capability.memory == 2 * GI


def test_root_is_unlimited_by_default_and_sums_children_deserved_and_guarantee() -> None:
    queues = [
        q("root", deserved=rl(cpu="100")),  # overwritten by the children's sum
        q("default"),
        q("a", deserved=rl(cpu="3"), guarantee=rl(cpu="4")),  # deserved raised to guarantee
        q("b", deserved=rl(cpu="2")),
    ]
    ssn = open_session(snap(queues, [], pods="10"), TREE)
    a = plugin(ssn).attrs
    root = a["root"]
    assert root.capability.cpu == INF and root.capability.memory == INF
    assert root.capability.scalars == {"pods": INF}
    assert root.deserved.cpu == 6000
    assert root.guarantee.cpu == 4000
    assert a["a"].deserved.cpu == 4000
    # children's real capability: (root's - sum of siblings' guarantees) + own guarantee
    assert a["b"].real_capability.cpu == INF
    # deserved is not clipped to real capability in hierarchy mode
    small = [q("root", capability=rl(cpu="2", memory="2Gi")), q("default"), q("x", deserved=rl(cpu="5"))]
    x = plugin(open_session(snap(small, []), TREE)).attrs["x"]
    assert x.deserved.cpu == 5000
    assert x.real_capability.cpu == 2000


def test_real_capability_subtracts_sibling_guarantees_at_each_level() -> None:
    queues = [
        q("root", capability=rl(cpu="10", memory="10Gi")),
        q("default"),
        q("p", capability=rl(cpu="6", memory="6Gi"), guarantee=rl(cpu="2")),
        q("p1", "p", guarantee=rl(cpu="1")),
        q("p2", "p", guarantee=rl(cpu="3")),
        q("other"),
    ]
    a = plugin(open_session(snap(queues, []), TREE)).attrs
    # p: (10 - 2) + 2 = 10, capped by its capability 6
    assert a["p"].real_capability.cpu == 6000
    # p1: (6 - (1 + 3)) + 1 = 3; p2: (6 - 4) + 3 = 5
    assert a["p1"].real_capability.cpu == 3000
    assert a["p2"].real_capability.cpu == 5000
    # other: (10 - 2) + 0
    assert a["other"].real_capability.cpu == 8000


# --------------------------------------------------------------------------- every level is checked
def test_task_refused_when_an_ancestor_is_full_though_the_leaf_has_room() -> None:
    queues = [
        q("root"),
        q("default"),
        q("gp", capability=rl(cpu="3", memory="16Gi")),
        q("p", "gp", capability=rl(cpu="10", memory="16Gi")),
        q("leaf", "p", capability=rl(cpu="10", memory="16Gi")),
        q("busy", "gp"),
    ]
    jobs = [running("busy", "b", "2", "1Gi"), pending("leaf", "j", "1", "1Gi", n=2)]
    res = run(snap(queues, jobs), TREE)
    # grandparent gp has 3 cpu: 2 used by `busy`, one more fits, the second does not
    assert sorted(res.binds) == ["default/j-0"]
    ssn = open_session(snap(queues, jobs), TREE)
    p = plugin(ssn)
    t = task_of(ssn, "default/j", "j-0")
    assert p.allocatable(ssn.queues["leaf"], t) is True
    p.attrs["gp"].allocated.add(rl(cpu="1"))
    assert p.allocatable(ssn.queues["leaf"], t) is False


def test_child_cannot_exceed_parent_capability() -> None:
    # the child says 8 cpu, the parent only 2: the parent's limit wins
    queues = [
        q("root"),
        q("default"),
        q("parent", capability=rl(cpu="2", memory="8Gi")),
        q("child", "parent", capability=rl(cpu="8", memory="8Gi")),
    ]
    res = run(snap(queues, [pending("child", "j", "1", "1Gi", n=4)]), TREE)
    assert len(res.binds) == 2
    assert any("capability exceeds parent" in w for w in res.warnings)


def test_non_leaf_queue_refuses_tasks_and_jobs() -> None:
    queues = [q("root"), q("default"), q("p"), q("c", "p")]
    ok = pending("c", "ok")
    # a job in a non-leaf queue, whatever its phase, makes the whole session refuse (Volcano's
    # "not ready"): even the job in the leaf is not scheduled
    for bad in (pending("p", "inq"), pending("p", "pend", phase="Pending", min_resources=rl(cpu="1"))):
        ssn = open_session(snap(queues, [ok, bad]), TREE)
        p = plugin(ssn)
        assert p.ready is False
        assert p.problem == f"the queue p of job {bad.uid} is not a leaf queue"
        assert p.allocatable(ssn.queues["c"], task_of(ssn, "default/ok", "ok-0")) is False
        assert p.job_enqueueable(ssn, bad) == cb.REJECT
        assert "not usable" in ssn.enqueue_rejections[bad.uid]
        assert run(snap(queues, [ok, bad]), TREE).binds == {}
    # the leaf check itself (for a job the figures did not see)
    ssn = open_session(snap(queues, [ok]), TREE)
    p = plugin(ssn)
    assert p.ready is True
    stray = pending("p", "stray", phase="Pending", min_resources=rl(cpu="1"))
    assert p.job_enqueueable(ssn, stray) == cb.REJECT
    assert ssn.enqueue_rejections[stray.uid] == "capacity: queue p is not a leaf queue"
    assert p.allocatable(ssn.queues["p"], stray.tasks["default-stray-0"]) is False


def test_enqueue_rejected_at_a_parent() -> None:
    # hierarchy case6 in miniature: the parent has room for one 2-cpu job, not two
    queues = [
        q("root"),
        q("default"),
        q("q6", capability=rl(cpu="2", memory="4Gi")),
        q("q61", "q6"),
        q("q62", "q6"),
    ]
    j1 = pending(
        "q61", "pg10", "1", "1Gi", phase="Pending", min_resources=rl(cpu="2", memory="4Gi"), creation=1
    )
    j2 = pending(
        "q62", "pg11", "1", "1Gi", phase="Pending", min_resources=rl(cpu="2", memory="4Gi"), creation=2
    )
    ssn = open_session(snap(queues, [j1, j2]), TREE)
    run_actions(ssn, "enqueue")
    assert ssn.jobs["default/pg10"].status.phase == "Inqueue"
    assert ssn.jobs["default/pg11"].status.phase == "Pending"
    msg = ssn.enqueue_rejections["default/pg11"]
    assert msg == (
        "capacity: queue resource quota insufficient: insufficient cpu, insufficient memory"
        " (at ancestor queue q6)"
    )
    a = plugin(ssn).attrs
    # JobEnqueued adds the admitted job's minResources to the leaf and every ancestor
    assert a["q61"].inqueue.cpu == a["q6"].inqueue.cpu == a["root"].inqueue.cpu == 2000
    assert a["q62"].inqueue.cpu == 0


# --------------------------------------------------------------------------- not ready
def test_invalid_parent_or_missing_root_make_the_plugin_refuse_everything() -> None:
    queues = [q("root"), q("default"), q("orphan", "nowhere")]
    ssn = open_session(snap(queues, [pending("default", "j")]), TREE)
    p = plugin(ssn)
    assert p.ready is False
    assert p.problem == "the queue orphan has invalid parent queue nowhere"
    t = task_of(ssn, "default/j", "j-0")
    assert p.allocatable(ssn.queues["default"], t) is False
    assert p.reclaimable(ssn, t, []) == ([], cb.REJECT)
    assert p.job_enqueueable(ssn, ssn.jobs["default/j"]) == cb.REJECT
    # no queue order callbacks when the figures could not be built
    assert not ssn.has(cb.QUEUE_ORDER)
    assert not ssn.has(cb.VICTIM_QUEUE_ORDER)

    noroot = mk_snapshot([mk_node("n1")], [pending("default", "j")], [q("default")])
    noroot.queues.pop("root", None)
    p = plugin(open_session(noroot, TREE))
    assert p.ready is False and "root" in p.problem


def test_parent_cycle_is_not_reported_and_its_queues_get_nothing() -> None:
    queues = [q("root"), q("default"), q("a", "b"), q("b", "a"), q("leaf", "a")]
    ssn = open_session(snap(queues, [pending("leaf", "j")]), TREE)
    p = plugin(ssn)
    assert p.ready is True
    assert p.attrs["leaf"].real_capability.cpu == 0
    res = run(snap(queues, [pending("leaf", "j")]), TREE)
    assert res.binds == {}


# --------------------------------------------------------------------------- orders
def _sorted(ssn: Session, names: list[str]) -> list[str]:
    def cmp(l: QueueInfo, r: QueueInfo) -> int:
        return -1 if ssn.queue_order_fn(l, r) else (1 if ssn.queue_order_fn(r, l) else 0)

    return [x.name for x in sorted((ssn.queues[n] for n in names), key=functools.cmp_to_key(cmp))]


def test_leaves_compare_the_subtrees_where_their_paths_part() -> None:
    queues = [
        q("root"),
        q("default"),
        q("busy", deserved=rl(cpu="4")),
        q("busy-a", "busy", deserved=rl(cpu="2")),
        q("busy-b", "busy", deserved=rl(cpu="2")),
        q("calm", deserved=rl(cpu="4")),
        q("calm-a", "calm", deserved=rl(cpu="4")),
    ]
    jobs = [
        running("busy-a", "x", "3", "1Gi"),  # busy: share 0.75, busy-a 1.5, busy-b 0
        running("calm-a", "y", "2", "1Gi"),  # calm: share 0.5, calm-a 0.5
    ]
    ssn = open_session(snap(queues, jobs), TREE)
    # leaves before inner queues; busy-b (share 0) loses to calm-a because busy (0.75) > calm (0.5)
    assert _sorted(ssn, ["busy", "busy-b", "calm-a", "busy-a"]) == ["calm-a", "busy-b", "busy-a", "busy"]
    # siblings compare themselves
    assert ssn.queue_order_fn(ssn.queues["busy-b"], ssn.queues["busy-a"]) is True


def test_ancestor_shares_are_not_refreshed_by_allocations() -> None:
    queues = [q("root"), q("default"), q("p", deserved=rl(cpu="4")), q("c", "p", deserved=rl(cpu="4"))]
    ssn = open_session(snap(queues, [pending("c", "j", "1", "1Gi", n=2)]), TREE)
    run_actions(ssn, "allocate")
    a = plugin(ssn).attrs
    assert a["c"].allocated.cpu == a["p"].allocated.cpu == 2000
    assert a["c"].share == pytest.approx(0.5)
    assert a["p"].share == 0.0  # Volcano recomputes only the leaf's share


def test_victim_queue_order_prefers_the_closer_relative() -> None:
    queues = [
        q("root"),
        q("default"),
        q("org"),
        q("team", "org"),
        q("me", "team"),
        q("sibling", "team"),
        q("cousin", "org"),
        q("stranger"),
    ]
    jobs = [pending("me", "j"), running("sibling", "s"), running("cousin", "c"), running("stranger", "x")]
    ssn = open_session(snap(queues, jobs), TREE)
    me = ssn.queues["me"]
    vq = ssn.victim_queue_order_fn
    assert vq(ssn.queues["sibling"], ssn.queues["cousin"], me) is True
    assert vq(ssn.queues["cousin"], ssn.queues["stranger"], me) is True
    assert vq(ssn.queues["stranger"], ssn.queues["sibling"], me) is False


# --------------------------------------------------------------------------- simulation
def test_simulate_callbacks_work_on_a_copy_and_walk_ancestors() -> None:
    queues = [q("root"), q("default"), q("p", capability=rl(cpu="2", memory="8Gi")), q("c", "p")]
    jobs = [running("c", "r", "2", "1Gi"), pending("c", "j", "1", "1Gi")]
    conf = mk_conf("allocate", [{"name": "capacity", "enableHierarchy": True}])
    ssn = open_session(snap(queues, jobs), conf)
    p = plugin(ssn)
    t = task_of(ssn, "default/j", "j-0")
    victim = task_of(ssn, "default/r", "r-0")
    assert ssn.pre_predicate_fn(t) is None
    state = ssn.cycle_state(t.uid).clone()
    assert isinstance(state["capacity"], CapacityState)
    assert ssn.simulate_allocatable(ssn.queues["c"], t, state) is False  # parent p is full
    ssn.simulate_remove_task(state, t, victim, ssn.nodes["n1"])
    assert ssn.simulate_allocatable(ssn.queues["c"], t, state) is True
    sim = state["capacity"].allocated
    assert sim["c"].cpu == sim["p"].cpu == sim["root"].cpu == 0
    ssn.simulate_add_task(state, t, victim, ssn.nodes["n1"])
    assert ssn.simulate_allocatable(ssn.queues["c"], t, state) is False
    # the session's own figures never moved
    assert p.attrs["p"].allocated.cpu == 2000
    # without PrePredicate there is no state: refused, as Volcano
    assert ssn.simulate_allocatable(ssn.queues["c"], t, {}) is False


def test_queue_figures_cover_every_queue_in_hierarchy() -> None:
    queues = [q("root"), q("default"), q("p", deserved=rl(cpu="4")), q("c", "p", deserved=rl(cpu="2"))]
    res = run(snap(queues, [pending("c", "j")]), TREE)
    assert sorted(res.queues) == ["c", "default", "p", "root"]
    assert res.queues["c"]["parent"] == "p"
    assert res.queues["root"]["deserved"].cpu == 4000
    assert res.queues["c"]["share"] == pytest.approx(0.5)


def test_leaf_scalar_capability_limits_gpu_pods() -> None:
    # hierarchy case11 in miniature: the parent names no capability, each leaf names gpu 4;
    # each leaf binds its 4-gpu pod, and a fifth gpu in one leaf is refused.
    gpu = "nvidia.com/gpu"
    queues = [
        q("root"),
        q("default"),
        q("p"),
        q("a", "p", capability=rl_map({"cpu": "4", "memory": "4Gi", gpu: "4"})),
        q("b", "p", capability=rl_map({"cpu": "4", "memory": "4Gi", gpu: "4"})),
    ]
    jobs = [pending("a", "ja", extra={gpu: "4"}), pending("b", "jb", extra={gpu: "4"})]
    res = run(mk_snapshot([mk_node("n1", "16", "16Gi", extra={gpu: "8"})], jobs, queues), TREE)
    assert sorted(res.binds) == ["default/ja-0", "default/jb-0"]
    # a third 1-gpu job in `a` is over a's capability
    jobs.append(pending("a", "jc", extra={gpu: "1"}, creation=5))
    res = run(mk_snapshot([mk_node("n1", "16", "16Gi", extra={gpu: "9"})], jobs, queues), TREE)
    assert "default/jc-0" not in res.binds


def test_bound_task_in_leaf_is_counted_for_every_ancestor() -> None:
    queues = [q("root"), q("default"), q("p", capability=rl(cpu="1", memory="8Gi")), q("c", "p")]
    j = mk_job("j", "c", phase="Running")
    mk_task(j, "j-0", "1", "1Gi", status=S.BOUND, node="n1")
    mk_task(j, "j-1", "1", "1Gi")
    res = run(snap(queues, [j]), TREE)
    assert res.binds == {}


def test_root_capability_naming_only_a_scalar_zeroes_cpu_for_the_whole_tree() -> None:
    # Volcano keeps a root capability that is not "empty" (a scalar counts) instead of the
    # unlimited default; children inherit its cpu/memory of 0, so nothing needing cpu fits.
    queues = [q("root", capability=rl_map({"nvidia.com/gpu": "4"})), q("default"), q("leaf")]
    ssn = open_session(snap(queues, [pending("leaf", "j")]), TREE)
    a = plugin(ssn).attrs
    assert a["leaf"].capability.cpu == 0 and a["leaf"].real_capability.cpu == 0
    assert run(snap(queues, [pending("leaf", "j")]), TREE).binds == {}
    # a root capability naming only `pods` is "empty": unlimited default
    queues[0] = q("root", capability=rl(pods="10"))
    assert run(snap(queues, [pending("leaf", "j")]), TREE).binds == {"default/j-0": "n1"}
