"""The Kubernetes sink against the fake API server, through the adapter's own client.

What the pipeline promises, checked on what the server answered and holds: a PodGroup status
waiting behind a slow bind decided before it is replaced by a newer one (one write, the newer);
a status equal to what the API holds is not written; a status is written after the binds
decided before it; the limit grows while the server keeps up and every bind lands once.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_kit import node, node_status, pod, podgroup, priority_class, queue
from fake_apiserver import ALL, FakeApiServer
from kube_http import Kube, write_kubeconfig

from fumarole.daemon.adapters.kubernetes.client import KubeApi
from fumarole.daemon.adapters.kubernetes.flow import AdaptiveLimit
from fumarole.daemon.adapters.kubernetes.sink import KubeSink
from fumarole.store.events import (
    BindDecided,
    BindSucceeded,
    PodGroupDeleted,
    PodGroupStatusChanged,
    PodGroupUpserted,
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer(tokens={"admin": ALL}) as server:
        yield server


@pytest.fixture
def kube(fake: FakeApiServer) -> Kube:
    return Kube(fake.url, "admin")


@pytest.fixture
def ns(kube: Kube) -> str:
    name = "t" + uuid.uuid4().hex[:8]
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    kube.create(node(f"{name}-n", 64))
    kube.patch_status("Node", f"{name}-n", "", node_status(64))
    kube.create(queue(f"{name}-q", 1))
    kube.create(priority_class(f"{name}-pc", 1))
    return name


@contextlib.asynccontextmanager
async def running(fake: FakeApiServer, tmp_path: Path, hold: float = 1.5) -> AsyncIterator[KubeSink]:
    """A sink on the adapter's own client, its Event writer running."""
    api = await KubeApi.connect(str(write_kubeconfig(tmp_path / "kubeconfig", fake.url, "admin")))
    s = KubeSink(api, limit=AdaptiveLimit(initial=8, maximum=64), status_hold=hold)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.run)
            yield s
            tg.cancel_scope.cancel()
    finally:
        await api.close()


def _bind(ns: str, name: str, uid: str) -> BindDecided:
    return BindDecided(
        cycle=1, namespace=ns, name=name, uid=uid, node=f"{ns}-n", job=f"{ns}/g", queue=f"{ns}-q"
    )


def _status(ns: str, phase: str, cycle: int) -> PodGroupStatusChanged:
    return PodGroupStatusChanged(cycle=cycle, namespace=ns, name="g", phase=phase)


def _patches(fake: FakeApiServer, ns: str, since: int) -> list[int]:
    return [
        i
        for i, (m, path, _code) in enumerate(fake.requests[since:], start=since)
        if m == "PATCH" and path.split("?")[0].endswith(f"/namespaces/{ns}/podgroups/g")
    ]


async def test_a_waiting_status_is_replaced_by_a_newer_one_and_trails_the_bind(
    fake: FakeApiServer, kube: Kube, ns: str, tmp_path: Path
) -> None:
    kube.create(podgroup(ns, "g", f"{ns}-q", 1, f"{ns}-pc"))
    created = kube.create(pod(ns, "p", "g", 1, f"{ns}-pc"))
    since = len(fake.requests)
    bind = _bind(ns, "p", created["metadata"]["uid"])
    outcome: list[Any] = []
    fake.binding_delay = 1.0
    try:
        async with running(fake, tmp_path) as sink, anyio.create_task_group() as tg:
            sink.admit(1, bind)
            sink.admit(2, _status(ns, "Inqueue", 1))

            async def apply() -> None:
                outcome.append((await sink.apply(1, bind))[0])

            tg.start_soon(apply)
            tg.start_soon(sink.report, 2, _status(ns, "Inqueue", 1))
            await anyio.sleep(0.3)  # the bind is still on its way: the Inqueue write waits
            assert not _patches(fake, ns, since)
            sink.admit(3, _status(ns, "Running", 2))
            tg.start_soon(sink.report, 3, _status(ns, "Running", 2))
    finally:
        fake.binding_delay = 0.0
    assert isinstance(outcome[0], BindSucceeded)
    patches = _patches(fake, ns, since)
    assert len(patches) == 1  # Inqueue was never written: Running replaced it
    assert kube.get("PodGroup", "g", ns)["status"]["phase"] == "Running"
    bound = [
        i
        for i, (m, path, code) in enumerate(fake.requests[since:], start=since)
        if m == "POST" and path.endswith(f"/namespaces/{ns}/pods/p/binding") and code == 201
    ]
    assert bound and bound[0] < patches[0]  # after the bind decided before it


