"""runtime.cycle.decide: one session as ordered decision events, explanations only when they change."""

from __future__ import annotations

import msgspec

from fumarole.daemon.cache.describe import describe_snapshot
from fumarole.daemon.manifests import load_snapshot
from fumarole.daemon.runtime.conf_watch import bundled_conf_text, parse_scheduler_conf
from fumarole.daemon.runtime.cycle import classify_reason, comparable, decide, first_difference
from fumarole.daemon.scheduler.framework.conf import DEFAULT_SCHEDULER_CONF, parse_conf
from fumarole.store.events import (
    BindDecided,
    CycleClosed,
    CycleOpened,
    JobExplained,
    PodGroupStatusChanged,
)

EXAMPLE = "daemon/examples/cluster.yaml"


def _conf():  # type: ignore[no-untyped-def]
    return parse_conf(DEFAULT_SCHEDULER_CONF, source="default")


def test_cycle_events_are_ordered_and_counted() -> None:
    snap = load_snapshot(EXAMPLE)
    snap.now = 12.345
    before = describe_snapshot(snap)
    d = decide(snap, _conf(), cycle=4, watermark=17, conf_hash="abc", trace_id="t" * 32)
    assert describe_snapshot(snap) == before  # the input is not modified
    kinds = [type(e).__name__ for e in d.events]
    assert kinds[0] == "CycleOpened" and kinds[-1] == "CycleClosed"
    order = [
        "BindDecided",
        "EvictDecided",
        "PipelineDecided",
        "PodGroupStatusChanged",
        "JobExplained",
        "QueueFiguresRecorded",
    ]
    ranks = [order.index(k) for k in kinds[1:-1]]
    assert ranks == sorted(ranks)
    opened = d.opened
    assert (opened.cycle, opened.watermark, opened.now_ms, opened.conf_hash) == (4, 17, 12345, "abc")
    binds = [e for e in d.events if isinstance(e, BindDecided)]
    assert [f"{b.namespace}/{b.name}" for b in binds] == d.result.bind_order
    assert {b.node for b in binds} == {"gpu-0", "gpu-1", "cpu-0", "cpu-1", "cpu-2", "cpu-3"}
    train = next(b for b in binds if b.name == "train-worker-0")
    assert (train.job, train.queue, train.cycle, train.trace_id) == ("team-a/train", "research", 4, "t" * 32)
    assert train.uid
    closed = d.closed
    assert (closed.binds, closed.evictions, closed.pipelined, closed.jobs) == (8, 0, 0, 4)
    assert closed.pending_tasks == 9 and closed.tasks == 17
    changed = [e for e in d.events if isinstance(e, PodGroupStatusChanged)]
    assert [e.name for e in changed] == ["bad-fit", "etl", "mpi", "train"]
    assert all(e.phase == "Inqueue" for e in changed)
    assert changed[0].conditions[0].transition_id == "session-4"


def test_cycle_explanations_are_structured_and_written_only_when_they_change() -> None:
    snap = load_snapshot(EXAMPLE)
    d1 = decide(snap, _conf(), cycle=1, watermark=1, conf_hash="h")
    why = {f"{e.namespace}/{e.name}": e for e in d1.events if isinstance(e, JobExplained)}
    assert sorted(why) == ["team-a/bad-fit", "team-a/etl"]
    bad = why["team-a/bad-fit"]
    top = bad.reasons[0]
    assert (top.code, top.rank, top.resource, top.total_nodes) == ("predicates-failed", 0, "cpu", 6)
    assert top.nodes == {"Insufficient cpu": 6} and top.min_member == 3
    assert bad.message.startswith("3/3 pods pending; gang: 0/3")
    assert len(bad.pods) == 3
    etl = why["team-a/etl"]
    assert [r.code for r in etl.reasons] == ["queue-capability", "gang-unsatisfied"]
    assert [r.rank for r in etl.reasons] == [0, 1]
    assert etl.reasons[1].placeable == 5 and etl.reasons[1].min_member == 6
    # Same state, same explanations in force: nothing new is written.
    d2 = decide(snap, _conf(), cycle=2, watermark=2, conf_hash="h", previous=why)
    assert not [e for e in d2.events if isinstance(e, JobExplained)]
    # A job explained before that no longer waits gets an empty explanation.
    gone = msgspec.structs.replace(bad, namespace="team-a", name="finished")
    d3 = decide(snap, _conf(), cycle=3, watermark=3, conf_hash="h", previous={**why, "team-a/finished": gone})
    emitted = [e for e in d3.events if isinstance(e, JobExplained)]
    assert [(e.name, e.message, e.reasons) for e in emitted] == [("finished", "", ())]


