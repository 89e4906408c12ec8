"""Incremental freezing: a projection that froze along the way hands out exactly the snapshot a
projection built from scratch over the same events would, reuses what did not change, and never
changes a snapshot it handed out before."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cache_property import _all_events, any_op

from fumarole.daemon.cache import Projection
from fumarole.daemon.cache.describe import describe_snapshot
from fumarole.daemon.runtime.conf_watch import ConfWatcher
from fumarole.daemon.runtime.cycle import comparable, decide
from fumarole.store.events import (
    BindDecided,
    ClockAdvanced,
    CycleClosed,
    CycleOpened,
    JobExplained,
    NodeUpserted,
    PodGroupUpserted,
    PodUpserted,
    QueueUpserted,
)


def _fresh(events: list[Any]) -> Projection:
    p = Projection()
    for seq, ev in enumerate(events, 1):
        p.fold(seq, ev)
    return p


def _described(p: Projection) -> tuple[Any, list[str]]:
    snap = p.freeze(cycle=9)
    return describe_snapshot(snap), list(p.problems)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_op, min_size=1, max_size=50), st.data())
def test_cache_incremental_freeze_equals_a_freeze_from_scratch(ops: list[Any], data: st.DataObject) -> None:
    events = _all_events(ops)
    live = Projection()
    freeze_at = set(data.draw(st.lists(st.integers(1, len(events)), max_size=12)))
    handed_out: list[tuple[Any, Any]] = []
    for seq, ev in enumerate(events, 1):
        live.fold(seq, ev)
        if seq in freeze_at or seq == len(events):
            got = _described(live)
            assert got == _described(_fresh(events[:seq])), f"after event {seq}: {ev!r}"
            # A second freeze with nothing folded in between gives the same again.
            assert _described(live) == got
            snap = live.freeze(cycle=9)
            handed_out.append((snap, describe_snapshot(snap)))
    # Later folds and freezes never changed a snapshot handed out before.
    for snap, described in handed_out:
        assert describe_snapshot(snap) == described


def _cluster(pods: int = 6) -> list[Any]:
    node = {
        "metadata": {"name": "n0"},
        "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}},
    }
    events: list[Any] = [
        QueueUpserted(name="q", manifest={"metadata": {"name": "q"}, "spec": {"weight": 1}}),
        NodeUpserted(name="n0", manifest=node),
        NodeUpserted(name="n1", manifest={**node, "metadata": {"name": "n1"}}),
    ]
    for g in ("a", "b"):
        events.append(
            PodGroupUpserted(
                namespace="ns",
                name=g,
                manifest={"metadata": {"name": g, "namespace": "ns"}, "spec": {"minMember": 1, "queue": "q"}},
            )
        )
    for i in range(pods):
        g = "a" if i % 2 == 0 else "b"
        events.append(_pod(f"p{i}", g, node="n0" if g == "a" else "n1"))
    return events


def _pod(name: str, group: str, *, node: str = "", cpu: str = "1") -> PodUpserted:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node:
        spec["nodeName"] = node
    return PodUpserted(
        namespace="ns",
        name=name,
        manifest={
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"u-{name}",
                "annotations": {"scheduling.k8s.io/group-name": group},
            },
            "spec": spec,
            "status": {"phase": "Running" if node else "Pending"},
        },
    )


def test_cache_freeze_with_nothing_snapshot_relevant_folded_reuses_every_object() -> None:
    p = _fresh(_cluster())
    first = p.freeze(cycle=1)
    # A cycle's own bookkeeping and the clock change nothing a session reads but `now`.
    seq = p.seq
    for ev in (
        CycleOpened(cycle=1, watermark=seq, now_ms=0, conf_hash="h"),
        JobExplained(cycle=1, namespace="ns", name="a", queue="q", message="waiting"),
        CycleClosed(cycle=1),
        ClockAdvanced(at_ms=5000),
    ):
        seq += 1
        p.fold(seq, ev)
    second = p.freeze(cycle=2)
    assert second.now == 5.0 and second.session_id == "session-2"
    assert second.jobs is not first.jobs and second.nodes is not first.nodes
    assert all(second.jobs[uid] is j for uid, j in first.jobs.items())
    assert all(a is b for a, b in zip(first.nodes, second.nodes, strict=True))
    assert describe_snapshot(second) == {**describe_snapshot(first), "now": 5.0, "session_id": "session-2"}


def test_cache_freeze_rebuilds_only_the_job_and_node_of_a_changed_pod() -> None:
    events = _cluster()
    p = _fresh(events)
    first = p.freeze(cycle=1)
    changed = _pod("p1", "b", node="n1", cpu="2")  # p1 is in job b on node n1
    p.fold(p.seq + 1, changed)
    second = p.freeze(cycle=1)
    assert second.jobs["ns/a"] is first.jobs["ns/a"]
    assert second.jobs["ns/b"] is not first.jobs["ns/b"]
    assert second.nodes[0] is first.nodes[0] and second.nodes[1] is not first.nodes[1]
    assert second.nodes[1].used.cpu == first.nodes[1].used.cpu + 1000
    assert describe_snapshot(second) == describe_snapshot(_fresh([*events, changed]).freeze(cycle=1))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_op, min_size=1, max_size=40), st.data())
def test_cache_sessions_over_incremental_snapshots_decide_as_over_fresh_ones(
    ops: list[Any], data: st.DataObject
) -> None:
    events = _all_events(ops)
    active = ConfWatcher(None).active
    live = Projection()
    cut = set(data.draw(st.lists(st.integers(1, len(events)), min_size=1, max_size=4)))
    for seq, ev in enumerate(events, 1):
        live.fold(seq, ev)
        if seq in cut:
            fresh = _fresh(events[:seq])
            got, want = (
                decide(p.freeze(cycle=3), active.conf, cycle=3, watermark=seq, conf_hash=active.hash)
                for p in (live, fresh)
            )
            assert [comparable(e) for e in got.events] == [comparable(e) for e in want.events]


def test_cache_bind_in_flight_that_no_longer_fits_is_counted_bound_without_touching_an_earlier_snapshot() -> (
    None
):
    events = [*_cluster(pods=0), _pod("y", "a", node="n0", cpu="1"), _pod("x", "a", cpu="6")]
    events.append(BindDecided(cycle=1, namespace="ns", name="x", uid="u-x", node="n0", job="ns/a", queue="q"))
    p = _fresh(events)
    first = p.freeze(cycle=1)
    before = describe_snapshot(first)
    assert p.problems == []
    grown = _pod("y", "a", node="n0", cpu="4")  # the node has no room left for x's bind
    p.fold(p.seq + 1, grown)
    second = p.freeze(cycle=1)
    assert any("counted as Bound" in m for m in p.problems)
    assert describe_snapshot(first) == before
    assert (describe_snapshot(second), p.problems) == _described_at(_fresh([*events, grown]), 1)
    # And once more with nothing folded: the same snapshot and the same problems.
    assert (describe_snapshot(p.freeze(cycle=1)), p.problems) == _described_at(_fresh([*events, grown]), 1)


def _described_at(p: Projection, cycle: int) -> tuple[Any, list[str]]:
    snap = p.freeze(cycle=cycle)
    return describe_snapshot(snap), list(p.problems)
