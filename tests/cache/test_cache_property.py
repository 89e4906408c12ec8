"""Property tests of the projection: it equals build_snapshot for the same manifests, and state
after replaying the log (full fold, snapshot + tail) equals state maintained live."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fumarole.daemon.cache import Projection, decode_projection, encode_projection, load, save, state_image
from fumarole.daemon.cache.describe import describe_snapshot
from fumarole.daemon.manifests import build_snapshot, expand_job, load_objects
from fumarole.store.events import (
    BindDecided,
    BindFailed,
    ClockAdvanced,
    EvictDecided,
    EvictFailed,
    JobExplained,
    NamespaceDeleted,
    NamespaceUpserted,
    NodeDeleted,
    NodeUpserted,
    PodDeleted,
    PodGroupConditionRecord,
    PodGroupDeleted,
    PodGroupStatusChanged,
    PodGroupUpserted,
    PodUpserted,
    PriorityClassDeleted,
    PriorityClassUpserted,
    QueueDeleted,
    QueueUpserted,
    ResourceQuotaDeleted,
    ResourceQuotaUpserted,
    ResyncCompleted,
    ResyncStarted,
)
from fumarole.store.memory import MemoryEventLog

KIND_ORDER = ("PriorityClass", "Namespace", "ResourceQuota", "Queue", "Node", "PodGroup", "Pod")
NODES = [f"n{i}" for i in range(4)]
NAMESPACES = ["ns-a", "ns-b"]
PODS = [f"p{i}" for i in range(8)]
GROUPS = [f"g{i}" for i in range(3)]
QUEUES = ["q0", "q1", "default"]
PCS = ["pc0", "pc1"]
TIMES = ["2024-01-01T00:00:00Z", "2024-01-01T00:00:05Z", None]


def _upsert_event(kind: str, ns: str, name: str, m: dict[str, Any], at: int) -> Any:
    if kind in ("Node", "Queue", "PriorityClass", "Namespace"):
        cls = {
            "Node": NodeUpserted,
            "Queue": QueueUpserted,
            "PriorityClass": PriorityClassUpserted,
            "Namespace": NamespaceUpserted,
        }[kind]
        return cls(name=name, manifest=m, at_ms=at)
    cls2 = {"Pod": PodUpserted, "PodGroup": PodGroupUpserted, "ResourceQuota": ResourceQuotaUpserted}[kind]
    return cls2(namespace=ns, name=name, manifest=m, at_ms=at)


def _delete_event(kind: str, ns: str, name: str, at: int) -> Any:
    if kind in ("Node", "Queue", "PriorityClass", "Namespace"):
        cls = {
            "Node": NodeDeleted,
            "Queue": QueueDeleted,
            "PriorityClass": PriorityClassDeleted,
            "Namespace": NamespaceDeleted,
        }[kind]
        return cls(name=name, at_ms=at)
    cls2 = {"Pod": PodDeleted, "PodGroup": PodGroupDeleted, "ResourceQuota": ResourceQuotaDeleted}[kind]
    return cls2(namespace=ns, name=name, at_ms=at)


def _meta(name: str, ns: str | None, created: str | None, **extra: Any) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name}
    if ns is not None:
        m["namespace"] = ns
    if created is not None:
        m["creationTimestamp"] = created
    m.update({k: v for k, v in extra.items() if v})
    return m


@st.composite
def node_manifest(draw: st.DrawFn) -> tuple[str, str, str, dict[str, Any]]:
    name = draw(st.sampled_from(NODES))
    alloc = {
        "cpu": draw(st.sampled_from(["2", "4", "8", "1500m"])),
        "memory": draw(st.sampled_from(["4Gi", "8Gi", "16Gi"])),
        "pods": draw(st.sampled_from(["10", "110"])),
    }
    if draw(st.booleans()):
        alloc["nvidia.com/gpu"] = "2"
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["unschedulable"] = True
    if draw(st.booleans()):
        spec["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    m = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(name, None, None, labels=draw(st.sampled_from([{}, {"zone": "a"}, {"zone": "b"}]))),
        "spec": spec,
        "status": {"allocatable": alloc},
    }
    return "Node", "", name, m


@st.composite
def pod_manifest(draw: st.DrawFn) -> tuple[str, str, str, dict[str, Any]]:
    ns = draw(st.sampled_from(NAMESPACES))
    name = draw(st.sampled_from(PODS))
    ann: dict[str, str] = {}
    group = draw(st.sampled_from([*GROUPS, None]))
    if group is not None:
        ann["scheduling.k8s.io/group-name"] = group
    if draw(st.booleans()):
        ann["scheduling.volcano.sh/queue-name"] = draw(st.sampled_from(QUEUES))
    if draw(st.integers(0, 4)) == 0:
        ann["volcano.sh/task-priority"] = "7"
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "resources": {
                    "requests": {
                        "cpu": draw(st.sampled_from(["100m", "1", "2"])),
                        "memory": draw(st.sampled_from(["128Mi", "1Gi"])),
                    }
                },
            }
        ]
    }
    sched = draw(st.sampled_from(["volcano", "default-scheduler", None]))
    if sched is not None:
        spec["schedulerName"] = sched
    node = draw(st.sampled_from([*NODES, None, None]))
    if node is not None:
        spec["nodeName"] = node
    pc = draw(st.sampled_from([*PCS, "system-node-critical", None]))
    if pc is not None:
        spec["priorityClassName"] = pc
    if draw(st.integers(0, 3)) == 0:
        spec["priority"] = draw(st.integers(-5, 100))
    status: dict[str, Any] = {}
    phase = draw(st.sampled_from([None, "Pending", "Running", "Succeeded", "Failed"]))
    if phase is not None:
        status["phase"] = phase
    owner = draw(st.sampled_from([None, "owner-1", "owner-2"]))
    meta = _meta(
        name,
        ns,
        draw(st.sampled_from(TIMES)),
        annotations=ann,
        labels=draw(st.sampled_from([{}, {"app": "x"}])),
        uid=draw(st.sampled_from([None, f"uid-{ns}-{name}", f"uid2-{ns}-{name}"])),
    )
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "uid": owner, "controller": True}]
    if draw(st.integers(0, 5)) == 0:
        meta["deletionTimestamp"] = "2024-01-01T00:01:00Z"
    return (
        "Pod",
        ns,
        name,
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status},
    )


@st.composite
def podgroup_manifest(draw: st.DrawFn) -> tuple[str, str, str, dict[str, Any]]:
    ns = draw(st.sampled_from(NAMESPACES))
    name = draw(st.sampled_from(GROUPS))
    spec: dict[str, Any] = {"minMember": draw(st.integers(0, 3))}
    q = draw(st.sampled_from([*QUEUES, "missing", None]))
    if q is not None:
        spec["queue"] = q
    pc = draw(st.sampled_from([*PCS, None]))
    if pc is not None:
        spec["priorityClassName"] = pc
    if draw(st.booleans()):
        spec["minResources"] = {"cpu": "1", "memory": "1Gi"}
    m: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": _meta(name, ns, draw(st.sampled_from(TIMES))),
        "spec": spec,
    }
    phase = draw(st.sampled_from([None, "Pending", "Inqueue", "Running"]))
    if phase is not None:
        m["status"] = {"phase": phase}
    return "PodGroup", ns, name, m


@st.composite
def other_manifest(draw: st.DrawFn) -> tuple[str, str, str, dict[str, Any]]:
    kind = draw(st.sampled_from(["Queue", "PriorityClass", "Namespace", "ResourceQuota"]))
    if kind == "Queue":
        name = draw(st.sampled_from(QUEUES))
        spec: dict[str, Any] = {"weight": draw(st.integers(1, 4))}
        if draw(st.booleans()):
            spec["capability"] = {"cpu": "6"}
        m: dict[str, Any] = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}
        m["metadata"] = _meta(name, None, None)
        m["spec"] = spec
        if draw(st.integers(0, 3)) == 0:
            m["status"] = {"state": "Closed"}
        return kind, "", name, m
    if kind == "PriorityClass":
        name = draw(st.sampled_from(PCS))
        m = {"apiVersion": "scheduling.k8s.io/v1", "kind": kind, "metadata": _meta(name, None, None)}
        m["value"] = draw(st.integers(0, 1000))
        if draw(st.booleans()):
            m["globalDefault"] = True
        return kind, "", name, m
    if kind == "Namespace":
        name = draw(st.sampled_from(NAMESPACES))
        meta = _meta(name, None, None, labels=draw(st.sampled_from([{}, {"team": "a"}])))
        return kind, "", name, {"apiVersion": "v1", "kind": kind, "metadata": meta}
    ns = draw(st.sampled_from(NAMESPACES))
    name = draw(st.sampled_from(["rq0", "rq1"]))
    m = {"apiVersion": "v1", "kind": kind, "metadata": _meta(name, ns, None), "spec": {"hard": {"cpu": "10"}}}
    return kind, ns, name, m


any_manifest = st.one_of(
    node_manifest(), pod_manifest(), pod_manifest(), podgroup_manifest(), other_manifest()
)
key_of = st.one_of(
    st.tuples(st.just("Node"), st.just(""), st.sampled_from(NODES)),
    st.tuples(st.just("Pod"), st.sampled_from(NAMESPACES), st.sampled_from(PODS)),
    st.tuples(st.just("PodGroup"), st.sampled_from(NAMESPACES), st.sampled_from(GROUPS)),
    st.tuples(st.just("Queue"), st.just(""), st.sampled_from(QUEUES)),
    st.tuples(st.just("PriorityClass"), st.just(""), st.sampled_from(PCS)),
)

observed_op = st.one_of(
    any_manifest.map(lambda m: ("upsert", *m)),
    any_manifest.map(lambda m: ("upsert", *m)),
    key_of.map(lambda k: ("delete", *k)),
)


def _to_events(ops: list[Any]) -> list[Any]:
    out = []
    for i, op in enumerate(ops):
        at = 1000 + 250 * i
        if op[0] == "upsert":
            _, kind, ns, name, m = op
            out.append(_upsert_event(kind, ns, name, copy.deepcopy(m), at))
        else:
            _, kind, ns, name = op
            out.append(_delete_event(kind, ns, name, at))
    return out


def _objects_in_order(p: Projection) -> list[tuple[str, int, dict[str, Any]]]:
    return [("<log>", 0, m) for kind in KIND_ORDER for m in p.objects[kind].values()]


def _uids_unique(p: Projection) -> bool:
    uids = []
    for (ns, name), m in p.objects["Pod"].items():
        uids.append(m["metadata"].get("uid") or f"{ns}-{name}")
    return len(uids) == len(set(uids))


def _same_as_build_snapshot(p: Projection) -> None:
    snap = p.freeze(cycle=3)
    assert p.problems == []
    ref = build_snapshot(_objects_in_order(p))
    ref.now = snap.now
    ref.session_id = snap.session_id
    assert describe_snapshot(snap) == describe_snapshot(ref)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(observed_op, min_size=1, max_size=40))
def test_cache_projection_equals_build_snapshot_for_random_objects(ops: list[Any]) -> None:
    p = Projection()
    for seq, ev in enumerate(_to_events(ops), 1):
        p.fold(seq, ev)
    if not _uids_unique(p):  # build_snapshot refuses duplicate uids; the projection leaves one out
        return
    _same_as_build_snapshot(p)
    assert p.now_ms == 1000 + 250 * (len(ops) - 1)


def test_cache_projection_equals_build_snapshot_for_the_example_cluster() -> None:
    objs = load_objects("daemon/examples/cluster.yaml")
    pcs = [o for o in objs if o[2]["kind"] == "PriorityClass"]
    flat: list[tuple[str, int, dict[str, Any]]] = []
    for f, i, o in objs:
        if o["kind"] == "Job":
            flat.extend((f, i, x) for x in expand_job(f, i, o, priority_classes=pcs))
        else:
            flat.append((f, i, o))
    assert any(
        o["kind"] == "Pod" and "volcano.sh/job-name" in o["metadata"].get("labels", {}) for _, _, o in flat
    )
    p = Projection()
    for seq, (_, _, o) in enumerate(flat, 1):
        meta = o["metadata"]
        ns = meta.get("namespace", "default") if o["kind"] in ("Pod", "PodGroup", "ResourceQuota") else ""
        p.fold(seq, _upsert_event(o["kind"], ns, meta["name"], copy.deepcopy(o), seq))
    snap = p.freeze(cycle=1)
    ref = build_snapshot(flat)
    ref.now, ref.session_id = snap.now, snap.session_id
    assert describe_snapshot(snap) == describe_snapshot(ref)
    assert len(snap.nodes) == 6 and len(snap.jobs) == 4


# ---------------------------------------------------------------------------------------------
# live == replayed, with decisions, outcomes and resyncs


@st.composite
def decision_op(draw: st.DrawFn) -> tuple[Any, ...]:
    ns = draw(st.sampled_from(NAMESPACES))
    kind = draw(st.sampled_from(["bind", "bind_failed", "evict", "evict_failed", "pg", "explain", "clock"]))
    pod = draw(st.sampled_from(PODS))
    if kind == "bind":
        return ("bind", ns, pod, draw(st.sampled_from(NODES)), draw(st.sampled_from(["", f"uid-{ns}-{pod}"])))
    if kind in ("bind_failed", "evict_failed"):
        return (kind, ns, pod, draw(st.integers(1, 60)))
    if kind == "evict":
        return ("evict", ns, pod)
    if kind == "pg":
        group = draw(st.sampled_from([*GROUPS, "podgroup-owner-1", f"podgroup-uid-{ns}-{pod}"]))
        return ("pg", ns, group, draw(st.sampled_from(["Inqueue", "Running", "Pending"])))
    if kind == "explain":
        return (
            "explain",
            ns,
            draw(st.sampled_from(GROUPS)),
            draw(st.sampled_from(["", "waiting", "no room"])),
        )
    return ("clock", draw(st.integers(0, 100_000)))


resync_op = st.one_of(
    st.tuples(st.just("resync_start"), st.sampled_from([(), ("Pod",), ("nodes", "podgroup")])),
    st.just(("resync_done",)),
)
any_op = st.one_of(observed_op, observed_op, decision_op(), resync_op)


def _all_events(ops: list[Any]) -> list[Any]:
    out = []
    for i, op in enumerate(ops):
        at = 1000 + 100 * i
        tag = op[0]
        if tag in ("upsert", "delete"):
            out.extend(_to_events([op]))
        elif tag == "bind":
            out.append(
                BindDecided(cycle=1, namespace=op[1], name=op[2], uid=op[4], node=op[3], job="", queue="")
            )
        elif tag == "bind_failed":
            out.append(BindFailed(decision_seq=op[3], namespace=op[1], name=op[2], node="", reason="x"))
        elif tag == "evict_failed":
            out.append(EvictFailed(decision_seq=op[3], namespace=op[1], name=op[2], reason="x"))
        elif tag == "evict":
            out.append(
                EvictDecided(
                    cycle=1,
                    namespace=op[1],
                    name=op[2],
                    uid="",
                    node="",
                    job="",
                    queue="",
                    action="a",
                    reason="",
                )
            )
        elif tag == "pg":
            cond = PodGroupConditionRecord(type="Scheduled", status="True", transition_id="session-1")
            out.append(
                PodGroupStatusChanged(cycle=1, namespace=op[1], name=op[2], phase=op[3], conditions=(cond,))
            )
        elif tag == "explain":
            out.append(JobExplained(cycle=1, namespace=op[1], name=op[2], queue="q0", message=op[3]))
        elif tag == "clock":
            out.append(ClockAdvanced(at_ms=op[1]))
        elif tag == "resync_start":
            out.append(ResyncStarted(source="sim", kinds=op[1], at_ms=at))
        else:
            out.append(ResyncCompleted(source="sim", at_ms=at))
    return out


def _frozen(p: Projection) -> Any:
    snap = p.freeze(cycle=9)
    return describe_snapshot(snap), list(p.problems)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_op, min_size=1, max_size=50), st.data())
def test_cache_live_state_equals_replayed_state(ops: list[Any], data: st.DataObject) -> None:
    events = _all_events(ops)
    # Replayed: one fold of the whole log.
    full = Projection()
    for seq, ev in enumerate(events, 1):
        full.fold(seq, ev)
    # Live: freezes interleaved (they must not change the state), restarts from snapshots.
    live = Projection()
    freeze_at = set(data.draw(st.lists(st.integers(1, len(events)), max_size=6)))
    restart_at = set(data.draw(st.lists(st.integers(1, len(events)), max_size=3)))
    for seq, ev in enumerate(events, 1):
        live.fold(seq, ev)
        if seq in freeze_at:
            live.freeze()
        if seq in restart_at:
            live = decode_projection(encode_projection(live))
    assert state_image(live) == state_image(full)
    assert _frozen(live) == _frozen(full)
    # A frozen snapshot does not move when the projection folds more events.
    half = Projection()
    cut = len(events) // 2
    for seq, ev in enumerate(events[:cut], 1):
        half.fold(seq, ev)
    early = half.freeze(cycle=1)
    before = describe_snapshot(early)
    for seq, ev in enumerate(events[cut:], cut + 1):
        half.fold(seq, ev)
    assert describe_snapshot(early) == before


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_op, min_size=2, max_size=40), st.data())
def test_cache_snapshot_plus_tail_equals_full_fold(ops: list[Any], data: st.DataObject) -> None:
    events = _all_events(ops)
    cut = data.draw(st.integers(1, len(events)))

    async def scenario() -> tuple[Any, Any, Any]:
        log = MemoryEventLog()
        await log.append(events[:cut])
        p = await load(log)
        await save(log, p)
        await log.append(events[cut:])
        from_snapshot = await load(log)
        full = await load(log, use_snapshot=False)
        assert from_snapshot.seq == full.seq == len(events)
        at_cut = await load(log, to_seq=cut)
        return (
            (state_image(from_snapshot), _frozen(from_snapshot)),
            (state_image(full), _frozen(full)),
            at_cut,
        )

    a, b, at_cut = anyio.run(scenario)
    assert a == b
    assert at_cut.seq == cut


def test_cache_snapshot_bytes_are_msgpack_of_the_state() -> None:
    p = Projection()
    p.fold(1, NodeUpserted(name="n0", manifest={"metadata": {"name": "n0"}}, at_ms=5))
    data = encode_projection(p)
    raw = msgspec.msgpack.decode(data)
    assert raw["format"] == 2 and raw["seq"] == 1 and raw["now_ms"] == 5
    assert raw["objects"]["Node"] == [["", "n0", {"metadata": {"name": "n0"}}]]
