"""The sla plugin: Go duration parsing, waiting times from arguments and annotations, votes and order."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import add_tasks, mk_conf, mk_job, mk_node, mk_snapshot, open_session, rl, run

from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.plugins.sla import GoDurationError, parse_go_duration

S = 1_000_000_000
T0 = 1_700_000_000.0  # creation time of the jobs built here


def sla_conf(args: dict[str, Any] | None = None, *extra_tiers: list[Any], **flags: Any) -> Any:
    p: dict[str, Any] = {"name": "sla", **flags}
    if args is not None:
        p["arguments"] = args
    return mk_conf("enqueue, allocate", [p], *extra_tiers)


def job(
    name: str, *, wait: str | None = None, key: str = "volcano.sh/sla-waiting-time", **kw: Any
) -> JobInfo:
    j = mk_job(name, creation=kw.pop("creation", T0), **kw)
    if wait is not None:
        j.annotations[key] = wait
    return j


# ---------------------------------------- time.ParseDuration
@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("0", 0),
        ("-0", 0),
        ("3m", 180 * S),
        ("1h2m3s4ms5us6ns", 3723 * S + 4_005_006),
        ("1h2m3s4ms5µs6ns", 3723 * S + 4_005_006),
        ("1h2m3s4ms5μs6ns", 3723 * S + 4_005_006),
        ("1.5h", 5400 * S),
        (".5s", S // 2),
        ("5.s", 5 * S),
        ("+600s", 600 * S),
        ("-1m", -60 * S),
        ("1m1m", 120 * S),
        ("9223372036854775807ns", (1 << 63) - 1),
        ("2562047h", 2562047 * 3600 * S),
        ("0.000000001s", 1),
        ("1.0000000000000000000001s", S),
    ],
)
def test_go_duration_accepts(text: str, nanos: int) -> None:
    assert parse_go_duration(text) == nanos


@pytest.mark.parametrize(
    "text",
    ["", "1", "s", ".", ".s", "1 s", " 1s", "1x", "1S", "600abcde", "2562048h", "9223372036854775808ns", "-"],
)
def test_go_duration_rejects(text: str) -> None:
    with pytest.raises(GoDurationError):
        parse_go_duration(text)


# ---------------------------------------- sla_test.go TestSlaPlugin
@pytest.mark.parametrize(
    ("case", "args", "expected_order", "expected_enqueueable"),
    [
        ("sla normal placement", {"sla-waiting-time": "3m"}, True, True),
        ("sla error type placement", {"sla-waiting-time": 1}, False, True),
        ("none placement", {}, False, True),
    ],
)
def test_volcano_sla_plugin_table(
    case: str, args: dict[str, Any], expected_order: bool, expected_enqueueable: bool
) -> None:
    # job1 has no waiting time of its own; job2 has 1h.  Both carry the zero creation time.
    job1 = job("job1", creation=0.0)
    add_tasks(job1, 3)
    job2 = job("job2", wait="1h", creation=0.0)
    add_tasks(job2, 2)
    snap = mk_snapshot([mk_node("n1")], [job1, job2])
    snap.now = T0
    ssn = open_session(snap, sla_conf(args))
    j1, j2 = ssn.jobs[job1.uid], ssn.jobs[job2.uid]
    assert ssn.job_order_fn(j1, j2) is expected_order, case
    assert ssn.job_enqueueable(j1) is expected_enqueueable, case


def test_bad_argument_draws_a_warning() -> None:
    snap = mk_snapshot([mk_node("n1")], [])
    for bad in (1, "0s", "-3m", "soon"):
        ssn = open_session(snap, sla_conf({"sla-waiting-time": bad}))
        assert ssn.plugins["sla"].waiting_time is None
        assert any("sla-waiting-time" in w for w in ssn.warnings), bad
    ssn = open_session(snap, sla_conf({"sla-waiting-time": "90s"}))
    assert ssn.plugins["sla"].waiting_time == 90 * S
    assert not ssn.warnings


# ---------------------------------------- waiting time sources
def test_job_annotation_overrides_argument_and_bare_key_is_the_fallback() -> None:
    own = job("own", wait="10m")
    bare = job("bare", wait="20m", key="sla-waiting-time")
    bad_then_bare = job("mixed", wait="nope")
    bad_then_bare.annotations["sla-waiting-time"] = "30m"
    nothing = job("nothing")
    zero = job("zero", wait="0s")
    snap = mk_snapshot([mk_node("n1")], [own, bare, bad_then_bare, nothing, zero])
    ssn = open_session(snap, sla_conf({"sla-waiting-time": "1h"}))
    p = ssn.plugins["sla"]
    assert p.waiting_of(ssn.jobs[own.uid]) == 600 * S
    assert p.waiting_of(ssn.jobs[bare.uid]) == 1200 * S
    assert p.waiting_of(ssn.jobs[bad_then_bare.uid]) == 1800 * S
    assert p.waiting_of(ssn.jobs[nothing.uid]) == 3600 * S
    assert p.waiting_of(ssn.jobs[zero.uid]) == 3600 * S  # not positive: ignored
    assert any("default/mixed" in w for w in ssn.warnings)
    assert any("default/zero" in w for w in ssn.warnings)


# ---------------------------------------- votes
def _enqueue_vote_session(now_offset: float, *extra_tiers: list[Any]) -> Any:
    j = job("late", wait="10m", min_resources=rl(cpu="100"), phase="Pending")
    add_tasks(j, 1)
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [j])
    snap.now = T0 + now_offset
    return open_session(snap, sla_conf(None, *extra_tiers)), j.uid


@pytest.mark.parametrize(("offset", "expected"), [(599.999, False), (600.0, True), (7200.0, True)])
def test_expired_waiting_time_permits_over_a_later_tier_reject(offset: float, expected: bool) -> None:
    # overcommit (tier 2) rejects 100 cpu on a 4-cpu cluster; a Permit in tier 1 ends the vote.
    ssn, uid = _enqueue_vote_session(offset, ["overcommit"])
    assert ssn.job_enqueueable(ssn.jobs[uid]) is expected


def test_reject_in_the_same_tier_still_wins() -> None:
    j = job("late", wait="10m", min_resources=rl(cpu="100"), phase="Pending")
    add_tasks(j, 1)
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [j])
    snap.now = T0 + 3600
    ssn = open_session(snap, mk_conf("enqueue", [{"name": "sla"}, {"name": "overcommit"}]))
    assert ssn.job_enqueueable(ssn.jobs[j.uid]) is False


def test_pipelined_vote_overrides_gang_of_a_later_tier_only_after_expiry() -> None:
    def session(offset: float) -> Any:
        j = job("gang", wait="1m", min_available=3)
        add_tasks(j, 3)
        snap = mk_snapshot([mk_node("n1")], [j])
        snap.now = T0 + offset
        return open_session(snap, mk_conf("allocate", ["sla"], ["gang"])), j.uid

    ssn, uid = session(30)
    assert ssn.job_pipelined(ssn.jobs[uid]) is False  # sla abstains, gang rejects (nothing placed)
    ssn, uid = session(60)
    assert ssn.job_pipelined(ssn.jobs[uid]) is True


def test_flags_gate_the_votes() -> None:
    ssn, uid = _enqueue_vote_session(3600, ["overcommit"])
    assert ssn.job_enqueueable(ssn.jobs[uid]) is True
    j = job("late", wait="10m", min_resources=rl(cpu="100"), phase="Pending")
    add_tasks(j, 1)
    snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [j])
    snap.now = T0 + 3600
    ssn = open_session(snap, sla_conf(None, ["overcommit"], enableJobEnqueued=False))
    assert ssn.job_enqueueable(ssn.jobs[j.uid]) is False


# ---------------------------------------- order
def test_job_order_by_deadline_and_jobs_with_a_deadline_first() -> None:
    early = job("early", wait="1h", creation=T0)
    soon = job("soon", wait="10m", creation=T0 + 600)  # due T0 + 1200: before early (T0 + 3600)
    same = job("same", wait="20m", creation=T0)  # due T0 + 1200 too
    free = job("free")
    snap = mk_snapshot([mk_node("n1")], [early, soon, same, free])
    ssn = open_session(snap, sla_conf(None))
    J = ssn.jobs
    assert ssn.job_order_compare(J[soon.uid], J[early.uid]) == -1
    assert ssn.job_order_compare(J[early.uid], J[soon.uid]) == 1
    assert ssn.job_order_compare(J[soon.uid], J[same.uid]) == 0
    assert ssn.job_order_compare(J[early.uid], J[free.uid]) == -1
    assert ssn.job_order_compare(J[free.uid], J[early.uid]) == 1


# ---------------------------------------- end to end
def test_session_admits_an_overdue_job_that_overcommit_refuses() -> None:
    def phase_after(offset: float) -> str:
        j = job("big", wait="5m", min_resources=rl(cpu="10"), phase="Pending")
        add_tasks(j, 1, "10", "1Gi")
        snap = mk_snapshot([mk_node("n1", "4", "8Gi")], [j])
        snap.now = T0 + offset
        res = run(snap, mk_conf("enqueue, allocate", ["sla"], ["overcommit"]))
        return res.podgroups[j.uid].phase

    assert phase_after(60) == "Pending"
    assert phase_after(300) == "Inqueue"
