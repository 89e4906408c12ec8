"""Objects and a workload for the Kubernetes tests, created through the API like a user would.

`workload(ns)` is a small batch workload: 4 nodes of 8 cpu, queues of weight 1 and 3, two
priority classes, gangs of 1-4 pods (PodGroups with minMember = size).  `as_manifests` turns what
the API holds into the manifests `fumarole schedule --now` reads, to compare placements.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fake_apiserver import FakeApiServer
from kube_http import Kube, KubeError

KIT = Path(__file__).resolve().parents[2].parent / "shared" / "k8s"


def node(name: str, cpu: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
    }


def node_status(cpu: int) -> dict[str, Any]:
    res = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"}
    return {
        "capacity": res,
        "allocatable": res,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}],
    }


def queue(name: str, weight: int, reclaimable: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "reclaimable": reclaimable},
    }


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def podgroup(ns: str, name: str, queue_name: str, members: int, pc: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": members, "queue": queue_name, "priorityClassName": pc},
    }


def pod(ns: str, name: str, group: str, cpu: int, pc: str, scheduler: str = "volcano") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": scheduler,
            "priorityClassName": pc,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}},
                }
            ],
        },
    }


class Workload:
    """A named set of cluster objects (unique names per test: cluster-scoped objects outlive a test)."""

    def __init__(
        self, ns: str, *, gangs: int = 8, nodes: int = 4, node_cpu: int = 8, evictions: bool = True
    ) -> None:
        """`evictions=False`: queues not reclaimable and one priority, so nothing is ever evicted."""
        self.ns = ns
        self.reclaimable = evictions
        p = ns  # prefix for cluster-scoped names
        self.nodes = [(f"{p}-n{i}", node_cpu) for i in range(nodes)]
        self.queues = [(f"{p}-qa", 1), (f"{p}-qb", 3)]
        self.pcs = [(f"{p}-low", 10), (f"{p}-high", 1000)]
        self.groups: list[tuple[str, str, int, int, str]] = []  # name, queue, members, cpu, pc
        for i in range(gangs):
            q = self.queues[0][0] if i % 3 != 2 else self.queues[1][0]
            pc = self.pcs[1][0] if i % 4 == 3 and evictions else self.pcs[0][0]
            self.groups.append((f"g{i}", q, 1 + i % 4, 2 + i % 3, pc))

    def pods(self) -> list[tuple[str, str]]:
        return [(g, f"{g}-{j}") for g, _q, n, _c, _pc in self.groups for j in range(n)]

    def create_cluster(self, kube: Kube) -> None:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}})
        for name, cpu in self.nodes:
            kube.create(node(name, cpu))
            kube.patch_status("Node", name, "", node_status(cpu))
            # The node lifecycle controller's part: a Ready node loses the not-ready taint that
            # the API server's TaintNodesByCondition admission put on it at creation.
            kube.merge_patch("Node", name, "", {"spec": {"taints": None}})
        for name, weight in self.queues:
            kube.create(queue(name, weight, self.reclaimable))
            kube.patch_status("Queue", name, "", {"state": "Open"})
        for name, value in self.pcs:
            kube.create(priority_class(name, value))

    def create_jobs(self, kube: Kube) -> None:
        for g, q, n, cpu, pc in self.groups:
            kube.create(podgroup(self.ns, g, q, n, pc))
            for j in range(n):
                kube.create(pod(self.ns, f"{g}-{j}", g, cpu, pc))

    def cleanup(self, kube: Kube) -> None:
        for name, _ in self.nodes:
            _quiet(lambda n=name: kube.delete("Node", n))
        for name, _ in self.queues:
            _quiet(lambda n=name: kube.delete("Queue", n))
        for name, _ in self.pcs:
            _quiet(lambda n=name: kube.delete("PriorityClass", n))


def _quiet(fn: Callable[[], Any]) -> None:
    with contextlib.suppress(KubeError):
        fn()


def as_manifests(kube: Kube, w: Workload) -> list[dict[str, Any]]:
    """The workload's objects as the API holds them now, pods unbound (for `fumarole schedule --now`)."""
    out: list[dict[str, Any]] = []
    names = {n for n, _ in w.nodes} | {n for n, _ in w.queues} | {n for n, _ in w.pcs}
    for kind in ("Node", "Queue", "PriorityClass"):
        for obj in kube.list(kind):
            if obj["metadata"]["name"] in names:
                out.append(_clean(kind, obj))
    out.append(_clean("Namespace", kube.get("Namespace", w.ns)))
    for obj in kube.list("PodGroup", w.ns):
        obj = _clean("PodGroup", obj)
        obj.pop("status", None)
        out.append(obj)
    for obj in kube.list("Pod", w.ns):
        obj = _clean("Pod", obj)
        obj["spec"].pop("nodeName", None)
        obj["status"] = {"phase": "Pending"}
        out.append(obj)
    return out


_API_VERSIONS = {
    "Node": "v1",
    "Namespace": "v1",
    "Pod": "v1",
    "Queue": "scheduling.volcano.sh/v1beta1",
    "PodGroup": "scheduling.volcano.sh/v1beta1",
    "PriorityClass": "scheduling.k8s.io/v1",
}


def _clean(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    obj = dict(obj)
    obj["kind"] = kind
    obj["apiVersion"] = _API_VERSIONS[kind]
    meta = dict(obj["metadata"])
    meta.pop("managedFields", None)
    obj["metadata"] = meta
    return obj


def wait_for(what: str, check: Callable[[], Any], timeout: float = 120.0, every: float = 0.25) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` (no timing assertion)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def real_apiserver_env(tmp: Path) -> dict[str, str] | None:
    """Start ../shared/k8s/start.sh when KUBE_APISERVER is set; its env (K8S_API, K8S_TOKEN, ...) or None."""
    if not os.environ.get("KUBE_APISERVER"):
        return None
    r = subprocess.run([str(KIT / "start.sh"), str(tmp)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"kube-apiserver did not start:\n{r.stdout}\n{r.stderr}")
    env = {}
    for line in (tmp / "env").read_text().splitlines():
        k, _, v = line.removeprefix("export ").partition("=")
        env[k] = v.strip("'\"")
    return env


def stop_real_apiserver(tmp: Path) -> None:
    subprocess.run([str(KIT / "stop.sh"), str(tmp)], check=False, capture_output=True)


@dataclass
class ApiServer:
    """The API server a test talks to: a real one (KUBE_APISERVER) or the fake (`fake` set)."""

    url: str
    token: str
    fake: FakeApiServer | None

    def kube(self, token: str | None = None) -> Kube:
        return Kube(self.url, token or self.token)


@contextlib.contextmanager
def api_server(tmp: Path, **fake_settings: Any) -> Iterator[ApiServer]:
    """A real kube-apiserver through ../shared/k8s/start.sh when KUBE_APISERVER is set (its admin
    token), else the fake with `fake_settings` (its tokens must grant "admin"); stopped after."""
    real = real_apiserver_env(tmp)
    if real is not None:
        try:
            yield ApiServer(real["K8S_API"], real["K8S_TOKEN"], None)
        finally:
            stop_real_apiserver(tmp)
        return
    with FakeApiServer(**fake_settings) as fake:
        yield ApiServer(fake.url, "admin", fake)
