"""HyperNodes from the Kubernetes adapter: listed and watched like the other kinds, and a cluster
without the HyperNode CRD (404) is gone on without, with one log line and no retry storm.

Against the fake API server (the real wire protocol, Volcano's HyperNode CRD): the listing logs
HyperNodeUpserted events (typed decoding: no managedFields) inside the Resync markers, which name
HyperNode; the watch logs an added, a modified and a deleted HyperNode; the events fold into the
projection, whose snapshot has the HyperNodes the scheduler reads.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

from cluster_kit import node, node_status
from fake_apiserver import FakeApiServer
from kube_http import Kube, write_kubeconfig

from fumarole.daemon.adapters.kubernetes.client import KubeApi
from fumarole.daemon.adapters.kubernetes.objects import KINDS
from fumarole.daemon.adapters.kubernetes.source import KubeSource
from fumarole.daemon.cache import Projection
from fumarole.store.events import HyperNodeDeleted, HyperNodeUpserted, ResyncCompleted, ResyncStarted

HYPERNODES = "/apis/topology.volcano.sh/v1alpha1/hypernodes"


def hypernode(name: str, tier: int, pattern: str) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}],
        },
    }


def fill(server: FakeApiServer) -> Kube:
    kube = Kube(server.url, "admin")
    for n in ("hn-a1", "hn-b1"):
        kube.create(node(n, 4))
        kube.patch_status("Node", n, "", node_status(4))
    return kube


async def connect(server: FakeApiServer, tmp_path: Path) -> KubeApi:
    kc = write_kubeconfig(tmp_path / "kubeconfig", server.url, "admin")
    return await KubeApi.connect(str(kc))


def test_hypernodes_are_listed_typed_and_fold_into_the_snapshot(tmp_path: Path) -> None:
    with FakeApiServer() as server:
        kube = fill(server)
        kube.create(hypernode("rack-a", 1, "^hn-a"))
        kube.create(hypernode("rack-b", 1, "^hn-b"))

        async def go() -> tuple[list[Any], list[str | None], KubeSource]:
            api = await connect(server, tmp_path)
            try:
                source = KubeSource(api, ["volcano"], clock=lambda: 7)
                events, keys = await source.list_all()
                return events, keys, source
            finally:
                await api.close()

        events, keys, source = anyio.run(go)
    assert isinstance(events[0], ResyncStarted) and "HyperNode" in events[0].kinds
    assert isinstance(events[-1], ResyncCompleted) and "HyperNode" in events[-1].kinds
    hns = [(e, k) for e, k in zip(events, keys, strict=True) if isinstance(e, HyperNodeUpserted)]
    assert [e.name for e, _ in hns] == ["rack-a", "rack-b"]
    for e, k in hns:
        m = e.manifest
        assert m["kind"] == "HyperNode" and m["apiVersion"] == "topology.volcano.sh/v1alpha1"
        assert "managedFields" not in m["metadata"]  # the fake sends them: typed decoding drops them
        assert m["spec"]["tier"] == 1
        assert k == f"k8s:HyperNode:{m['metadata']['uid']}:{m['metadata']['resourceVersion']}"
    assert source.absent == {} and source.resource_versions["HyperNode"]
    p = Projection()
    for i, ev in enumerate(events, 1):
        p.fold(i, ev)
    assert [h.name for h in p.freeze().hypernodes] == ["rack-a", "rack-b"]


def test_the_watch_logs_added_modified_and_deleted_hypernodes(tmp_path: Path) -> None:
    with FakeApiServer(bookmark_interval=0.2) as server:
        kube = fill(server)
        got: list[Any] = []

        async def go() -> None:
            api = await connect(server, tmp_path)
            try:
                source = KubeSource(api, ["volcano"], clock=lambda: 7, watch_timeout=5)
                await source.list_all()
                hn_kind = next(k for k in KINDS if k.name == "HyperNode")

                async def submit(events: list[Any], keys: list[str | None]) -> None:
                    got.extend(events)

                async def wait(n: int) -> None:
                    with anyio.fail_after(20):
                        while len(got) < n:
                            await anyio.sleep(0.05)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(source.watch_kind, hn_kind, submit)
                    await anyio.sleep(0.3)
                    await anyio.to_thread.run_sync(kube.create, hypernode("rack-a", 1, "^hn-a"))
                    await wait(1)
                    patch = {"spec": {"tier": 2}}
                    await anyio.to_thread.run_sync(kube.merge_patch, "HyperNode", "rack-a", "", patch)
                    await wait(2)
                    await anyio.to_thread.run_sync(kube.delete, "HyperNode", "rack-a")
                    await wait(3)
                    tg.cancel_scope.cancel()
            finally:
                await api.close()

        anyio.run(go)
    assert [type(e).__name__ for e in got] == ["HyperNodeUpserted", "HyperNodeUpserted", "HyperNodeDeleted"]
    assert [e.manifest["spec"]["tier"] for e in got[:2]] == [1, 2]
    assert "managedFields" not in got[1].manifest["metadata"]
    assert isinstance(got[2], HyperNodeDeleted) and got[2].name == "rack-a"
    p = Projection()
    for i, ev in enumerate(got[:2], 1):
        p.fold(i, ev)
    assert [h.tier for h in p.freeze().hypernodes] == [2]


def test_without_the_crd_the_adapter_goes_on_with_one_line_and_rare_rechecks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """404 for hypernodes: the listing still succeeds (no HyperNode event, the kind noted absent),
    one info line, and the watch does not retry: it lists again every `absent_recheck` seconds."""
    caplog.set_level(logging.INFO, logger="fumarole.kubernetes.source")
    with FakeApiServer(hypernodes=False) as server:
        fill(server)

        async def go(recheck: float, run_for: float) -> tuple[list[Any], KubeSource]:
            api = await connect(server, tmp_path)
            try:
                source = KubeSource(api, ["volcano"], clock=lambda: 7, absent_recheck=recheck)
                events, _keys = await source.list_all()
                hn_kind = next(k for k in KINDS if k.name == "HyperNode")

                async def submit(events: list[Any], keys: list[str | None]) -> None:
                    raise AssertionError(f"nothing to log: {events}")

                with anyio.move_on_after(run_for):
                    await source.watch_kind(hn_kind, submit)
                return events, source
            finally:
                await api.close()

        def asked() -> int:
            return sum(1 for _m, path, _s in server.requests if path.split("?")[0] == HYPERNODES)

        events, source = anyio.run(go, 600.0, 1.0)
        assert asked() == 1  # the listing only: no watch, no retry within the recheck interval
        assert not any(isinstance(e, (HyperNodeUpserted, HyperNodeDeleted)) for e in events)
        assert any(e.__class__.__name__ == "NodeUpserted" for e in events)
        assert source.absent == {"HyperNode": 404}
        lines = [r.getMessage() for r in caplog.records if "hypernodes" in r.getMessage()]
        assert len(lines) == 1 and "not served (404" in lines[0] and "every 600s" in lines[0], lines
        assert all(r.levelno == logging.INFO for r in caplog.records if "hypernodes" in r.getMessage())
        caplog.clear()
        before = asked()
        anyio.run(go, 0.25, 1.2)
        rechecks = asked() - before - 1
        assert 2 <= rechecks <= 6, rechecks  # about one a quarter second, never a storm
        assert len([r for r in caplog.records if "hypernodes" in r.getMessage()]) == 1  # said once
    statuses = {s for _m, path, s in server.requests if path.split("?")[0] == HYPERNODES}
    assert statuses == {404}
