"""Benchmark of the Kubernetes adapter: binds per second through an API server; prints one JSON object.

Creates `--nodes` Nodes (32 cpu each, Ready, untainted), two Queues and `--pods` pending pods in
gangs of `--gang` (a PodGroup each, minMember = gang) through the API, with `fumarole run
--adapter kubernetes` already running; then polls the API until every pod is bound.
`first_pod_to_last_bind_s` is from the first pod's creation to the moment the last bind was seen
(polling every `--poll` s), `binds_per_s` = pods / that, `create_s` how long creating the pods
took (the API's own write rate bounds everything else).  `core_session_s` is the same placement
by the pure core (`fumarole schedule --now manifests` over the same objects, one session, its
wall time), `core_binds` its number of binds.

The API server is the fake (tests/k8s/fake_apiserver.py, in this process) unless KUBE_APISERVER
names a kube-apiserver binary: then ../shared/k8s/start.sh starts a real one (with etcd).

Usage: python bench/kubernetes.py [--nodes 1000] [--pods 10000] [--gang 10] [--threads 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "k8s"))

import yaml  # noqa: E402
from cluster_kit import (  # noqa: E402
    node,
    node_status,
    pod,
    podgroup,
    priority_class,
    queue,
    real_apiserver_env,
    stop_real_apiserver,
)
from fake_apiserver import ALL, FakeApiServer  # noqa: E402
from kube_http import Kube, write_kubeconfig  # noqa: E402

FUMAROLE = str(Path(sys.executable).parent / "fumarole")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--gang", type=int, default=10)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--poll", type=float, default=1.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fumarole-bench-k8s-"))
    real = real_apiserver_env(tmp / "k8s") if os.environ.get("KUBE_APISERVER") else None
    fake = None
    if real is None:
        fake = FakeApiServer(tokens={"admin": ALL}, bookmark_interval=30).start()
        url, token = fake.url, "admin"
    else:
        url, token = real["K8S_API"], real["K8S_TOKEN"]
    kube = Kube(url, token)
    ns = "bench"
    daemon = None
    try:
        out = run(kube, url, token, ns, tmp, args, fake)
        out["server"] = "kube-apiserver (real)" if real else "fake (tests/k8s/fake_apiserver.py)"
        if fake is not None:  # what the daemon asked of the API, by verb and resource
            calls: dict[str, int] = {}
            for method, path, _status in fake.requests:
                if "watch=" in path:
                    continue
                parts = path.split("?")[0].split("/")
                what = f"{method} {parts[-1] if parts[-1] in ('binding', 'status') else parts[-2]}"
                calls[what] = calls.get(what, 0) + 1
            out["api_calls"] = dict(sorted(calls.items(), key=lambda kv: -kv[1])[:8])
        print(json.dumps(out, indent=1))
    finally:
        if daemon is not None:
            daemon.kill()
        if fake is not None:
            fake.stop()
        if real is not None:
            stop_real_apiserver(tmp / "k8s")


def all_bound(kube: Kube, ns: str, fake: FakeApiServer | None, total: int) -> bool:
    """Whether every pod is bound: the fake's store is read directly (listing 10,000 pods through
    it would load it); a real server is asked for the pods still without a node (a field selector,
    cheap once most are bound)."""
    if fake is None:
        left = kube.request("GET", f"/api/v1/namespaces/{ns}/pods?fieldSelector=spec.nodeName%3D")["items"]
        return not left

    def count() -> int:
        pods = next(objs for res, objs in fake.store.objects.items() if res.plural == "pods")
        return sum(1 for (pns, _), p in pods.items() if pns == ns and p["spec"].get("nodeName"))

    return int(fake.call(count)) >= total


def run(
    kube: Kube, url: str, token: str, ns: str, tmp: Path, args: Any, fake: FakeApiServer | None
) -> dict[str, Any]:
    pool = ThreadPoolExecutor(args.threads)
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name, weight in (("qa", 1), ("qb", 3)):
        kube.create(queue(name, weight))
        kube.patch_status("Queue", name, "", {"state": "Open"})
    kube.create(priority_class("normal", 10))

    def add_node(i: int) -> None:
        name = f"n{i:05d}"
        kube.create(node(name, 32))
        kube.patch_status("Node", name, "", node_status(32))
        kube.merge_patch("Node", name, "", {"spec": {"taints": None}})

    t0 = time.monotonic()
    list(pool.map(add_node, range(args.nodes)))
    nodes_s = time.monotonic() - t0
    gangs = args.pods // args.gang
    groups = [(f"g{i:05d}", "qa" if i % 4 else "qb") for i in range(gangs)]
    for g, q in groups:
        kube.create(podgroup(ns, g, q, args.gang, "normal"))

    kc = write_kubeconfig(tmp / "kubeconfig", url, token)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FUMAROLE_", "OTEL_"))}
    env |= {"FUMAROLE_LOG_LEVEL": "warning"}
    daemon = subprocess.Popen(
        [
            FUMAROLE,
            "run",
            "--adapter",
            "kubernetes",
            "--kubeconfig",
            str(kc),
            "--data-dir",
            str(tmp / "data"),
            "--no-api",
            "--schedule-period",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp / "daemon.err", "w"),  # noqa: SIM115
        env=env,
    )
    try:
        time.sleep(3)  # listed and leading
        specs = [(g, f"{g}-{j}") for g, _q in groups for j in range(args.gang)]
        first = time.monotonic()
        list(pool.map(lambda s: kube.create(pod(ns, s[1], s[0], 1, "normal")), specs))
        created = time.monotonic()
        while True:
            if daemon.poll() is not None:
                raise SystemExit(f"the daemon exited: {(tmp / 'daemon.err').read_text()[-2000:]}")
            time.sleep(args.poll)
            if all_bound(kube, ns, fake, len(specs)):
                break
        last = time.monotonic()
    finally:
        daemon.terminate()
        daemon.wait(60)
    elapsed = last - first

    # The pure core over the same objects (pods unbound), one session.
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {**priority_class("normal", 10)},
        queue("qa", 1),
        queue("qb", 3),
    ]
    objs += [{**node(f"n{i:05d}", 32), "status": node_status(32)} for i in range(args.nodes)]
    objs += [podgroup(ns, g, q, args.gang, "normal") for g, q in groups]
    objs += [pod(ns, p, g, 1, "normal") for g, p in specs]
    dump = tmp / "objects.yaml"
    dump.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    t = time.monotonic()
    r = subprocess.run(
        [FUMAROLE, "schedule", "--now", "manifests", "--cluster", str(dump), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
    )
    core_s = time.monotonic() - t
    core_binds = len(json.loads(r.stdout)["binds"]) if r.returncode == 0 else -1
    return {
        "nodes": args.nodes,
        "pods": len(specs),
        "gang": args.gang,
        "nodes_create_s": round(nodes_s, 2),
        "pods_create_s": round(created - first, 2),
        "first_pod_to_last_bind_s": round(elapsed, 2),
        "binds_per_s": round(len(specs) / elapsed, 1),
        "core_session_s": round(core_s, 2),
        "core_binds": core_binds,
    }


if __name__ == "__main__":
    main()
