"""The Kubernetes adapter lists and watches Numatopology objects; without the CRD (404) it goes on.

Against the fake API server (the real wire protocol): a Numatopology created before the listing
is logged as NumatopologyUpserted and projects into the snapshot; one created later arrives by
the watch.  A server without the nodeinfo.volcano.sh CRD answers 404: the listing logs the other
kinds, says so once at info level, and no watch of numatopologies is opened (no retry storm).
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
from fumarole.daemon.adapters.kubernetes.source import KubeSource
from fumarole.store.events import NumatopologyUpserted


def numatopo(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "best-effort"},
            "numares": {"cpu": {"allocatable": "0-3", "capacity": 4}},
            "cpuDetail": {str(c): {"numa": c // 2, "socket": 0, "core": c} for c in range(4)},
        },
    }


def test_numatopologies_are_listed_and_watched(tmp_path: Path) -> None:
    server = FakeApiServer().start()
    try:
        kube = Kube(server.url, "admin")
        kube.create(node("nt-n1", 4))
        kube.patch_status("Node", "nt-n1", "", node_status(4))
        kube.create(numatopo("nt-n1"))
        kc = write_kubeconfig(tmp_path / "kubeconfig", server.url, "admin")
        got: list[Any] = []

        async def go() -> None:
            api = await KubeApi.connect(str(kc))
            try:
                source = KubeSource(api, ["volcano"], clock=lambda: 7)
                events, _keys = await source.list_all()
                got.extend(e for e in events if isinstance(e, NumatopologyUpserted))

                async def submit(evs: list[Any], keys: list[Any]) -> None:
                    got.extend(e for e in evs if isinstance(e, NumatopologyUpserted))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(source.run, submit)
                    await anyio.sleep(0.3)
                    await anyio.to_thread.run_sync(kube.create, numatopo("nt-n2"))
                    with anyio.fail_after(10):
                        while len(got) < 2:
                            await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()
            finally:
                await api.close()

        anyio.run(go)
        assert [e.name for e in got] == ["nt-n1", "nt-n2"]
        assert got[0].manifest["spec"]["numares"]["cpu"]["allocatable"] == "0-3"
    finally:
        server.stop()


def test_without_the_crd_the_adapter_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = FakeApiServer(numa_crd=False).start()
    try:
        kube = Kube(server.url, "admin")
        kube.create(node("nt-n1", 4))
        kc = write_kubeconfig(tmp_path / "kubeconfig", server.url, "admin")

        async def go() -> tuple[list[Any], dict[str, int]]:
            api = await KubeApi.connect(str(kc))
            try:
                source = KubeSource(api, ["volcano"], clock=lambda: 7)
                events, _keys = await source.list_all()

                async def submit(evs: list[Any], keys: list[Any]) -> None:
                    return None

                async with anyio.create_task_group() as tg:
                    tg.start_soon(source.run, submit)
                    await anyio.sleep(0.5)
                    tg.cancel_scope.cancel()
                return events, source.absent
            finally:
                await api.close()

        with caplog.at_level(logging.INFO):
            events, absent = anyio.run(go)
        assert absent == {"Numatopology": 404}
        assert any(type(e).__name__ == "NodeUpserted" for e in events)
        said = [r for r in caplog.records if "Numatopology CRD is not installed" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.INFO
        numa_requests = [p for _m, p, _s in server.requests if "numatopologies" in p]
        assert len(numa_requests) == 1  # the one list that answered 404; no watch, no retries
        # (listed again only after `absent_recheck`, 600 s by default, as HyperNodes)
    finally:
        server.stop()