def test_cycle_comparison_ignores_timings_and_trace_ids_only() -> None:
    snap = load_snapshot(EXAMPLE)
    conf = parse_scheduler_conf(bundled_conf_text(), "bundled")
    a = decide(snap, conf, cycle=1, watermark=5, conf_hash="h", trace_id="a" * 32)
    b = decide(snap, conf, cycle=1, watermark=5, conf_hash="h")
    assert first_difference(a.events, b.events) is None
    closed = a.events[-1]
    assert isinstance(closed, CycleClosed)
    assert comparable(closed) == comparable(msgspec.structs.replace(closed, duration_s=99.0))
    moved = list(b.events)
    i = next(i for i, e in enumerate(moved) if isinstance(e, BindDecided))
    moved[i] = msgspec.structs.replace(moved[i], node="elsewhere")
    diff = first_difference(a.events, moved)
    assert diff is not None and diff.startswith(f"decision {i}: ") and "elsewhere" in diff
    shorter = first_difference(a.events, a.events[:-1]) or ""
    assert shorter.startswith(f"decision {len(a.events) - 1}: recorded cycle.closed cycle 1: ")
    assert shorter.endswith("; recomputed nothing")
    other = msgspec.structs.replace(a.events[0], watermark=6)
    assert isinstance(other, CycleOpened)
    assert "watermark 6" in (first_difference([other], [a.events[0]]) or "")


def test_cycle_classify_reason_codes() -> None:
    cases = {
        "job ns/j not admitted (Pending): overcommit: resource in cluster is overused: overused cpu": (
            "enqueue-rejected",
            "overcommit",
            "cpu",
        ),
        "job ns/j not admitted (Pending): proportion: queue q is not open (state 'Closed')": (
            "queue-closed",
            "proportion",
            "",
        ),
        "job ns/j is Pending: not admitted by enqueue in this cycle": ("not-enqueued", "", ""),
        "job ns/j is not valid: Not enough valid tasks for gang-scheduling, valid: 2, min: 3": (
            "job-invalid",
            "gang",
            "",
        ),
        "queue q does not exist": ("queue-missing", "", ""),
        "pipelined on n1: waits for resources being released there; gang: 1/2 tasks schedulable": (
            "pipelined",
            "",
            "",
        ),
        "queue q is overused (allocated has reached deserved)": ("queue-overused", "", ""),
        "best-effort pod (no requests): only the backfill action places it, and it is not configured": (
            "best-effort",
            "",
            "",
        ),
        "not reached in this cycle": ("not-reached", "", ""),
        "something new": ("other", "", ""),
    }
    for message, (code, plugin, resource) in cases.items():
        r = classify_reason(message)
        assert (r.code, r.plugin, r.resource) == (code, plugin, resource), message
        assert r.message == message
    fit = classify_reason(
        "gang: 0/2 tasks schedulable (minMember 2); 0/5 nodes are unavailable: "
        "2 Insufficient nvidia.com/gpu, 3 node(s) had untolerated taint {a: b}."
    )
    assert fit.code == "predicates-failed" and fit.total_nodes == 5
    assert fit.nodes == {"Insufficient nvidia.com/gpu": 2, "node(s) had untolerated taint {a: b}": 3}
    assert fit.resource == "nvidia.com/gpu"
