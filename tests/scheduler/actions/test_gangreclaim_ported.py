"""Ports of Volcano's gangreclaim_test.go (pkg/scheduler/actions/gangreclaim), as data-level tests.

Every Go test function there calls an internal helper on a hand-built session (no action runs);
each is ported one to one against our helpers:
- TestPickDomainsFromGradients_MaxDomainsAndDedup, TestPickDomainsFromGradients_Fallback;
- TestParseArguments, TestParseArguments_InvalidMaxDomainsFallsBackToDefault (cases zero, negative);
- TestSelectDomainVictims_ReclaimableCrossQueueOnly, TestSelectDomainVictims_RespectVictimJobPreemptable,
  TestSelectDomainVictims_AllowVictimJobWhenPreemptableUnset.
The Go tests register a `test-reclaim` plugin whose UnifiedEvictable permits every candidate; the
same callback is registered on our session.  Jobs are built with minAvailable 0 as Go's NewJobInfo.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_queue, mk_snapshot, mk_task, open_session

from fumarole.daemon.scheduler.actions import gang_eviction, gangreclaim
from fumarole.daemon.scheduler.actions.gang_eviction import pick_domains_from_gradients
from fumarole.daemon.scheduler.actions.victims import flatten_bundles, sum_resreq
from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus

S = TaskStatus


# --------------------------------------------------------------------------- domains
def test_pick_domains_from_gradients_max_domains_and_dedup() -> None:
    assert pick_domains_from_gradients([["d1", "d2"], ["d2", "d3"]], 3, "") == ["d1", "d2", "d3"]


def test_pick_domains_from_gradients_fallback() -> None:
    fallback = "<cluster-top-hypernode>"
    assert pick_domains_from_gradients([], 8, fallback) == [fallback]
    assert fallback == gang_eviction.CLUSTER_DOMAIN


# --------------------------------------------------------------------------- arguments
def test_parse_arguments() -> None:
    action = gangreclaim.new()
    action.parse_arguments({"maxDomains": 5, "allowWholeBundle": False}, {})
    assert action.max_domains == 5
    assert action.allow_whole_bundle is False


@pytest.mark.parametrize("value", [0, -1], ids=["zero", "negative"])
def test_parse_arguments_invalid_max_domains_falls_back_to_default(value: int) -> None:
    action = gangreclaim.new()
    action.parse_arguments({"maxDomains": value}, {})
    assert action.max_domains == gang_eviction.DEFAULT_MAX_DOMAINS == 8
    assert action.warnings  # Volcano logs a warning


def test_parse_arguments_defaults_and_allocate_error_cache() -> None:
    action = gangreclaim.new()
    action.parse_arguments({}, {"predicateErrorCacheEnable": False})
    assert (action.max_domains, action.allow_whole_bundle, action.enable_predicate_error_cache) == (
        8,
        True,
        False,
    )
    action = gangreclaim.new()
    action.parse_arguments({"maxDomains": "5", "allowWholeBundle": "false"}, {})
    # GetInt takes Go ints only; GetBool also parses strings.
    assert (action.max_domains, action.allow_whole_bundle) == (8, False)


# --------------------------------------------------------------------------- selectDomainBundles
def go_session(
    *, victim_annotations: dict[str, str] | None = None, victim_job_preemptable: bool = True
) -> tuple[Session, Any]:
    reclaimer_job = mk_job("reclaimer", "q1", min_available=0, namespace="ns", phase="Inqueue")
    mk_task(reclaimer_job, "reclaimer", "1", None, priority=100)
    victim_job = mk_job("victim", "q2", min_available=0, namespace="ns", phase="Running")
    victim_job.preemptable = victim_job_preemptable
    victim_job.annotations.update(victim_annotations or {})
    mk_task(victim_job, "victim", "1", None, priority=10, status=S.RUNNING, node="n1")
    other_job = mk_job("other", "q3", min_available=0, namespace="ns", phase="Running")
    other_job.preemptable = True
    mk_task(other_job, "other", "1", None, priority=10, status=S.RUNNING, node="n1")
    q2 = mk_queue("q2")
    q2.reclaimable = True
    q3 = mk_queue("q3")
    q3.reclaimable = False
    snap = mk_snapshot([mk_node("n1")], [reclaimer_job, victim_job, other_job], [mk_queue("q1"), q2, q3])
    ssn = open_session(snap, mk_conf("gangreclaim", [{"name": "test-reclaim"}]))

    def permit_all(_ctx: cb.EvictionContext, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        return list(candidates), cb.PERMIT

    ssn.register(cb.UNIFIED_EVICTABLE, "test-reclaim", permit_all)
    ssn.compile_chains()
    return ssn, ssn.jobs["ns/reclaimer"]


def domain_victims(ssn: Session, reclaimer: Any) -> list[str]:
    action = gangreclaim.new()
    action.allow_whole_bundle = True
    pending = list(reclaimer.tasks.values())
    bundles, _ = action.select_domain_bundles(ssn, reclaimer, list(ssn.node_list), sum_resreq(pending))
    return [t.uid for t in flatten_bundles(bundles)]


def test_select_domain_victims_reclaimable_cross_queue_only() -> None:
    ssn, reclaimer = go_session()
    assert domain_victims(ssn, reclaimer) == ["ns-victim"]


def test_select_domain_victims_respect_victim_job_preemptable() -> None:
    ssn, reclaimer = go_session(
        victim_annotations={"volcano.sh/preemptable": "false"}, victim_job_preemptable=False
    )
    assert domain_victims(ssn, reclaimer) == []


def test_select_domain_victims_allow_victim_job_when_preemptable_unset() -> None:
    # Unset PodGroup-level preemptability lets gang actions take the job, whatever JobInfo says.
    ssn, reclaimer = go_session(victim_job_preemptable=False)
    assert domain_victims(ssn, reclaimer) == ["ns-victim"]
