"""`fumarole run --adapter kubernetes` with a `metrics:` section: the daemon polls a Prometheus
(a real aiohttp server in a thread, answering Volcano's queries) beside its watches, logs the
samples as NodeUsageObserved, and the usage plugin keeps pods off the node over its CPU limit;
`fumarole replay` re-decides every cycle identically."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from fumarole_e2e_kit import FUMAROLE, assert_replays_identically, env, read_log

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))
from cluster_kit import node, node_status, pod, wait_for
from fake_apiserver import ALL, FakeApiServer
from kube_http import Kube, write_kubeconfig

from fumarole.daemon.adapters.kubernetes.metrics import cpu_query, memory_query
from fumarole.store.events import BindDecided, NodeUsageObserved

LOAD = {cpu_query("u1"): "95", memory_query("u1"): "10", cpu_query("u2"): "12.5", memory_query("u2"): "20"}


class Prometheus:
    """/api/v1/query on 127.0.0.1 in a thread of its own."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.port = 0
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def _query(self, request: web.Request) -> web.Response:
        form: Any = await request.post()
        q = form["query"]
        self.queries.append(q)
        result = [{"metric": {}, "value": [float(form["time"]), LOAD[q]]}] if q in LOAD else []
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/api/v1/query", self._query)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    def __enter__(self) -> Prometheus:
        self._thread.start()
        self._ready.wait(30)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)


@pytest.fixture
def prometheus() -> Iterator[Prometheus]:
    with Prometheus() as p:
        yield p


def test_prometheus_usage_is_polled_logged_and_steers_binds(prometheus: Prometheus, tmp_path: Path) -> None:
    with FakeApiServer(tokens={"admin": ALL}) as fake:
        kube = Kube(fake.url, "admin")
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "um"}})
        for name in ("u1", "u2"):
            kube.create(node(name, 8))
            kube.patch_status("Node", name, "", node_status(8))
            kube.merge_patch("Node", name, "", {"spec": {"taints": None}})
        conf = tmp_path / "sched.yaml"
        conf.write_text(
            'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
            "- plugins:\n  - name: predicates\n  - name: usage\n"
            f"metrics:\n  type: prometheus\n  address: http://127.0.0.1:{prometheus.port}\n  interval: 1s\n"
        )
        kc = write_kubeconfig(tmp_path / "kubeconfig", fake.url, "admin")
        data = tmp_path / "data"
        proc = subprocess.Popen(
            [FUMAROLE, "run", "--adapter", "kubernetes", "--kubeconfig", str(kc), "--conf", str(conf),
             "--data-dir", str(data), "--no-api", "--schedule-period", "0.3"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env(FUMAROLE_LEADER_ELECT="false"),
        )  # fmt: skip
        try:
            wait_for("two polls of both nodes", lambda: len(prometheus.queries) >= 8)
            for i in range(3):
                manifest = pod("um", f"p{i}", "", 1, "")
                del manifest["metadata"]["annotations"]  # the PodGroup controller's implicit group
                del manifest["spec"]["priorityClassName"]
                kube.create(manifest)
            wait_for(
                "three binds",
                lambda: len([p for p in kube.list("Pod", "um") if p["spec"].get("nodeName")]) == 3,
            )
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    rows = read_log(data / "fumarole.db")
    usage = [r.event for r in rows if isinstance(r.event, NodeUsageObserved)]
    assert {(u.node, u.cpu, u.memory, u.source) for u in usage} == {
        ("u1", 95.0, 10.0, "prometheus"),
        ("u2", 12.5, 20.0, "prometheus"),
    }
    assert all(u.metrics_ms == u.at_ms > 0 for u in usage)
    binds = {r.event.name: r.event.node for r in rows if isinstance(r.event, BindDecided)}
    assert binds == {"p0": "u2", "p1": "u2", "p2": "u2"}  # u1 is over the 80% CPU limit
    assert_replays_identically(data / "fumarole.db")
