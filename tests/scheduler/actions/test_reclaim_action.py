"""The reclaim action: a starving job of an under-served queue takes room from over-using queues."""

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
    run_actions,
    statuses,
    task_of,
)

from fumarole.daemon.scheduler.actions import reclaim, victims
from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.queue import QueueInfo
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import PodFacts, TaskStatus

S = TaskStatus
# Volcano's built-in default tiers plus the reclaim action (every flag enabled, as in a file).
DEFAULT_TIERS = (
    ["priority", "gang", "conformance"],
    ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
)
CONF = mk_conf("reclaim", *DEFAULT_TIERS)


def hog_and_starver(
    *,
    hog_tasks: int = 4,
    starver_tasks: int = 1,
    starver_min: int = 1,
    starver_cpu: str = "1",
    queues: list[QueueInfo] | None = None,
    hog_status: TaskStatus = S.RUNNING,
    pod: PodFacts | None = None,
) -> ClusterSnapshot:
    """One 4-cpu node; queue `a` runs `hog_tasks` 1-cpu pods, queue `b` has a starving job."""
    hog = mk_job("hog", "a", min_available=1, phase="Running")
    add_tasks(hog, hog_tasks, "1", "1Gi", status=hog_status, node="n1")
    starver = mk_job("starver", "b", min_available=starver_min, phase="Inqueue")
    for i in range(starver_tasks):
        mk_task(starver, f"starver-{i}", starver_cpu, "1Gi", pod=pod)
    if queues is None:
        queues = [mk_queue("a"), mk_queue("b"), mk_queue("default")]
    return mk_snapshot([mk_node("n1", "4", "8Gi")], [hog, starver], queues)


def reclaimed(snap: ClusterSnapshot, conf: Any = CONF) -> Session:
    ssn = open_session(snap, conf)
    run_actions(ssn, "reclaim")
    return ssn


def evicted(ssn: Session) -> list[str]:
    return [e.task for e in ssn.evictions]


# --------------------------------------------------------------------------- the basic move
def test_starving_job_reclaims_from_overusing_queue_and_is_pipelined() -> None:
    ssn = reclaimed(hog_and_starver())
    # Tier 1 decides: gang lets hog lose pods while more than minMember stay ready (hog-0..2),
    # conformance permits all; reverse task order evicts the highest index first.
    assert evicted(ssn) == ["default/hog-2"]
    assert task_of(ssn, "default/hog", "hog-2").status is S.RELEASING
    assert task_of(ssn, "default/hog", "hog-3").status is S.RUNNING
    starver = task_of(ssn, "default/starver", "starver-0")
    assert starver.status is S.PIPELINED and starver.node_name == "n1"
    assert ssn.binds == {}  # reclaim never binds; the next session's allocate does


def test_eviction_reason_names_queue_preemptor_job_and_deciding_plugins() -> None:
    ssn = reclaimed(hog_and_starver())
    (ev,) = ssn.evictions
    assert ev.action == "reclaim"
    assert ev.node == "n1"
    # hog has 4 ready pods for minMember 1, so gang (tier 1) names victims and conformance agrees:
    # tier 1 decides and proportion is not asked (Volcano's tier rule).
    assert ev.reason == (
        "reclaimed for queue b by default/starver-0 of job default/starver; "
        "victims chosen by gang, conformance"
    )


