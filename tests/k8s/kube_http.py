"""A small synchronous Kubernetes REST client for tests (standard library only), and a kubeconfig writer.

Tests create and inspect objects through it the same way against the fake API server
(tests/k8s/fake_apiserver.py) and a real one (`KUBE_APISERVER`, ../shared/k8s/start.sh), and play
the kubelet (`run_pod`, `finish_pod`).
"""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

PATHS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "Event": ("/api/v1", "events", True),
    "ResourceQuota": ("/api/v1", "resourcequotas", True),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "PriorityClass": ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
    "PodGroup": ("/apis/scheduling.volcano.sh/v1beta1", "podgroups", True),
    "Queue": ("/apis/scheduling.volcano.sh/v1beta1", "queues", False),
    "HyperNode": ("/apis/topology.volcano.sh/v1alpha1", "hypernodes", False),
    "Numatopology": ("/apis/nodeinfo.volcano.sh/v1alpha1", "numatopologies", False),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
}


class KubeError(Exception):
    def __init__(self, code: int, body: Any) -> None:
        super().__init__(f"{code}: {body}")
        self.code = code
        self.body = body


class Kube:
    def __init__(self, api: str, token: str) -> None:
        self.api = api.rstrip("/")
        self.token = token
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE

    def request(self, method: str, path: str, body: Any = None, ctype: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")
            raise KubeError(e.code, parsed) from None

    @staticmethod
    def path(kind: str, name: str = "", namespace: str = "", sub: str = "") -> str:
        base, plural, namespaced = PATHS[kind]
        p = f"{base}/namespaces/{namespace}/{plural}" if namespaced and namespace else f"{base}/{plural}"
        if name:
            p += f"/{name}"
        if sub:
            p += f"/{sub}"
        return p

    def create(self, obj: dict[str, Any]) -> Any:
        ns = obj.get("metadata", {}).get("namespace", "")
        return self.request("POST", self.path(obj["kind"], namespace=ns), obj)

    def get(self, kind: str, name: str, namespace: str = "") -> Any:
        return self.request("GET", self.path(kind, name, namespace))

    def list(self, kind: str, namespace: str = "") -> list[dict[str, Any]]:
        return list(self.request("GET", self.path(kind, namespace=namespace))["items"])

    def patch_status(self, kind: str, name: str, namespace: str, status: dict[str, Any]) -> Any:
        return self.request(
            "PATCH",
            self.path(kind, name, namespace, "status"),
            {"status": status},
            "application/merge-patch+json",
        )

    def merge_patch(self, kind: str, name: str, namespace: str, patch: dict[str, Any]) -> Any:
        return self.request("PATCH", self.path(kind, name, namespace), patch, "application/merge-patch+json")

    def delete(self, kind: str, name: str, namespace: str = "", grace: int | None = None) -> Any:
        body = {"gracePeriodSeconds": grace} if grace is not None else None
        return self.request("DELETE", self.path(kind, name, namespace), body)

    def request_totals(self) -> Counter[tuple[str, str, str]]:
        """The server's `apiserver_request_total` by (verb, resource, subresource), summed over codes."""
        req = urllib.request.Request(self.api + "/metrics")
        req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
            return parse_request_totals(r.read().decode())

    # ------------------------------------------------------------------ the kubelet's part
    def run_pod(self, name: str, namespace: str) -> Any:
        """Mark a bound pod Running (what a kubelet reports)."""
        return self.patch_status("Pod", name, namespace, {"phase": "Running"})

    def finish_pod(self, name: str, namespace: str) -> Any:
        return self.patch_status("Pod", name, namespace, {"phase": "Succeeded"})


def write_kubeconfig(path: Path, server: str, token: str) -> Path:
    """A kubeconfig with one cluster/user/context (token auth, TLS verification off for the test CA)."""
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "test", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "current-context": "test",
    }
    path.write_text(json.dumps(cfg, indent=2))
    return path


_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_request_totals(text: str) -> Counter[tuple[str, str, str]]:
    """`apiserver_request_total` samples of a /metrics page by (verb, resource, subresource)."""
    out: Counter[tuple[str, str, str]] = Counter()
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m:
            labels = dict(_LABEL.findall(m["labels"]))
            key = (labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))
            out[key] += int(float(m["value"]))
    return out
