"""Node usage reaches the daemon's sessions: NodeUsageObserved -> projection -> snapshot, kept
through the cache snapshot codec; CycleOpened's clock becomes the next snapshot's previous_now."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.cache import Projection, decode_projection, encode_projection, state_image
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.run import run_session
from fumarole.store.events import CycleOpened, NodeDeleted, NodeUsageObserved, upserted


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
    }


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
    },
}
CONF = parse_conf('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: usage\n')


def test_usage_events_fold_into_the_snapshot_and_steer_the_session() -> None:
    p = Projection()
    seq = 0
    for ev in (upserted(node("n1"), 1000), upserted(node("n2"), 1000), upserted(POD, 1000)):
        seq += 1
        p.fold(seq, ev)
    first = p.freeze()
    assert first.node_usage == {} and first.previous_now is None
    p.fold(seq + 1, NodeUsageObserved(node="n1", cpu=90.0, memory=10.0, metrics_ms=2000, at_ms=2000))
    p.fold(seq + 2, NodeUsageObserved(node="n2", cpu=10.0, memory=10.0, metrics_ms=2000, at_ms=2000))
    p.fold(seq + 3, CycleOpened(cycle=1, watermark=seq, now_ms=2500, conf_hash=""))
    snap = p.freeze()
    assert snap.node_usage["n1"].cpu == {"10m": 90.0} and snap.node_usage["n1"].metrics_time == 2.0
    assert snap.previous_now == 2.5
    assert run_session(snap, CONF).binds == {"default/p": "n2"}  # n1 is over the 80% CPU limit
    again = decode_projection(encode_projection(p))
    assert state_image(again) == state_image(p)
    thawed = again.freeze()
    assert thawed.node_usage == snap.node_usage and thawed.previous_now == 2.5
    # 6 minutes later the sample is stale: n1 is allowed again (ties by the node order)
    p.fold(seq + 4, NodeUsageObserved(node="n2", cpu=85.0, memory=10.0, metrics_ms=362_000, at_ms=362_000))
    late = p.freeze()
    assert run_session(late, CONF).binds == {"default/p": "n1"}


def test_a_deleted_node_forgets_its_usage() -> None:
    p = Projection()
    p.fold(1, upserted(node("n1"), 1000))
    p.fold(2, NodeUsageObserved(node="n1", cpu=90.0, memory=10.0, metrics_ms=2000, at_ms=2000))
    assert "n1" in p.freeze().node_usage
    p.fold(3, NodeDeleted(name="n1", at_ms=3000))
    p.fold(4, upserted(node("n1"), 4000))
    assert p.freeze().node_usage == {}
