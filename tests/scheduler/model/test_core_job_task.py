"""JobInfo / TaskInfo: status index, gang counters, per-role checks, fit errors, pod status."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import add_tasks, mk_job, mk_task, pod_req

from fumarole.daemon.scheduler.model.fit import Code, FitErrors, fit_error
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.task import TaskStatus, status_from_pod

S = TaskStatus


# --------------------------------------------------------------------------- status_from_pod
@pytest.mark.parametrize(
    ("phase", "node", "deleting", "expected"),
    [
        ("Running", "n1", False, S.RUNNING),
        ("Running", "n1", True, S.RELEASING),
        ("Pending", "", False, S.PENDING),
        ("Pending", "n1", False, S.BOUND),
        ("Pending", "", True, S.RELEASING),
        ("Pending", "n1", True, S.RELEASING),
        ("Unknown", "n1", False, S.UNKNOWN),
        ("Succeeded", "n1", False, S.SUCCEEDED),
        ("Failed", "n1", False, S.FAILED),
        ("Weird", "", False, S.UNKNOWN),
    ],
)
def test_status_from_pod(phase: str, node: str, deleting: bool, expected: TaskStatus) -> None:
    assert status_from_pod(phase, node, deleting) is expected


def test_task_status_bits_and_labels() -> None:
    assert [s.value for s in S] == [1 << i for i in range(10)]
    assert S.PIPELINED.label == "Pipelined"
    assert S.PENDING.label == "Pending"


def test_task_best_effort_ignores_pods() -> None:
    j = mk_job("j")
    be = mk_task(j, "j-be-0", None, None)
    normal = mk_task(j, "j-n-0", "100m", None)
    assert be.resreq.scalars == {"pods": 1}
    assert be.best_effort
    assert not normal.best_effort


# --------------------------------------------------------------------------- counters
def test_counters_follow_status_transitions() -> None:
    j = mk_job("j", min_available=3)
    tasks = add_tasks(j, 5)
    assert (j.ready_task_num(), j.waiting_task_num(), j.valid_task_num()) == (0, 0, 5)
    assert j.count(S.PENDING) == 5
    j.update_task_status(tasks[0], S.ALLOCATED)
    j.update_task_status(tasks[1], S.BINDING)
    j.update_task_status(tasks[2], S.PIPELINED)
    j.update_task_status(tasks[3], S.FAILED)
    assert j.ready_task_num() == 2
    assert j.waiting_task_num() == 1
    # valid = allocated statuses + Succeeded + Pipelined + Pending (Failed is not valid)
    assert j.valid_task_num() == 4
    assert not j.is_ready()
    assert j.is_pipelined()
    assert not j.is_starving()
    j.update_task_status(tasks[2], S.PENDING)
    assert j.is_starving()
    assert not j.is_pipelined()
    j.update_task_status(tasks[4], S.SUCCEEDED)
    assert j.ready_task_num() == 3
    assert j.is_ready()
    # the index holds each task exactly once, under its current status
    assert sum(len(b) for b in j.index.values()) == 5
    assert S.PIPELINED not in j.index  # empty buckets are dropped


def test_allocated_and_total_request_tracking() -> None:
    j = mk_job("j")
    a = mk_task(j, "j-a-0", "1", "1Gi", status=S.RUNNING, node="n1")
    b = mk_task(j, "j-b-0", "2", "2Gi")
    assert j.allocated == pod_req("1", "1Gi")
    assert j.total_request == pod_req("3", "3Gi").clone().add(Resource(0, 0, {"pods": 1}))
    j.update_task_status(b, S.ALLOCATED)
    assert j.allocated.cpu == 3000
    j.update_task_status(a, S.RELEASING)
    assert j.allocated.cpu == 2000
    j.delete_task(b)
    assert j.allocated.cpu == 0
    assert j.total_request.cpu == 1000
    assert set(j.tasks) == {a.uid}


def test_pending_best_effort_counts_into_ready_and_pipelined_not_starving() -> None:
    j = mk_job("j", min_available=2)
    mk_task(j, "j-be-0", None, None)
    t = mk_task(j, "j-x-0", "1", "1Gi")
    assert j.pending_best_effort_task_num() == 1
    assert not j.is_ready()
    j.update_task_status(t, S.ALLOCATED)
    assert j.is_ready()  # 1 ready + 1 pending best-effort
    assert j.is_starving()  # best-effort is not counted by IsStarving
    j.update_task_status(t, S.PIPELINED)
    assert not j.is_ready()
    assert j.is_pipelined()


def test_is_pending() -> None:
    assert mk_job("a", phase="").is_pending()
    assert mk_job("b", phase="Pending").is_pending()
    assert not mk_job("c", phase="Inqueue").is_pending()
    j = mk_job("d", phase="Running")
    j.has_pod_group = False
    assert j.is_pending()


def test_clone_is_independent() -> None:
    j = mk_job("j", task_min={"ps": 1})
    t = mk_task(j, "j-0", role="ps")
    c = j.clone()
    c.update_task_status(c.tasks[t.uid], S.ALLOCATED)
    c.task_min_available["ps"] = 5
    c.status.phase = "Running"
    assert t.status is S.PENDING
    assert j.ready_task_num() == 0
    assert j.task_min_available == {"ps": 1}
    assert j.status.phase == "Inqueue"


def test_scheduled_and_releasing_counts() -> None:
    j = mk_job("j")
    mk_task(j, "j-0", status=S.RUNNING, node="n1")
    mk_task(j, "j-1", status=S.BOUND, node="n1")
    mk_task(j, "j-2", status=S.SUCCEEDED, node="n1")
    mk_task(j, "j-3", status=S.BINDING, node="n1")
    mk_task(j, "j-4", status=S.RELEASING, node="n1")
    mk_task(j, "j-5", status=S.RELEASING)
    assert j.scheduled_task_num() == 3
    assert j.releasing_scheduled_task_num() == 1
    assert j.allocated_task_num() == 3  # Running, Bound, Binding


# --------------------------------------------------------------------------- per-role checks
def role_job(min_available: int, task_min: dict[str, int]):
    return mk_job("r", min_available=min_available, task_min=task_min)


def test_check_task_valid() -> None:
    j = role_job(3, {"ps": 1, "worker": 2})
    mk_task(j, "r-ps-0", role="ps")
    mk_task(j, "r-worker-0", role="worker")
    w1 = mk_task(j, "r-worker-1", role="worker", status=S.FAILED)
    assert not j.check_task_valid()
    j.update_task_status(w1, S.SUCCEEDED)
    assert j.check_task_valid()
    j.update_task_status(w1, S.PIPELINED)
    assert j.check_task_valid()


def test_role_with_min_zero_is_always_valid() -> None:
    j = role_job(1, {"ps": 1, "worker": 0})
    mk_task(j, "r-ps-0", role="ps")
    assert j.check_task_valid()
    assert not j.check_task_ready()


def test_role_checks_skipped_when_min_member_below_sum_of_role_minimums() -> None:
    j = role_job(2, {"ps": 2, "worker": 2})
    mk_task(j, "r-ps-0", role="ps", status=S.FAILED)
    assert j.check_task_valid()
    assert j.check_task_ready()
    assert j.check_task_pipelined()
    assert j.check_task_starving()  # Volcano returns true (starving) when skipped


def test_check_task_ready_pipelined_starving() -> None:
    j = role_job(3, {"ps": 1, "worker": 2})
    ps = mk_task(j, "r-ps-0", role="ps")
    w0 = mk_task(j, "r-worker-0", role="worker")
    w1 = mk_task(j, "r-worker-1", role="worker")
    assert not j.check_task_ready()
    assert not j.check_task_pipelined()
    assert j.check_task_starving()
    j.update_task_status(ps, S.ALLOCATED)
    j.update_task_status(w0, S.RUNNING)
    j.update_task_status(w1, S.PIPELINED)
    assert not j.check_task_ready()  # pipelined does not count for ready
    assert j.check_task_pipelined()
    assert not j.check_task_starving()
    j.update_task_status(w1, S.SUCCEEDED)
    assert j.check_task_ready()


def test_pending_best_effort_counts_for_role_ready_but_not_starving() -> None:
    j = role_job(2, {"ps": 1, "worker": 1})
    mk_task(j, "r-ps-0", None, None, role="ps")
    w = mk_task(j, "r-worker-0", role="worker", status=S.ALLOCATED, node="n1")
    assert w.status is S.ALLOCATED
    assert j.check_task_ready()
    assert j.check_task_pipelined()
    assert j.check_task_starving()


def test_no_role_minimums() -> None:
    j = mk_job("j", min_available=1)
    mk_task(j, "j-0")
    assert j.check_task_valid() and j.check_task_ready() and j.check_task_pipelined()
    assert not j.check_task_starving()


# --------------------------------------------------------------------------- need_continue_allocating
def fail(j, t) -> None:
    j.nodes_fit_errors[t.uid] = FitErrors()


def test_need_continue_false_when_min_equals_task_count() -> None:
    j = mk_job("j", min_available=2)
    a, _ = add_tasks(j, 2)
    fail(j, a)
    assert not j.need_continue_allocating()


def test_need_continue_per_role_minimum() -> None:
    j = role_job(2, {"ps": 1, "worker": 1})
    add_tasks(j, 2, prefix="r-ps", role="ps")
    w0, w1 = add_tasks(j, 2, prefix="r-worker", role="worker")
    fail(j, w0)
    assert j.task_has_fit_errors(w1)
    assert not j.need_continue_allocating()  # failed role below its minimum
    j.update_task_status(w1, S.ALLOCATED)
    assert j.need_continue_allocating()  # failed role already has its minimum


def test_need_continue_failed_role_without_minimum() -> None:
    j = role_job(2, {"ps": 2})
    add_tasks(j, 2, prefix="r-ps", role="ps")
    (w,) = add_tasks(j, 1, prefix="r-worker", role="worker")
    fail(j, w)
    assert j.need_continue_allocating()


def test_need_continue_when_role_checks_skipped_counts_pending_of_healthy_roles() -> None:
    j = role_job(3, {"ps": 2, "worker": 2})
    add_tasks(j, 2, prefix="r-ps", role="ps")
    w0, w1 = add_tasks(j, 2, prefix="r-worker", role="worker")
    fail(j, w0)
    # ready 0 + pending of roles without fit errors (ps: 2) = 2 < 3
    assert not j.need_continue_allocating()
    j.update_task_status(w1, S.ALLOCATED)
    # ready 1 + 2 = 3 >= 3
    assert j.need_continue_allocating()


def test_task_without_role_never_uses_the_role_cache() -> None:
    j = mk_job("j", min_available=1)
    a, b = add_tasks(j, 2)
    fail(j, a)
    assert not j.task_has_fit_errors(b)
    assert j.fit_failed_roles() == {""}


# --------------------------------------------------------------------------- fit errors
def test_fit_errors_message_histogram() -> None:
    fe = FitErrors()
    fe.set_node_error("n1", fit_error("ns", "p", "n1", Code.UNSCHEDULABLE, "Insufficient cpu"))
    fe.set_node_error("n2", fit_error("ns", "p", "n2", Code.UNSCHEDULABLE, "Insufficient cpu"))
    fe.set_node_error("n3", fit_error("ns", "p", "n3", Code.UNSCHEDULABLE, "node(s) pod number exceeded"))
    assert fe.message() == "0/3 nodes are unavailable: 1 node(s) pod number exceeded, 2 Insufficient cpu."
    only = FitErrors()
    assert only.message() == "0/0 nodes are unavailable"
    only.set_error("Task t with role spec r has already predicated failed, skip")
    assert only.message() == "Task t with role spec r has already predicated failed, skip"


def test_node_fit_error_text() -> None:
    fe = fit_error("ns", "p-0", "n1", Code.UNSCHEDULABLE, "Insufficient cpu", "Insufficient memory")
    assert str(fe) == "task ns/p-0 on node n1 fit failed: Insufficient cpu, Insufficient memory"


def test_set_node_error_wraps_plain_errors() -> None:
    fe = FitErrors()
    fe.set_node_error("n1", ValueError("boom"))
    assert fe.nodes["n1"].codes() == {Code.ERROR}
    assert fe.message() == "0/1 nodes are unavailable: 1 boom."


def test_job_fit_error_head_and_status_histogram() -> None:
    j = mk_job("j", min_available=3)
    add_tasks(j, 2)
    mk_task(j, "j-r-0", status=S.RUNNING, node="n1")
    assert j.fit_error().startswith("pod group is not ready, 1 Running, 2 Pending, 3 minAvailable")
    j.job_fit_errors = "queue resource quota insufficient"
    assert j.fit_error().endswith(". Origin reason is: queue resource quota insufficient")
    j2 = mk_job("k", min_available=1)
    mk_task(j2, "k-0", status=S.RUNNING, node="n1")
    assert j2.fit_error() == "pod group is ready, 1 Running, 1 minAvailable"


def test_job_fit_error_pending_histogram_follows_volcano() -> None:
    j = mk_job("j", min_available=3)
    a, _b, c = add_tasks(j, 3)
    fe = FitErrors()
    fe.set_node_error("n1", fit_error("default", a.name, "n1", Code.UNSCHEDULABLE, "Insufficient cpu"))
    j.nodes_fit_errors[a.uid] = fe
    c.last_tx = (S.ALLOCATED, "n1")
    assert j.fit_error() == (
        "pod group is not ready, 3 Pending, 3 minAvailable; Pending: 1 Schedulable, 2 Unschedulable. "
        "Origin reason is j-0: 0/1 nodes are unavailable: 1 Insufficient cpu."
    )