def test_reason_names_proportion_when_gang_leaves_tier_one_undecided() -> None:
    # Every hog pod is its own minMember-1 job: gang refuses each (ready == minMember), which only
    # ends tier 1; proportion in tier 2 decides.
    jobs: list[JobInfo] = []
    for i in range(4):
        j = mk_job(f"hog{i}", "a", min_available=1, phase="Running")
        mk_task(j, f"hog{i}-0", "1", "1Gi", status=S.RUNNING, node="n1")
        jobs.append(j)
    starver = mk_job("starver", "b", phase="Inqueue")
    mk_task(starver, "starver-0", "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [*jobs, starver], [mk_queue("a"), mk_queue("b")])
    ssn = reclaimed(snap)
    assert len(ssn.evictions) == 1
    assert ssn.evictions[0].reason.endswith("; victims chosen by proportion")


def test_only_as_many_victims_as_the_request_needs() -> None:
    ssn = reclaimed(hog_and_starver(starver_cpu="2"))
    assert evicted(ssn) == ["default/hog-2", "default/hog-1"]


def test_idle_room_on_the_node_counts_before_evicting() -> None:
    # 3 of 4 cpus used by `a` (deserved 2): 1 idle cpu + one victim cover a 2-cpu request.
    ssn = reclaimed(hog_and_starver(hog_tasks=3, starver_cpu="2"))
    assert evicted(ssn) == ["default/hog-1"]


# --------------------------------------------------------------------------- who may be reclaimed
def test_non_reclaimable_queue_keeps_its_overuse() -> None:
    a = mk_queue("a")
    a.reclaimable = False
    ssn = reclaimed(hog_and_starver(queues=[a, mk_queue("b")]))
    assert ssn.evictions == []
    assert task_of(ssn, "default/starver", "starver-0").status is S.PENDING
    assert set(statuses(ssn, "default/hog").values()) == {S.RUNNING}


def test_reclaimable_unset_means_reclaimable() -> None:
    a = mk_queue("a")
    assert a.reclaimable is None
    assert reclaimed(hog_and_starver(queues=[a, mk_queue("b")])).evictions


def test_same_queue_tasks_are_never_reclaimed() -> None:
    hog = mk_job("hog", "a", min_available=1, phase="Running")
    add_tasks(hog, 4, "1", "1Gi", status=S.RUNNING, node="n1")
    starver = mk_job("starver", "a", phase="Inqueue")
    mk_task(starver, "starver-0", "1", "1Gi")
    other = mk_job("other", "b", phase="Inqueue")
    mk_task(other, "other-0", "1", "1Gi")
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [hog, starver, other], [mk_queue("a"), mk_queue("b")])
    ssn = reclaimed(snap)
    # `other` (queue b) reclaims from a; `starver` shares a's queue (and a is overused anyway).
    assert evicted(ssn) == ["default/hog-2"]
    assert task_of(ssn, "default/starver", "starver-0").status is S.PENDING
    assert task_of(ssn, "default/other", "other-0").status is S.PIPELINED


def test_bound_tasks_are_not_reclaimed_only_running_ones() -> None:
    ssn = reclaimed(hog_and_starver(hog_status=S.BOUND))
    assert ssn.evictions == []
    assert task_of(ssn, "default/starver", "starver-0").status is S.PENDING


def test_non_preemptable_tasks_are_not_reclaimed() -> None:
    snap = hog_and_starver()
    for t in snap.jobs["default/hog"].tasks.values():
        t.preemptable = False
    for node in snap.nodes:
        for t in node.tasks.values():
            t.preemptable = False
    assert reclaimed(snap).evictions == []


PROPORTION_DECIDES = mk_conf("reclaim", [{"name": "gang", "enableReclaimable": False}], ["proportion"])


def test_queue_within_its_share_is_not_a_victim() -> None:
    # Only proportion votes.  `a` runs 2 pods (its deserved 2 cpu) on a 3-cpu node: no victim.
    hog = mk_job("hog", "a", min_available=1, phase="Running")
    add_tasks(hog, 2, "1", "1Gi", status=S.RUNNING, node="n1")
    starver = mk_job("starver", "b", phase="Inqueue")
    mk_task(starver, "starver-0", "2", "1Gi")
    snap = mk_snapshot([mk_node("n1", "3", "8Gi")], [hog, starver], [mk_queue("a"), mk_queue("b")])
    ssn = reclaimed(snap, PROPORTION_DECIDES)
    assert ssn.evictions == []
    assert task_of(ssn, "default/starver", "starver-0").status is S.PENDING


def test_proportion_names_victims_only_while_the_queue_is_over_deserved() -> None:
    # a runs 4 x 1 cpu for a deserved 2: walking a's pods, the first two are victims.
    ssn = reclaimed(hog_and_starver(starver_cpu="2"), PROPORTION_DECIDES)
    assert evicted(ssn) == ["default/hog-1", "default/hog-0"]
    assert ssn.evictions[0].reason.endswith("victims chosen by proportion")


# --------------------------------------------------------------------------- preemptor checks
def test_preemptive_check_skips_a_task_beyond_the_queues_deserved_share() -> None:
    # b deserves 2 cpu; a 3-cpu task fails proportion's Preemptive check and is skipped.
    ssn = reclaimed(hog_and_starver(starver_cpu="3"))
    assert ssn.evictions == []
    uid = task_of(ssn, "default/starver", "starver-0").uid
    assert "Preemptive" in ssn.skip_reasons[uid]


