"""The fake API server's `/metrics` counts requests as kube-apiserver's `apiserver_request_total` does.

Labels verb (GET/LIST/WATCH/POST/PUT/PATCH/DELETE), group, resource, subresource and code, as
k8s.io/apiserver's endpoints/metrics records them; bench/kubernetes.py reads writes per bound pod
from this counter on either server.
"""

from __future__ import annotations

import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_kit import node, pod, priority_class
from fake_apiserver import FakeApiServer
from kube_http import Kube, KubeError


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


def counts(fake: FakeApiServer) -> dict[tuple[str, ...], int]:
    """The counter's series by (verb, group, resource, subresource, code, version)."""
    req = urllib.request.Request(fake.url + "/metrics", headers={"Authorization": "Bearer admin"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    out: dict[tuple[str, ...], int] = {}
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{"):
            inner, _, value = line[len("apiserver_request_total{") :].rpartition("} ")
            labels = dict(kv.split("=", 1) for kv in inner.split(","))
            labels = {k: v.strip('"') for k, v in labels.items()}
            key = tuple(labels[k] for k in ("verb", "group", "resource", "subresource", "code", "version"))
            out[key] = out.get(key, 0) + int(value)
    return out


def series(verb: str, group: str, resource: str, sub: str, code: int, version: str = "v1") -> tuple[str, ...]:
    return (verb, group, resource, sub, str(code), version)


def test_metrics_count_each_request_by_verb_resource_subresource_and_code(fake: FakeApiServer) -> None:
    kube = Kube(fake.url, "admin")
    kube.create(node("n1", 4))
    kube.create(priority_class("x", 1))
    kube.create(pod("default", "p1", "", 1, "x"))
    binding = {"metadata": {"name": "p1"}, "target": {"kind": "Node", "name": "n1"}}
    kube.request("POST", "/api/v1/namespaces/default/pods/p1/binding", binding)
    with pytest.raises(KubeError):  # already bound: 409
        kube.request("POST", "/api/v1/namespaces/default/pods/p1/binding", binding)
    kube.list("Pod", "default")
    kube.get("Pod", "p1", "default")
    kube.list("Queue")
    got = counts(fake)
    assert got[series("POST", "", "nodes", "", 201)] == 1
    assert got[series("POST", "", "pods", "", 201)] == 1
    assert got[series("POST", "", "pods", "binding", 201)] == 1
    assert got[series("POST", "", "pods", "binding", 409)] == 1
    assert got[series("LIST", "", "pods", "", 200)] == 1
    assert got[series("GET", "", "pods", "", 200)] == 1
    assert got[series("LIST", "scheduling.volcano.sh", "queues", "", 200, "v1beta1")] == 1
    assert not any(k[2] == "" for k in got)  # discovery and /metrics aside
