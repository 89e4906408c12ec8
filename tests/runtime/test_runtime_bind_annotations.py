"""A bind carries the annotations a plugin asks the binder to write (deviceshare's GPU card), the
simulator writes them on the pod, and the next cycle sees the card as used."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.adapters.simulator import Simulator
from fumarole.daemon.cache import Projection
from fumarole.daemon.runtime.conf_watch import parse_scheduler_conf
from fumarole.daemon.runtime.cycle import decide
from fumarole.store.events import BindDecided, PodUpserted

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - {name: predicates}
  - {name: proportion}
  - {name: deviceshare, arguments: {deviceshare.GPUSharingEnable: true}}
"""
GPU = {
    "cpu": "16",
    "memory": "64Gi",
    "pods": "110",
    "volcano.sh/gpu-memory": "32768",
    "volcano.sh/gpu-number": "2",
}


def _pod_group(name: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "annotations": {"fumarole.io/submit-at": "0s"}},
            "spec": {"minMember": 1, "queue": "default"},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "ns",
                "annotations": {"scheduling.k8s.io/group-name": name, "fumarole.io/duration": "600s"},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [
                    {
                        "name": "c",
                        "resources": {
                            "requests": {"cpu": "1", "volcano.sh/gpu-memory": "10000"},
                            "limits": {"volcano.sh/gpu-memory": "10000"},
                        },
                    }
                ],
            },
        },
    ]


def test_card_annotation_travels_with_the_bind() -> None:
    cluster = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "g"},
            "status": {"capacity": GPU, "allocatable": GPU},
        }
    ]
    sim = Simulator(cluster, _pod_group("p1") + _pod_group("p2") + _pod_group("p3"))
    conf = parse_scheduler_conf(CONF, "test")
    projection = Projection()
    seq = 0

    def fold(events: list[Any]) -> None:
        nonlocal seq
        for ev in events:
            seq += 1
            projection.fold(seq, ev)

    fold(sim.initial_events_sync())
    fold(sim.advance(False))
    binds: list[BindDecided] = []
    for cycle in (1, 2, 3):
        out = decide(projection.freeze(cycle=cycle), conf, cycle=cycle, watermark=seq, conf_hash="h")
        fold(list(out.events))
        for ev in out.events:
            if isinstance(ev, BindDecided):
                binds.append(ev)
                outcome, facts = sim.apply_sync(seq, ev)
                fold([outcome, *facts])
                upserts = [f for f in facts if isinstance(f, PodUpserted)]
                assert (
                    upserts
                    and upserts[0].manifest["metadata"]["annotations"].items() >= ev.annotations.items()
                )
        fold(sim.advance(False))
    assert [b.name for b in binds] == ["p1", "p2"]
    assert all(b.annotations for b in binds), binds
    # The third pod never binds: both cards keep the 10000 MiB their pods took in cycle 1.
    assert len({tuple(sorted(b.annotations.items())) for b in binds}) == 2
