"""The gangreclaim action end to end on a session: bundles, whole-gang eviction, checks, reasons."""

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
    rl,
    run_actions,
    statuses,
)

from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import PodFacts, TaskStatus

S = TaskStatus
TIERS = (
    ["priority", "gang", "conformance"],
    ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
)
CONF = mk_conf("gangreclaim", *TIERS)


def cluster(
    *,
    a_min: int = 2,
    b_tasks: int = 1,
    b_min: int = 1,
    queues: list[QueueInfo] | None = None,
    pod: PodFacts | None = None,
) -> ClusterSnapshot:
    """One 8-cpu node filled by queue a's gang (4 x 2 cpu); queue b's gang waits (2-cpu pods)."""
    a = mk_job("a-job", "a", min_available=a_min, phase="Running")
    add_tasks(a, 4, "2", "1Gi", status=S.RUNNING, node="n1")
    b = mk_job("b-job", "b", min_available=b_min, phase="Inqueue")
    for i in range(b_tasks):
        mk_task(b, f"b-job-{i}", "2", "1Gi", pod=pod)
    return mk_snapshot([mk_node("n1", "8", "16Gi")], [a, b], queues or [mk_queue("a"), mk_queue("b")])


def gang_reclaimed(snap: ClusterSnapshot, conf: Any = CONF) -> Session:
    ssn = open_session(snap, conf)
    run_actions(ssn, "gangreclaim")
    return ssn


def evicted(ssn: Session) -> list[str]:
    return sorted(e.task for e in ssn.evictions)


def test_safe_bundle_is_evicted_as_a_unit() -> None:
    # a-job has 4 ready for minMember 2: its two lowest (priority, uid) tasks form the safe bundle.
    # The bundle goes whole although one task (2 cpu) would have covered the need: Volcano's rule.
    ssn = gang_reclaimed(cluster())
    assert evicted(ssn) == ["default/a-job-0", "default/a-job-1"]
    assert statuses(ssn, "default/b-job") == {"b-job-0": S.PIPELINED}
    assert statuses(ssn, "default/a-job")["a-job-2"] is S.RUNNING


def test_reason_names_queue_job_and_unified_evictable_plugins() -> None:
    ssn = gang_reclaimed(cluster())
    reasons = {e.reason for e in ssn.evictions}
    assert reasons == {
        "reclaimed for queue b by job default/b-job (gang); victims chosen by priority, gang, conformance"
    }
    assert {e.action for e in ssn.evictions} == {"gangreclaim"}


def test_whole_bundle_breaks_the_victim_gang() -> None:
    # minMember 4: no task is safe, the whole job is one bundle and goes entirely.
    ssn = gang_reclaimed(cluster(a_min=4))
    assert evicted(ssn) == [f"default/a-job-{i}" for i in range(4)]


def test_allow_whole_bundle_false_keeps_gangs_intact() -> None:
    conf = mk_conf(
        "gangreclaim",
        *TIERS,
        configurations=[{"name": "gangreclaim", "arguments": {"allowWholeBundle": False}}],
    )
    ssn = gang_reclaimed(cluster(a_min=4), conf)
    assert ssn.evictions == []
    assert statuses(ssn, "default/b-job") == {"b-job-0": S.PENDING}


def test_non_reclaimable_queue_is_left_alone() -> None:
    a = mk_queue("a")
    a.reclaimable = False
    ssn = gang_reclaimed(cluster(queues=[a, mk_queue("b")]))
    assert ssn.evictions == []


def test_preemptive_is_asked_for_the_whole_pending_set() -> None:
    # b deserves its request only up to half the node (4 cpu); three 2-cpu pods ask 6 cpu, and
    # proportion's Preemptive refuses the set as a whole.
    ssn = gang_reclaimed(cluster(b_tasks=3, b_min=3))
    assert ssn.evictions == []
    assert all("Preemptive" in ssn.skip_reasons[t.uid] for t in ssn.jobs["default/b-job"].tasks.values())


def test_gang_of_two_reclaims_and_pipelines_both() -> None:
    ssn = gang_reclaimed(cluster(b_tasks=2, b_min=2))
    assert evicted(ssn) == ["default/a-job-0", "default/a-job-1"]
    assert set(statuses(ssn, "default/b-job").values()) == {S.PIPELINED}


def test_nothing_happens_when_the_dry_run_cannot_place_the_job() -> None:
    # The pending pod selects a zone no node has: the dry run fails, nothing is evicted and the
    # session is left exactly as it was.
    ssn = gang_reclaimed(cluster(pod=PodFacts(node_selector={"zone": "nowhere"})))
    assert ssn.evictions == []
    assert set(statuses(ssn, "default/a-job").values()) == {S.RUNNING}
    node = ssn.nodes["n1"]
    assert node.releasing.cpu == 0 and node.pipelined.cpu == 0
    attrs = ssn.plugins["proportion"].attrs  # type: ignore[attr-defined]
    assert attrs["a"].allocated.cpu == 8000 and attrs["b"].allocated.cpu == 0


def test_overused_queue_does_not_reclaim() -> None:
    # b (capability 4 cpu, 2Gi, 2 pods) already runs 2 x (2 cpu, 1Gi) on n2: deserved == allocated on every
    # dimension, so b is overused and its job is never considered (no Preemptive verdict either).
    b = mk_queue("b", capability=rl(cpu="4", memory="2Gi", pods="2"))
    snap = cluster(queues=[mk_queue("a"), b])
    running = mk_job("b-run", "b", phase="Running")
    add_tasks(running, 2, "2", "1Gi", status=S.RUNNING, node="n2")
    snap = mk_snapshot(
        [*snap.nodes, mk_node("n2", "4", "16Gi")], [*snap.jobs.values(), running], [mk_queue("a"), b]
    )
    ssn = open_session(snap, CONF)
    assert ssn.overused(ssn.queues["b"]) is True
    run_actions(ssn, "gangreclaim")
    assert ssn.evictions == []
    assert ssn.skip_reasons == {}


def test_bound_tasks_are_not_victims() -> None:
    snap = cluster()
    job = snap.jobs["default/a-job"]
    for t in list(job.tasks.values()):
        job.update_task_status(t, S.BOUND)
    node = snap.nodes[0]
    for t in node.tasks.values():
        t.status = S.BOUND
    assert gang_reclaimed(snap).evictions == []


def test_invalid_max_domains_is_a_warning() -> None:
    conf = mk_conf(
        "gangreclaim", *TIERS, configurations=[{"name": "gangreclaim", "arguments": {"maxDomains": 0}}]
    )
    ssn = gang_reclaimed(cluster(), conf)
    assert any("maxDomains" in w for w in ssn.warnings)
    assert evicted(ssn) == ["default/a-job-0", "default/a-job-1"]