async def test_a_status_the_api_already_holds_is_not_written(
    fake: FakeApiServer, kube: Kube, ns: str, tmp_path: Path
) -> None:
    kube.create(podgroup(ns, "g", f"{ns}-q", 1, f"{ns}-pc"))
    since = len(fake.requests)
    async with running(fake, tmp_path) as sink:
        sink.admit(1, _status(ns, "Inqueue", 1))
        await sink.report(1, _status(ns, "Inqueue", 1))  # written
        assert len(_patches(fake, ns, since)) == 1
        sink.admit(2, _status(ns, "Inqueue", 2))
        await sink.report(2, _status(ns, "Inqueue", 2))  # what we last wrote: spared
        assert len(_patches(fake, ns, since)) == 1
        # The API shows another writer's newer status: the same status is written again.
        newer = kube.merge_patch("PodGroup", "g", ns, {"status": {"phase": "Pending"}})
        sink.observe([PodGroupUpserted(namespace=ns, name="g", manifest=newer)])
        sink.admit(3, _status(ns, "Inqueue", 3))
        await sink.report(3, _status(ns, "Inqueue", 3))
        assert len(_patches(fake, ns, since)) == 3  # ours, the other writer's, ours again
        assert sink.counters.spared["podgroups"] == 1
        sink.observe([PodGroupDeleted(namespace=ns, name="g")])  # its memories go with it
        assert (ns, "g") not in sink._pg_written and (ns, "g") not in sink._pg_api


async def test_many_binds_land_once_and_the_limit_grows_while_the_server_keeps_up(
    fake: FakeApiServer, kube: Kube, ns: str, tmp_path: Path
) -> None:
    kube.create(podgroup(ns, "g", f"{ns}-q", 1, f"{ns}-pc"))
    pods = [kube.create(pod(ns, f"p{i}", "g", 0, f"{ns}-pc")) for i in range(200)]
    outcomes: list[Any] = []
    async with running(fake, tmp_path) as sink:

        async def one(seq: int, p: dict[str, Any]) -> None:
            d = _bind(ns, p["metadata"]["name"], p["metadata"]["uid"])
            outcomes.append((await sink.apply(seq, d))[0])

        async with anyio.create_task_group() as tg:
            for i, p in enumerate(pods, start=1):
                sink.admit(i, _bind(ns, p["metadata"]["name"], p["metadata"]["uid"]))
                tg.start_soon(one, i, p)
        assert len(outcomes) == 200 and all(isinstance(o, BindSucceeded) for o in outcomes)
        assert sink.counters.writes["bindings"] == 200
        assert sink.slots.peak > 8  # grew past its initial limit
        assert sink.slots.in_flight == 0
        assert not sink._acting and not sink._unanswered  # nothing kept per answered bind


@pytest.mark.parametrize("next_cycle", [True, False], ids=["replaced", "hold-expires"])
async def test_a_status_of_the_cycle_that_bound_its_pods_is_held_for_the_next_cycle(
    next_cycle: bool, fake: FakeApiServer, kube: Kube, ns: str, tmp_path: Path
) -> None:
    """Inqueue decided with the gang's binds waits (up to the hold) for the next cycle's Running:
    one write instead of two; with no newer status it is written when the hold ends."""
    kube.create(podgroup(ns, "g", f"{ns}-q", 1, f"{ns}-pc"))
    created = kube.create(pod(ns, "p", "g", 1, f"{ns}-pc"))
    since = len(fake.requests)
    bind = _bind(ns, "p", created["metadata"]["uid"])
    async with running(fake, tmp_path, hold=0.8) as sink, anyio.create_task_group() as tg:
        sink.admit(1, bind)
        sink.admit(2, _status(ns, "Inqueue", 1))
        await sink.apply(1, bind)
        tg.start_soon(sink.report, 2, _status(ns, "Inqueue", 1))
        await anyio.sleep(0.3)
        assert not _patches(fake, ns, since)  # held: its cycle bound the gang
        if next_cycle:
            sink.admit(3, _status(ns, "Running", 2))
            tg.start_soon(sink.report, 3, _status(ns, "Running", 2))
    assert len(_patches(fake, ns, since)) == 1
    assert kube.get("PodGroup", "g", ns)["status"]["phase"] == ("Running" if next_cycle else "Inqueue")
