"""Dirty-set freezing: a freeze after pod, PodGroup and decision events visits only what changed,
and what it hands out equals, structurally (every job, task, node, queue and their orders, and
the problems), the snapshot a projection built from scratch over the same events freezes."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cache_incremental_freeze import _described
from test_cache_property import _all_events, decision_op, observed_op

from fumarole.daemon.cache import Projection
from fumarole.daemon.cache.describe import describe_snapshot
from fumarole.store.events import (
    NodeUpserted,
    PodDeleted,
    PodGroupStatusChanged,
    PodGroupUpserted,
    PodUpserted,
    QueueUpserted,
)

NAMESPACES = ["ns-a", "ns-b"]
PODS = [f"p{i}" for i in range(8)]  # the names test_cache_property's decisions name
NODES = [f"n{i}" for i in range(4)]
BASE_GROUPS = ["g0", "g1", "g2"]
NEW_GROUPS = ["g3", "g4"]


def _node(name: str) -> NodeUpserted:
    return NodeUpserted(
        name=name,
        manifest={
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}},
        },
    )


def _group(ns: str, name: str, queue: str = "q0", status: dict[str, Any] | None = None) -> PodGroupUpserted:
    m: dict[str, Any] = {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": 1, "queue": queue},
    }
    if status is not None:
        m["status"] = status
    return PodGroupUpserted(namespace=ns, name=name, manifest=m)


def _pod(ns: str, name: str, group: str, node: str, phase: str, cpu: str, uid: str) -> PodUpserted:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }
    if node:
        spec["nodeName"] = node
    return PodUpserted(
        namespace=ns,
        name=name,
        manifest={
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": uid,
                "annotations": {"scheduling.k8s.io/group-name": group},
            },
            "spec": spec,
            "status": {"phase": phase},
        },
    )


def _base() -> list[Any]:
    events: list[Any] = [
        QueueUpserted(name=q, manifest={"metadata": {"name": q}, "spec": {"weight": 1}}) for q in ("q0", "q1")
    ]
    events += [_node(n) for n in NODES]
    events += [_group(ns, g) for ns in NAMESPACES for g in BASE_GROUPS]
    for i, name in enumerate(PODS[:6]):
        ns = NAMESPACES[i % 2]
        events.append(_pod(ns, name, BASE_GROUPS[i % 3], NODES[i % 4], "Running", "1", f"uid-{ns}-{name}"))
    return events


@st.composite
def pod_event(draw: st.DrawFn) -> Any:
    ns = draw(st.sampled_from(NAMESPACES))
    name = draw(st.sampled_from(PODS))
    if draw(st.integers(0, 4)) == 0:
        return PodDeleted(namespace=ns, name=name)
    return _pod(
        ns,
        name,
        draw(st.sampled_from([*BASE_GROUPS * 4, *NEW_GROUPS])),
        draw(st.sampled_from([*NODES, "gone", "", ""])),
        draw(st.sampled_from(["Pending", "Running", "Running", "Succeeded", "Failed"])),
        draw(st.sampled_from(["100m", "1", "2"] * 4 + ["7"])),  # 7 cpu: a node may not fit its tasks
        draw(st.sampled_from([f"uid-{ns}-{name}"] * 4 + [f"uid2-{ns}-{name}"] * 4 + ["uid-shared"])),
    )


@st.composite
def group_event(draw: st.DrawFn) -> Any:
    ns = draw(st.sampled_from(NAMESPACES))
    name = draw(st.sampled_from([*BASE_GROUPS, *NEW_GROUPS, *NEW_GROUPS]))
    status = draw(
        st.sampled_from([None, {"phase": "Running", "running": 1}, {"phase": "Pending", "conditions": []}])
    )
    return _group(ns, name, draw(st.sampled_from(["q0", "q1"])), status)


def _status(ns: str, name: str, phase: str) -> PodGroupStatusChanged:
    return PodGroupStatusChanged(cycle=1, namespace=ns, name=name, phase=phase, conditions=())


narrow_event = st.one_of(
    pod_event(),
    pod_event(),
    pod_event(),
    group_event(),
    decision_op().map(lambda op: _all_events([op])[0]),
    st.builds(
        _status,
        st.sampled_from(NAMESPACES),
        st.sampled_from(BASE_GROUPS),
        st.sampled_from(["Running", "Inqueue"]),
    ),
)
# Now and then an event the dirty set does not follow (a node, queue, foreign pod, deletion...).
wide_event = observed_op.map(lambda op: _all_events([op])[0])
any_event = st.integers(0, 19).flatmap(lambda i: wide_event if i == 0 else narrow_event)


def _fresh(events: list[Any]) -> Projection:
    p = Projection()
    for seq, ev in enumerate(events, 1):
        p.fold(seq, ev)
    return p


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_event, min_size=1, max_size=40), st.data())
def test_cache_dirty_set_freeze_equals_a_freeze_from_scratch(tail: list[Any], data: st.DataObject) -> None:
    events = [*_base(), *tail]
    start = len(events) - len(tail)
    live = _fresh(events[:start])
    _described(live)
    freeze_at = set(data.draw(st.lists(st.integers(start + 1, len(events)), max_size=15)))
    handed_out: list[tuple[Any, Any]] = []
    for seq in range(start + 1, len(events) + 1):
        live.fold(seq, events[seq - 1])
        if seq in freeze_at or seq == len(events):
            got = _described(live)
            assert got == _described(_fresh(events[:seq])), f"after event {seq}: {events[seq - 1]!r}"
            assert _described(live) == got
            snap = live.freeze(cycle=9)
            handed_out.append((snap, describe_snapshot(snap)))
    for snap, described in handed_out:
        assert describe_snapshot(snap) == described


def test_cache_dirty_set_freeze_visits_only_the_changed_pods_nodes_and_jobs() -> None:
    events = _base()
    p = _fresh(events)
    first = p.freeze(cycle=1)
    changes = [
        _pod("ns-a", "p0", "g0", "n0", "Running", "2", "uid-ns-a-p0"),  # p0: more cpu on n0, job ns-a/g0
        _group("ns-b", "g3"),  # a new PodGroup goes last
        _pod("ns-b", "p7", "g3", "", "Pending", "1", "uid-ns-b-p7"),  # a new pending pod in it
        _status("ns-a", "g1", "Running"),
    ]
    seq = p.seq
    for ev in changes:
        seq += 1
        p.fold(seq, ev)
    second = p.freeze(cycle=1)
    assert p.dirty_freezes == 1
    assert describe_snapshot(second) == describe_snapshot(_fresh([*events, *changes]).freeze(cycle=1))
    assert list(second.jobs)[-1] == "ns-b/g3" and len(second.jobs["ns-b/g3"].tasks) == 1
    assert second.jobs["ns-a/g0"] is not first.jobs["ns-a/g0"]
    assert second.jobs["ns-a/g1"] is not first.jobs["ns-a/g1"]
    assert second.jobs["ns-a/g1"].status.phase == "Running"
    untouched = [j for j in first.jobs if j not in ("ns-a/g0", "ns-a/g1")]
    assert all(second.jobs[j] is first.jobs[j] for j in untouched)
    assert second.nodes[0] is not first.nodes[0]
    assert all(a is b for a, b in zip(first.nodes[1:], second.nodes[1:], strict=True))