def test_preemptive_false_from_any_plugin_skips_the_task() -> None:
    ssn = open_session(hog_and_starver(), CONF)
    asked: list[str] = []

    def refuse(queue: QueueInfo, task: Any) -> bool:
        asked.append(queue.name)
        return False

    ssn.register(cb.PREEMPTIVE, "proportion", refuse)
    ssn.compile_chains()
    run_actions(ssn, "reclaim")
    assert asked == ["b"]
    assert ssn.evictions == []


def test_preemption_policy_never_is_skipped() -> None:
    ssn = reclaimed(hog_and_starver(pod=PodFacts(preemption_policy="Never")))
    assert ssn.evictions == []
    uid = task_of(ssn, "default/starver", "starver-0").uid
    assert "Never" in ssn.skip_reasons[uid]


def test_overused_reclaiming_queue_is_skipped() -> None:
    # b already runs 2 cpu (its deserved share) and still has a starving job.
    snap = hog_and_starver(hog_tasks=2)
    b_running = mk_job("b-running", "b", phase="Running")
    add_tasks(b_running, 2, "1", "1Gi", status=S.RUNNING, node="n1")
    snap = mk_snapshot(snap.nodes, [*snap.jobs.values(), b_running], [mk_queue("a"), mk_queue("b")])
    ssn = reclaimed(snap)
    assert ssn.evictions == []


def test_job_that_is_not_starving_does_not_reclaim() -> None:
    # minMember 1 and one task already running: gang says not starving.
    snap = hog_and_starver(starver_tasks=2)
    job = snap.jobs["default/starver"]
    t = task_of_job(job, "starver-0")
    job.update_task_status(t, S.RUNNING)
    t.node_name = "n1"
    snap.nodes[0].add_task(t)
    ssn = reclaimed(snap)
    assert ssn.evictions == []


def task_of_job(job: JobInfo, name: str) -> Any:
    return next(t for t in job.tasks.values() if t.name == name)


def test_pending_podgroup_does_not_reclaim() -> None:
    snap = hog_and_starver()
    snap.jobs["default/starver"].status.phase = "Pending"
    assert reclaimed(snap).evictions == []


# --------------------------------------------------------------------------- the statement
def test_statement_is_discarded_when_the_job_cannot_pipeline() -> None:
    # A gang of 3 x 1 cpu in b (deserved 2): two tasks find victims, the third fails Preemptive,
    # gang's JobPipelined refuses (2 < 3), so every eviction is undone.
    ssn = reclaimed(hog_and_starver(starver_tasks=3, starver_min=3))
    assert ssn.evictions == []
    assert set(statuses(ssn, "default/hog").values()) == {S.RUNNING}
    assert set(statuses(ssn, "default/starver").values()) == {S.PENDING}
    node = ssn.nodes["n1"]
    assert node.releasing.cpu == 0 and node.pipelined.cpu == 0
    # proportion's figures are restored by the discard (un-evict re-allocates, un-pipeline frees).
    attrs = ssn.plugins["proportion"].attrs  # type: ignore[attr-defined]
    assert attrs["a"].allocated.cpu == 4000
    assert attrs["b"].allocated.cpu == 0
    # the discarded pipelining is remembered as the tasks' last transaction
    txs = sorted(str(t.last_tx) for t in ssn.jobs["default/starver"].tasks.values())
    assert txs == ["(<TaskStatus.PIPELINED: 4>, 'n1')"] * 2 + ["None"]


def test_statement_is_committed_when_the_gang_can_pipeline() -> None:
    ssn = reclaimed(hog_and_starver(starver_tasks=2, starver_min=2))
    assert evicted(ssn) == ["default/hog-2", "default/hog-1"]
    assert set(statuses(ssn, "default/starver").values()) == {S.PIPELINED}


