"""Record the API server's answers the fake models, into tests/k8s/payloads/ (run by hand).

`python tests/k8s/record_payloads.py ENVFILE [OUTDIR]` against a real kube-apiserver started with
../shared/k8s/start.sh DIR (ENVFILE = DIR/env); without a real server, point it at the fake
(`--fake`) to see what the fake answers.  Each payload is one JSON file: a list, watch frames
(ADDED, MODIFIED, DELETED, BOOKMARK, an ERROR carrying 410 Expired), the Status answers of a
binding (201), a second binding (409), a missing pod (404), a stale update (409), a forbidden list
(403) and a PodGroup merge patch.  uids, timestamps and resourceVersions vary from run to run;
tests/k8s/test_fake_payload_shapes.py compares shapes (keys and types), not values.
"""

from __future__ import annotations

import json
import ssl
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_kit import node_status, pod, podgroup, priority_class, queue
from kube_http import Kube, KubeError


def record(api: str, token: str, out: Path) -> None:
    k = Kube(api, token)
    ns = "rec" + uuid.uuid4().hex[:6]
    saved: dict[str, Any] = {}

    def err(fn: Any) -> Any:
        try:
            fn()
        except KubeError as e:
            return e.body
        raise AssertionError("expected an error")

    k.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    k.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": ns + "-n"}})
    k.patch_status("Node", ns + "-n", "", node_status(4))
    k.create(queue(ns + "-q", 1))
    k.create(priority_class(ns + "-pc", 5))
    start = k.request("GET", "/api/v1/namespaces/" + ns + "/pods")["metadata"]["resourceVersion"]
    k.create(podgroup(ns, "g", ns + "-q", 1, ns + "-pc"))
    created = k.create(pod(ns, "p", "g", 1, ns + "-pc"))
    saved["pod_created"] = created
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "uid": created["metadata"]["uid"], "annotations": {"x/y": "1"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": ns + "-n"},
    }
    saved["binding_201"] = k.request("POST", k.path("Pod", "p", ns, "binding"), binding)
    saved["binding_409_already_bound"] = err(
        lambda: k.request("POST", k.path("Pod", "p", ns, "binding"), binding)
    )
    gone = {**binding, "metadata": {"name": "nope"}}
    saved["binding_404_gone"] = err(lambda: k.request("POST", k.path("Pod", "nope", ns, "binding"), gone))
    saved["binding_400_name_mismatch"] = err(
        lambda: k.request("POST", k.path("Pod", "nope", ns, "binding"), binding)
    )
    saved["get_404"] = err(lambda: k.get("Pod", "nope", ns))
    stale = dict(k.get("PodGroup", "g", ns))
    k.request(
        "PATCH",
        k.path("PodGroup", "g", ns),
        {"status": {"phase": "Running", "running": 1}},
        "application/merge-patch+json",
    )
    saved["podgroup_after_merge_patch"] = k.get("PodGroup", "g", ns)
    saved["update_409_conflict"] = err(lambda: k.request("PUT", k.path("PodGroup", "g", ns), stale))
    saved["podgroup_status_404"] = err(
        lambda: k.request("PATCH", k.path("PodGroup", "g", ns, "status"), {}, "application/merge-patch+json")
    )
    k.patch_status("Pod", "p", ns, {"phase": "Running"})
    saved["pod_list"] = k.request("GET", f"/api/v1/namespaces/{ns}/pods")
    saved["podgroup_list"] = k.request(
        "GET", f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
    )
    k.delete("Pod", "p", ns, grace=0)
    saved["watch_frames"] = watch(api, token, f"/api/v1/namespaces/{ns}/pods", start, 3)
    saved["discovery_volcano"] = k.request("GET", "/apis/scheduling.volcano.sh/v1beta1")
    # a core/v1 Event as daemon/adapters/kubernetes/events.py writes one, its patch, and the refusals
    meta = created["metadata"]
    event = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": "p.18a2b3c4d5e6f708", "namespace": ns},
        "involvedObject": {
            "kind": "Pod",
            "namespace": ns,
            "name": "p",
            "uid": meta["uid"],
            "apiVersion": "v1",
            "resourceVersion": meta["resourceVersion"],
        },
        "reason": "Scheduled",
        "message": f"Successfully assigned {ns}/p to {ns}-n",
        "source": {"component": "volcano"},
        "firstTimestamp": "2026-11-25T10:00:00Z",
        "lastTimestamp": "2026-11-25T10:00:00Z",
        "count": 1,
        "type": "Normal",
        "eventTime": None,
        "reportingComponent": "volcano",
        "reportingInstance": "",
    }
    events = f"/api/v1/namespaces/{ns}/events"
    smp = "application/strategic-merge-patch+json"
    saved["event_created"] = k.request("POST", events, event)
    saved["event_409_already_exists"] = err(lambda: k.request("POST", events, event))
    saved["event_after_strategic_merge_patch"] = k.request(
        "PATCH",
        f"{events}/p.18a2b3c4d5e6f708",
        {"count": 2, "lastTimestamp": "2026-11-25T10:00:07Z", "message": event["message"]},
        smp,
    )
    saved["event_patch_404_gone"] = err(lambda: k.request("PATCH", f"{events}/p.gone", {"count": 2}, smp))
    sa = "rec" + uuid.uuid4().hex[:6]
    k.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}})
    tr = k.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    saved["list_403_forbidden"] = err(lambda: Kube(api, tr["status"]["token"]).list("Node"))
    out.mkdir(parents=True, exist_ok=True)
    for name, body in saved.items():
        (out / f"{name}.json").write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(saved)} payloads into {out}")


def watch(api: str, token: str, path: str, rv: str, timeout: int) -> list[Any]:
    url = f"{api}{path}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds={timeout}"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(req, context=ctx, timeout=timeout + 10) as r:
        return [json.loads(line) for line in r.read().splitlines() if line.strip()]


def main() -> None:
    if sys.argv[1] == "--fake":
        from fake_apiserver import FakeApiServer

        fake = FakeApiServer(tokens={"admin": "*"}, bookmark_interval=1.0).start()
        try:
            record(fake.url, "admin", Path(sys.argv[2]))
        finally:
            fake.stop()
        return
    env = {}
    for line in Path(sys.argv[1]).read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value.strip("'\"")
    record(
        env["K8S_API"],
        env["K8S_TOKEN"],
        Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).parent / "payloads",
    )


if __name__ == "__main__":
    main()
