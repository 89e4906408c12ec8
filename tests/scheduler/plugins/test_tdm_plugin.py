"""The tdm plugin: revocable-zone windows in virtual time, predicate, score, victims and job hooks."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import add_tasks, mk_conf, mk_job, mk_snapshot, mk_task, open_session

from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.fit import Code, FitError
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeFacts, NodeInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import PodFacts, TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins.tdm import ZoneError, int_or_percent, max_pod_evict_num, zone_window

NOON = datetime(2024, 3, 5, 12, 0, tzinfo=UTC).timestamp()
ZONE = "volcano.sh/revocable-zone"
S = TaskStatus


def at(hh: int, mm: int, ss: int = 0, day: int = 5) -> float:
    return datetime(2024, 3, day, hh, mm, ss, tzinfo=UTC).timestamp()


def node(name: str, zone: str | None = None) -> NodeInfo:
    labels = {ZONE: zone} if zone is not None else {}
    alloc = Resource.from_resource_list({"cpu": "16", "memory": "64Gi", "pods": "10"})
    return NodeInfo(name, alloc, facts=NodeFacts(labels=labels))


def pod(annotations: dict[str, str] | None = None, phase: str = "Pending") -> PodFacts:
    return PodFacts(annotations=dict(annotations or {}), phase=phase)


def tdm_conf(args: dict[str, Any], actions: str = "allocate", **flags: Any) -> Any:
    return mk_conf(actions, [{"name": "tdm", "arguments": args, **flags}])


def session(nodes: list[NodeInfo], jobs: list[JobInfo], args: dict[str, Any], now: float = NOON) -> Session:
    snap = mk_snapshot(nodes, jobs)
    snap.now = now
    return open_session(snap, tdm_conf(args))


# ---------------------------------------- Test_parseRevocableZone
@pytest.mark.parametrize(
    ("rz", "delta", "err"),
    [
        ("00:00_01:00", 0, True),
        ("00:00-01:00", 3600, False),
        ("0:00-23:59", 23 * 3600 + 59 * 60, False),
        ("0:00", 0, True),
        ("1:00-0:00", 23 * 3600, False),
        ("1:0-0:0", 0, True),
        ("   1:00-0:00    ", 23 * 3600, False),
        ("23:59-23:59", 24 * 3600, False),
        ("63:59-23:59", 0, True),
    ],
)
def test_volcano_parse_revocable_zone(rz: str, delta: int, err: bool) -> None:
    if err:
        with pytest.raises(ZoneError):
            zone_window(rz, NOON)
        return
    start, end = zone_window(rz, NOON)
    assert end - start == delta
    assert start == at(int(rz.strip().split(":")[0]), int(rz.strip().split("-")[0].split(":")[1]))


@pytest.mark.parametrize(
    ("window", "now", "active"),
    [
        ("10:00-21:00", at(9, 59, 59), False),
        ("10:00-21:00", at(10, 0), True),
        ("10:00-21:00", at(21, 0), True),
        ("10:00-21:00", at(21, 0) + 0.9, True),  # whole Unix seconds are compared
        ("10:00-21:00", at(21, 0, 1), False),
        ("22:00-02:00", at(23, 0), True),
        ("22:00-02:00", at(1, 0), False),  # the window starts "today": after midnight it is closed
        ("0:00-0:00", at(0, 0), True),
        ("0:00-0:00", at(23, 59, 59), True),
        ("0:00-0:01", NOON, False),
    ],
)
def test_zone_windows_follow_virtual_time(window: str, now: float, active: bool) -> None:
    ssn = session([node("n1", "rz")], [], {"tdm.revocable-zone.rz": window}, now)
    assert (ssn.plugins["tdm"].zone_error("rz") is None) is active


# ---------------------------------------- Test_TDM (predicate and score)
@pytest.mark.parametrize(
    ("case", "annotations", "fit", "scores"),
    [
        ("preemptable task rz available", {ZONE: "*"}, {"n1", "n2", "n3", "n4"}, {"n1": 100, "n2": 100}),
        ("not preemptable task", {}, {"n3", "n4"}, {}),
        ("preemptable task and multiple rz", {ZONE: "*"}, {"n1", "n2", "n3", "n4"}, {"n1": 100, "n2": 100}),
    ],
)
def test_volcano_tdm_predicate_and_score(
    case: str, annotations: dict[str, str], fit: set[str], scores: dict[str, float]
) -> None:
    nodes = [node("n1", "rz1"), node("n2", "rz1"), node("n3"), node("n4"), node("n5", "rz2")]
    j = mk_job("pg1", "c1", namespace="c1", min_available=0)
    mk_task(j, "p1", pod=pod(annotations))
    args = {"tdm.revocable-zone.rz1": "0:00-0:00", "tdm.revocable-zone.rz2": "0:00-0:01"}
    ssn = session(nodes, [j], args)
    task = next(iter(ssn.jobs[j.uid].tasks.values()))
    passed = {n.name for n in ssn.node_list if ssn.predicate_fn(task, n) is None}
    assert passed == fit, case
    score = ssn.fns["nodeOrder"]["tdm"]
    for n in ssn.node_list:
        if n.name in passed:
            assert score(task, n) == scores.get(n.name, 0.0), (case, n.name)


def test_predicate_messages_are_unresolvable() -> None:
    nodes = [node("closed", "rz1"), node("unknown", "rzX"), node("open", "rz2")]
    j = mk_job("pg1")
    mk_task(j, "plain", pod=pod())
    args = {"tdm.revocable-zone.rz1": "10:00-11:00", "tdm.revocable-zone.rz2": "11:00-13:00"}
    ssn = session(nodes, [j], args)
    task = next(iter(ssn.jobs[j.uid].tasks.values()))
    errs = {n.name: ssn.predicate_fn(task, n) for n in ssn.node_list}
    for err in errs.values():
        assert isinstance(err, FitError) and err.codes() == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    assert errs["closed"].reasons() == ["current time beyond revocable zone rz1:10:00-11:00"]  # type: ignore[union-attr]
    assert errs["unknown"].reasons() == ["revocable zone rzX not support"]  # type: ignore[union-attr]
    assert errs["open"].reasons() == ["not allow to dispatch to revocable node"]  # type: ignore[union-attr]


def test_task_revocable_zone_comes_from_annotations_only() -> None:
    j = mk_job("pg1")
    cases = {
        "star": {ZONE: "*"},
        "named": {ZONE: "rz1"},  # only "*" counts
        "preemptable": {"volcano.sh/preemptable": "true"},
        "preemptable-false": {"volcano.sh/preemptable": "false"},
        "zone-wins": {ZONE: "", "volcano.sh/preemptable": "true"},
    }
    for name, ann in cases.items():
        mk_task(j, name, pod=pod(ann))
    ssn = session([node("n1", "rz1")], [j], {"tdm.revocable-zone.rz1": "0:00-0:00"})
    ok = {t.name for t in ssn.jobs[j.uid].tasks.values() if ssn.predicate_fn(t, ssn.node_list[0]) is None}
    assert ok == {"star", "preemptable"}


# ---------------------------------------- Test_TDM_victimsFn
def _running(job: JobInfo, name: str, node_name: str, preemptable: bool) -> TaskInfo:
    ann = {"volcano.sh/preemptable": "true" if preemptable else "false"}
    return mk_task(
        job,
        name,
        status=S.RUNNING,
        node=node_name,
        preemptable=preemptable,
        pod=pod(ann, "Running"),
        namespace=job.namespace,
    )


def _pg1(budget: dict[str, str]) -> JobInfo:
    j = mk_job("pg1", "c1", namespace="c1", min_available=0, phase="Running")
    j.annotations.update(budget)
    for i in range(1, 6):
        _running(j, f"p{i}", "n1", i <= 3)
    return j


def _pg2(budget: dict[str, str]) -> JobInfo:
    j = mk_job("pg2", "c2", namespace="c2", min_available=0, phase="Running")
    j.annotations.update(budget)
    for i in range(6, 11):
        _running(j, f"p{i}", "n2", True)
    return j


MAXU = "volcano.sh/jdb-max-unavailable"
MINA = "volcano.sh/jdb-min-available"


@pytest.mark.parametrize(
    ("pg1", "pg2", "window", "period", "want"),
    [
        ({MAXU: "30%"}, None, "0:00-0:01", "100ms", 2),
        ({MAXU: "30%"}, None, "0:00-0:00", "100ms", 0),
        ({MAXU: "99%"}, None, "0:00-0:01", "1s", 3),
        (None, {MAXU: "50%"}, "0:00-0:01", "1s", 3),
        ({MAXU: "90%"}, {MAXU: "50%"}, "0:00-0:01", "1s", 6),
        (None, {MAXU: "3"}, "0:00-0:01", "1s", 3),
        (None, {MINA: "3"}, "0:00-0:01", "1s", 2),
        (None, {MINA: "30%"}, "0:00-0:01", "1s", 3),
        ({MAXU: "3"}, {MINA: "2"}, "0:00-0:01", "1s", 6),
    ],
)
def test_volcano_tdm_victims(
    pg1: dict[str, str] | None, pg2: dict[str, str] | None, window: str, period: str, want: int
) -> None:
    jobs, nodes = [], []
    if pg1 is not None:
        jobs.append(_pg1(pg1))
        nodes.append(node("n1", "rz1"))
    if pg2 is not None:
        jobs.append(_pg2(pg2))
        nodes.append(node("n2", "rz1"))
    args = {"tdm.revocable-zone.rz1": window, "tdm.evict.period": period}
    snap = mk_snapshot(nodes, jobs)
    snap.now = NOON
    ssn = open_session(snap, mk_conf("shuffle", [{"name": "tdm", "arguments": args}]))
    victims = ssn.victim_tasks([])
    assert len(victims) == want
    assert all(v.preemptable and v.status is S.RUNNING for v in victims)


def test_victims_are_taken_in_node_then_uid_order_and_the_period_gates_a_second_sweep() -> None:
    j = _pg1({MAXU: "30%"})
    snap = mk_snapshot([node("n1", "rz1")], [j])
    snap.now = NOON
    ssn = open_session(
        snap, mk_conf("shuffle", [{"name": "tdm", "arguments": {"tdm.revocable-zone.rz1": "1:00-2:00"}}])
    )
    assert [v.name for v in ssn.victim_tasks([])] == ["p1", "p2"]
    assert ssn.victim_tasks([]) == []  # within tdm.evict.period (default 1m) of the last sweep
    ssn = open_session(
        snap,
        mk_conf(
            "shuffle",
            [{"name": "tdm", "arguments": {"tdm.revocable-zone.rz1": "1:00-2:00", "tdm.evict.period": "0s"}}],
        ),
    )
    assert len(ssn.victim_tasks([])) == 2
    assert len(ssn.victim_tasks([])) == 2


def test_shuffle_evicts_the_victims() -> None:
    j = _pg1({MAXU: "99%"})
    snap = mk_snapshot([node("n1", "rz1")], [j])
    snap.now = NOON
    from fumarole_sched_kit import run

    res = run(
        snap, mk_conf("shuffle", [{"name": "tdm", "arguments": {"tdm.revocable-zone.rz1": "1:00-2:00"}}])
    )
    assert sorted(e.task for e in res.evictions) == ["c1/p1", "c1/p2", "c1/p3"]


@pytest.mark.parametrize(
    ("text", "total", "value"),
    [
        ("3", 5, 3),
        ("-1", 5, -1),
        ("+2", 5, 2),
        ("30%", 5, 2),
        ("99%", 5, 5),
        ("0%", 5, 0),
        ("x", 5, 0),
        ("3.5%", 5, 0),
        ("1%%", 5, 0),
    ],
)
def test_int_or_percent(text: str, total: int, value: int) -> None:
    assert int_or_percent(text, total) == value


def test_max_pod_evict_num_quirks() -> None:
    j = mk_job("j")
    add_tasks(j, 3, status=S.RUNNING, node="n1")
    add_tasks(j, 1, status=S.PENDING, start=3)
    assert max_pod_evict_num(j) == 1  # no budget
    j.annotations[MINA] = "5"
    assert max_pod_evict_num(j) == 1  # fewer running than min-available: still the default 1
    j.annotations[MINA] = "1"
    assert max_pod_evict_num(j) == 2
    j.annotations[MAXU] = "4"
    assert max_pod_evict_num(j) == 2  # min-available is read first
    del j.annotations[MINA]
    assert max_pod_evict_num(j) == 3  # 4 - (4 tasks - 3 running)
    j.annotations[MAXU] = "1"
    assert max_pod_evict_num(j) == 0


# ---------------------------------------- preemptable
def test_preemptable_picks_running_preemptable_tasks_off_revocable_nodes() -> None:
    victim_job = mk_job("v", min_available=0, phase="Running")
    on_normal = [_running(victim_job, f"v-{i}", "normal", True) for i in range(3)]
    _running(victim_job, "v-9", "normal", False)
    _running(victim_job, "v-r", "rev", True)
    preemptor_job = mk_job("p")
    plain = mk_task(preemptor_job, "p-0", pod=pod(), preemptable=False)
    revocable = mk_task(preemptor_job, "p-1", pod=pod({ZONE: "*"}), preemptable=False)
    loose = mk_task(preemptor_job, "p-2", pod=pod(), preemptable=True)
    ssn = session(
        [node("normal"), node("rev", "rz1")],
        [victim_job, preemptor_job],
        {"tdm.revocable-zone.rz1": "0:00-0:00"},
    )
    fn = ssn.fns["preemptable"]["tdm"]
    cands = list(ssn.jobs[victim_job.uid].tasks.values())
    victims, vote = fn(ssn.jobs[preemptor_job.uid].tasks[plain.uid], cands)
    assert vote == 1 and [v.name for v in victims] == [on_normal[0].name]  # default budget: 1 per job
    assert fn(ssn.jobs[preemptor_job.uid].tasks[revocable.uid], cands) == ([], -1)
    assert fn(ssn.jobs[preemptor_job.uid].tasks[loose.uid], cands) == ([], -1)


# ---------------------------------------- job hooks
def test_job_order_pipelined_and_starving() -> None:
    firm = mk_job("firm", min_available=2)
    add_tasks(firm, 2)
    loose = mk_job("loose", min_available=1)
    loose.preemptable = True
    add_tasks(loose, 1)
    ssn = session([node("n1")], [firm, loose], {})
    J = ssn.jobs
    assert ssn.job_order_compare(J[firm.uid], J[loose.uid]) == -1
    assert ssn.job_order_compare(J[loose.uid], J[firm.uid]) == 1
    assert ssn.job_pipelined(J[firm.uid]) is False
    assert ssn.job_starving(J[firm.uid]) is True
    assert ssn.job_starving(J[loose.uid]) is False
    done = mk_job("done", min_available=1)
    add_tasks(done, 1, status=S.RUNNING, node="n1")
    ssn = session([node("n1")], [done], {})
    assert ssn.job_pipelined(ssn.jobs[done.uid]) is True
    assert ssn.job_starving(ssn.jobs[done.uid]) is False


def test_arguments() -> None:
    args = {
        "tdm.revocable-zone.a": "1:00-2:00",
        "x.tdm.revocable-zone.b": "3:00-4:00",  # any key containing the prefix; first occurrence removed
        "tdm.revocable-zone.c": 5,
        "tdm.evict.period": 30,
    }
    ssn = session([node("n1")], [], args)
    p = ssn.plugins["tdm"]
    assert p.zones == {"a": "1:00-2:00", "x.b": "3:00-4:00"}
    assert p.evict_period_ns == 60 * 10**9
    assert any("tdm.revocable-zone.c" in w for w in ssn.warnings)
    assert any("tdm.evict.period" in w for w in ssn.warnings)
    ssn = session([node("n1")], [], {"tdm.evict.period": "90s"})
    assert ssn.plugins["tdm"].evict_period_ns == 90 * 10**9
    ssn = session([node("n1")], [], {"tdm.evict.period": "soon"})
    assert ssn.plugins["tdm"].evict_period_ns == 60 * 10**9


def test_allocate_keeps_plain_pods_off_revocable_nodes_and_prefers_them_for_revocable_pods() -> None:
    from fumarole_sched_kit import run

    j = mk_job("pg", min_available=0)
    mk_task(j, "plain-0", pod=pod())
    mk_task(j, "rev-0", pod=pod({ZONE: "*"}))
    snap = mk_snapshot([node("a-normal"), node("b-rev", "rz1")], [j])
    snap.now = NOON
    res = run(
        snap, mk_conf("allocate", [{"name": "tdm", "arguments": {"tdm.revocable-zone.rz1": "11:00-13:00"}}])
    )
    assert res.binds == {"default/plain-0": "a-normal", "default/rev-0": "b-rev"}
    snap.now = at(14, 0)
    res = run(
        snap, mk_conf("allocate", [{"name": "tdm", "arguments": {"tdm.revocable-zone.rz1": "11:00-13:00"}}])
    )
    assert res.binds == {"default/plain-0": "a-normal", "default/rev-0": "a-normal"}