def test_evictions_on_a_node_that_does_not_fit_are_undone() -> None:
    # n1: a's 2 x 1-cpu pods on a 2-cpu node; n2: a's 2 x 2-cpu pods on a 4-cpu node.  The starver
    # needs 3 cpu: n1 cannot hold it even empty; n2 can once both pods go.
    hog = mk_job("hog", "a", min_available=1, phase="Running")
    add_tasks(hog, 2, "1", "1Gi", status=S.RUNNING, node="n1", prefix="small")
    add_tasks(hog, 2, "2", "1Gi", status=S.RUNNING, node="n2", prefix="big")
    starver = mk_job("starver", "b", phase="Inqueue")
    mk_task(starver, "starver-0", "3", "1Gi")
    nodes = [mk_node("n1", "2", "4Gi"), mk_node("n2", "4", "8Gi")]
    q = [mk_queue("a"), mk_queue("b")]
    ssn = reclaimed(mk_snapshot(nodes, [hog, starver], q), mk_conf("reclaim", ["gang"], ["proportion"]))
    assert sorted(evicted(ssn)) == ["default/big-0", "default/big-1"]
    assert task_of(ssn, "default/starver", "starver-0").node_name == "n2"
    assert ssn.nodes["n1"].releasing.cpu == 0


def test_victims_from_several_queues_go_in_reverse_queue_order() -> None:
    # a and c both over-use a 5-cpu node (deserved a 2, c 2; shares 1.5 and 1): a would be served
    # after c, so its pods go first.
    a_job = mk_job("ajob", "a", min_available=1, phase="Running")
    add_tasks(a_job, 3, "1", "1Gi", status=S.RUNNING, node="n1")
    c_job = mk_job("cjob", "c", min_available=1, phase="Running")
    add_tasks(c_job, 2, "1", "1Gi", status=S.RUNNING, node="n1")
    starver = mk_job("starver", "b", phase="Inqueue")
    mk_task(starver, "starver-0", "1", "1Gi")
    snap = mk_snapshot(
        [mk_node("n1", "5", "8Gi")], [a_job, c_job, starver], [mk_queue("a"), mk_queue("b"), mk_queue("c")]
    )
    ssn = reclaimed(snap, mk_conf("reclaim", ["gang"], ["proportion"]))
    assert evicted(ssn) == ["default/ajob-1"]


def test_decisions_are_stable_across_runs() -> None:
    outs = {tuple(evicted(reclaimed(hog_and_starver(starver_cpu="2")))) for _ in range(3)}
    assert len(outs) == 1


# --------------------------------------------------------------------------- helpers
def test_predicate_for_preempt_tolerates_plain_unschedulable_only() -> None:
    from fumarole.daemon.scheduler.model.fit import Code, fit_error

    snap = hog_and_starver()
    ssn = open_session(snap, CONF)
    task = task_of(ssn, "default/starver", "starver-0")
    node = ssn.nodes["n1"]
    verdicts = {
        Code.UNSCHEDULABLE: True,
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE: False,
        Code.ERROR: False,
        Code.WAIT: False,
        Code.SKIP: False,
    }
    for code, want in verdicts.items():
        ssn.register(cb.PREDICATE, "predicates", lambda t, n, c=code: fit_error("ns", "p", n.name, c, "x"))
        ssn.compile_chains()
        assert (victims.predicate_for_preempt(ssn, task, node) is None) is want, code
    ssn.register(cb.PREDICATE, "predicates", lambda t, n: RuntimeError("boom"))
    ssn.compile_chains()
    assert victims.predicate_for_preempt(ssn, task, node) is not None


def test_unresolvable_node_from_an_earlier_action_is_not_tried() -> None:
    from fumarole.daemon.scheduler.model.fit import Code, FitErrors, fit_error

    snap = hog_and_starver()
    ssn = open_session(snap, CONF)
    task = task_of(ssn, "default/starver", "starver-0")
    fe = FitErrors()
    fe.set_node_error("n1", fit_error("default", "starver-0", "n1", Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "x"))
    ssn.jobs["default/starver"].nodes_fit_errors[task.uid] = fe
    assert victims.nodes_without_unresolvable(ssn, task) == []
    run_actions(ssn, "reclaim")
    assert ssn.evictions == []


def test_predicate_error_cache_argument_is_accepted() -> None:
    conf = mk_conf(
        "reclaim",
        *DEFAULT_TIERS,
        configurations=[{"name": "reclaim", "arguments": {"predicateErrorCacheEnable": False}}],
    )
    ssn = open_session(hog_and_starver(), conf)
    action = reclaim.new()
    ssn.current_action = "reclaim"
    action.execute(ssn)
    assert action.enable_predicate_error_cache is False
    assert evicted(ssn) == ["default/hog-2"]
