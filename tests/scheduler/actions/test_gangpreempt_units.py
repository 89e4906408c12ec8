"""gangpreempt: ported gangpreempt_test.go helper cases, bundles and the whole action."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import add_tasks, mk_conf, mk_job, mk_node, mk_snapshot, open_session, run_actions

from fumarole.daemon.scheduler.actions import victims as vh
from fumarole.daemon.scheduler.actions.gang_eviction import (
    CLUSTER_DOMAIN,
    DEFAULT_MAX_DOMAINS,
    pick_domains_from_gradients,
)
from fumarole.daemon.scheduler.actions.gangpreempt import GangPreempt
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskStatus

R = TaskStatus.RUNNING
GANG = mk_conf("gangpreempt", ["priority", "gang", "conformance"])


# ---------------------------------------------------------------- TestPickDomainsFromGradients_*
def test_pick_domains_max_domains_and_dedup() -> None:
    assert pick_domains_from_gradients([["d1", "d2"], ["d2", "d3"]], 2, "") == ["d1", "d2"]


def test_pick_domains_fallback() -> None:
    assert pick_domains_from_gradients([], 8, CLUSTER_DOMAIN) == [CLUSTER_DOMAIN]


# ---------------------------------------------------------------- TestParseArguments*
def test_parse_arguments() -> None:
    gp = GangPreempt()
    gp.parse_arguments({"maxDomains": 3, "allowWholeBundle": False}, {})
    assert gp.max_domains == 3 and gp.allow_whole_bundle is False
    assert gp.enable_error_cache is True  # allocate's predicateErrorCacheEnable, default true


def test_parse_arguments_invalid_max_domains_falls_back_to_default() -> None:
    for value in (0, -1):
        gp = GangPreempt()
        gp.parse_arguments({"maxDomains": value}, {"predicateErrorCacheEnable": False})
        assert gp.max_domains == DEFAULT_MAX_DOMAINS
        assert gp.enable_error_cache is False
        assert gp.warnings


# ---------------------------------------------------------------- TestSelectDomainVictims_*
def _domain(victim_annotations: dict[str, str] | None, preemptable: bool) -> tuple[object, JobInfo]:
    victim = JobInfo(
        uid="ns/victim",
        name="victim",
        namespace="ns",
        queue="q1",
        min_available=1,
        priority=10,
        annotations=victim_annotations,
        preemptable=preemptable,
    )
    add_tasks(victim, 1, "1", None, status=R, node="n1", namespace="ns", priority=10)
    pre = mk_job("preemptor", "q1", namespace="ns", priority=100)
    add_tasks(pre, 1, "1", None, namespace="ns", priority=100)
    ssn = open_session(mk_snapshot([mk_node("n1", "1")], [victim, pre]), GANG)
    return ssn, ssn.jobs[pre.uid]


def _selected(allow_whole: bool, annotations: dict[str, str] | None, preemptable: bool) -> list[str]:
    ssn, pre = _domain(annotations, preemptable)
    gp = GangPreempt()
    gp.allow_whole_bundle = allow_whole
    pending = vh.collect_pending_tasks_for_gang_eviction(ssn, pre)  # type: ignore[arg-type]
    need = vh.sum_resreq(pending)
    bundles, _ = gp.select_domain_bundles(ssn, pre, list(ssn.node_list), need)  # type: ignore[arg-type, attr-defined]
    return [t.name for t in vh.flatten_bundles(bundles)]


def test_select_domain_victims_respect_allow_whole_bundle() -> None:
    assert _selected(False, None, True) == []
    assert _selected(True, None, True) == ["victim-0"]


def test_select_domain_victims_respect_victim_job_preemptable() -> None:
    assert _selected(True, {"volcano.sh/preemptable": "false"}, False) == []


def test_select_domain_victims_allow_victim_job_when_preemptable_unset() -> None:
    assert _selected(True, None, False) == ["victim-0"]


# ---------------------------------------------------------------- bundles
def test_create_job_bundles_splits_safe_and_whole() -> None:
    job = mk_job("v", min_available=2)
    tasks = add_tasks(job, 4, "1", None, status=R, node="n1")
    tasks[3].priority = 0  # lowest priority: taken first
    bundles = vh.create_job_bundles(job, list(tasks))
    assert [(b.kind, [t.name for t in b.tasks]) for b in bundles] == [
        (vh.BUNDLE_SAFE, ["v-3", "v-0"]),
        (vh.BUNDLE_WHOLE, ["v-1", "v-2"]),
    ]
    assert bundles[1].global_res.cpu == 4000
    need = Resource(1000)
    assert vh.bundle_roi(bundles[0], need) == float("inf")
    assert vh.select_bundles(bundles, need, allow_whole=False) == [bundles[0]]


def test_apply_allowed_tasks_keeps_whole_bundles_only_when_fully_allowed() -> None:
    job = mk_job("v", min_available=2)  # 3 running: one safe task, two in the whole bundle
    tasks = add_tasks(job, 3, "1", None, status=R, node="n1")
    bundles = vh.create_job_bundles(job, list(tasks))
    kinds = [b.kind for b in bundles]
    assert kinds == [vh.BUNDLE_SAFE, vh.BUNDLE_WHOLE]
    whole = bundles[1].tasks
    allowed = {bundles[0].tasks[0].uid, whole[0].uid}
    kept = vh.apply_allowed_tasks(bundles, allowed)
    assert [b.kind for b in kept] == [vh.BUNDLE_SAFE]
    assert [b.kind for b in vh.apply_allowed_tasks(bundles, {t.uid for t in tasks})] == kinds


# ---------------------------------------------------------------- the action
def test_gangpreempt_evicts_a_low_priority_gang_and_pipelines_the_preemptor() -> None:
    low = mk_job("low", priority=1, min_available=2)
    add_tasks(low, 2, "1", None, status=R, node="n1")
    high = mk_job("high", priority=100, min_available=2)
    add_tasks(high, 2, "1", None)
    ssn = open_session(mk_snapshot([mk_node("n1", "2")], [low, high]), GANG)
    run_actions(ssn, "gangpreempt")
    assert sorted(e.task for e in ssn.evictions) == ["default/low-0", "default/low-1"]
    assert {t.status for t in ssn.jobs[high.uid].tasks.values()} == {TaskStatus.PIPELINED}
    reason = ssn.evictions[0].reason
    assert (
        reason
        == "preempted by job default/high (priority 100); victims chosen by priority, gang, conformance"
    )


def test_gangpreempt_discards_when_the_gang_cannot_be_completed() -> None:
    low = mk_job("low", priority=1, min_available=1)
    add_tasks(low, 1, "1", None, status=R, node="n1")
    high = mk_job("high", priority=100, min_available=3)
    add_tasks(high, 3, "1", None)
    ssn = open_session(mk_snapshot([mk_node("n1", "2")], [low, high]), GANG)
    run_actions(ssn, "gangpreempt")
    assert ssn.evictions == []
    assert ssn.jobs[low.uid].tasks["default-low-0"].status is R
    assert {t.status for t in ssn.jobs[high.uid].tasks.values()} == {TaskStatus.PENDING}


def test_gangpreempt_never_evicts_equal_or_higher_priority_jobs() -> None:
    peer = mk_job("peer", priority=100, min_available=1)
    add_tasks(peer, 2, "1", None, status=R, node="n1")
    high = mk_job("high", priority=100, min_available=1)
    add_tasks(high, 1, "1", None)
    ssn = open_session(mk_snapshot([mk_node("n1", "2")], [peer, high]), GANG)
    run_actions(ssn, "gangpreempt")
    assert ssn.evictions == []
