"""Nothing secret is logged: pods carrying secrets (env values, args, command, probes, the
last-applied annotation) through the simulator and through the Kubernetes adapter never show
them in the event log file or in GET /v1/events, and the decisions are those over the pods as
given (an old log still holding the secrets replays identically and is served redacted)."""

from __future__ import annotations

import copy
import json
import signal
import sqlite3
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from fumarole_e2e_kit import (
    FUMAROLE,
    assert_replays_identically,
    env,
    offline_binds,
    read_log,
    rest_url,
    run_daemon,
    start_serve,
    write_small_sim,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

from cluster_kit import Workload, api_server, as_manifests, pod, podgroup, wait_for
from fake_apiserver import ALL
from kube_http import Kube, write_kubeconfig

from fumarole.store.codec import decode, encode
from fumarole.store.events import BindDecided, CycleOpened, PodUpserted

SECRET = "hunter2-s3cr3t"
APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _with_secrets(pod_spec: dict[str, Any]) -> None:
    """Put a secret in every place of a pod spec a secret hides (in place)."""
    for c in pod_spec["containers"]:
        c["env"] = [{"name": "DB_PASSWORD", "value": SECRET}, {"name": "MODE", "value": "prod"}]
        c["command"] = ["/bin/app", f"--password={SECRET}"]
        c["args"] = ["--token", SECRET]
        c["livenessProbe"] = {"exec": {"command": ["check", SECRET]}}
        c["lifecycle"] = {"preStop": {"exec": {"command": ["logout", SECRET]}}}


def _secret_workload(tmp: Path) -> tuple[Path, Path]:
    """The small simulation, its Job templates carrying secrets and the last-applied annotation."""
    c, w = write_small_sim(tmp, jobs=12)
    jobs = list(yaml.safe_load_all(w.read_text()))
    for job in jobs:
        for task in job["spec"]["tasks"]:
            _with_secrets(task["template"]["spec"])
            task["template"]["metadata"]["annotations"][APPLIED] = json.dumps({"env": SECRET})
    w.write_text(yaml.safe_dump_all(jobs, sort_keys=False))
    return c, w


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as resp:
        body: bytes = resp.read()
    return body


def _all_events(base: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    since = 1
    while True:
        page = json.loads(_get(f"{base}/v1/events?since={since}&limit=1000"))
        out += page["items"]
        if page.get("next_since") is None:
            return out
        since = page["next_since"]


@pytest.fixture
def serve() -> Iterator[Any]:
    procs: list[subprocess.Popen[str]] = []

    def start(db: Path) -> str:
        p = start_serve(db)
        procs.append(p)
        return rest_url(p)

    yield start
    for p in procs:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)


def test_the_simulator_logs_and_serves_no_secret_and_an_old_log_replays_identically(
    tmp_path: Path, serve: Any
) -> None:
    c, w = _secret_workload(tmp_path)
    data = tmp_path / "data"
    db = data / "fumarole.db"
    p = run_daemon("--data-dir", str(data), "--cluster", str(c), "--workload", str(w), "--no-api")
    assert p.returncode == 0, p.stdout + p.stderr
    assert SECRET.encode() not in db.read_bytes()  # nowhere in the file: events, index, snapshot
    rows = read_log(db)
    pods = [r.event for r in rows if isinstance(r.event, PodUpserted)]
    assert pods and all(
        c["env"] == [{"name": "DB_PASSWORD"}, {"name": "MODE"}] and "command" not in c
        for ev in pods
        for c in ev.manifest["spec"]["containers"]
    )
    assert not any(APPLIED in ev.manifest["metadata"]["annotations"] for ev in pods)
    served = json.dumps(_all_events(serve(db)))
    assert SECRET not in served and '"DB_PASSWORD"' in served

    # A log written before redaction: the same run with the secrets put back into every pod.
    old = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.execute("VACUUM INTO ?", (str(old),))
    conn.close()
    conn = sqlite3.connect(old)
    with conn:
        conn.execute("DELETE FROM snapshots")  # every reader folds the secret-bearing rows
        for seq, tag, v, body in conn.execute(
            "SELECT seq, type, v, body FROM events WHERE type = 'pod.upserted'"
        ).fetchall():
            ev = decode(tag, v, body)
            assert isinstance(ev, PodUpserted)
            m = copy.deepcopy(ev.manifest)
            _with_secrets(m["spec"])
            m["metadata"]["annotations"][APPLIED] = json.dumps({"env": SECRET})
            new = msgspec.structs.replace(ev, manifest=m)
            conn.execute("UPDATE events SET body = ? WHERE seq = ?", (encode(new), seq))
    conn.close()
    assert SECRET.encode() in old.read_bytes()
    # the decisions recorded over redacted pods are those the scheduler takes over the pods as given
    assert_replays_identically(old)
    # and the API redacts on the way out: the old log's secrets are not served
    old_served = _all_events(serve(old))
    assert len(old_served) == len(rows)
    assert SECRET not in json.dumps(old_served)


def _start_k8s_daemon(url: str, tmp: Path) -> subprocess.Popen[str]:
    kc = write_kubeconfig(tmp / "kubeconfig", url, "admin")
    argv = [
        FUMAROLE,
        "run",
        "--adapter",
        "kubernetes",
        "--kubeconfig",
        str(kc),
        "--data-dir",
        str(tmp / "data"),
    ]
    argv += ["--listen", "127.0.0.1:0", "--schedule-period", "0.3"]
    lease = env(FUMAROLE_LEASE_NAME="fumarole-secrets", FUMAROLE_LEASE_DURATION="3")
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=lease)


def test_the_kubernetes_adapter_logs_and_serves_no_secret_and_decides_as_offline(tmp_path: Path) -> None:
    with api_server(tmp_path / "k8s", tokens={"admin": ALL}, bookmark_interval=0.5) as api:
        kube = Kube(api.url, api.token)
        w = Workload("secrets", gangs=6, evictions=False)
        w.create_cluster(kube)
        originals = {}
        for g, q, n, cpu, pc in w.groups:
            kube.create(podgroup(w.ns, g, q, n, pc))
            for j in range(n):
                p = pod(w.ns, f"{g}-{j}", g, cpu, pc)
                _with_secrets(p["spec"])
                p["metadata"]["annotations"][APPLIED] = json.dumps({"env": SECRET})
                originals[p["metadata"]["name"]] = p
                kube.create(p)
        # the offline session over the objects as the API holds them (secrets included)
        dump = tmp_path / "objects.yaml"
        objects = as_manifests(kube, w)
        assert SECRET in json.dumps(objects)
        dump.write_text(yaml.safe_dump_all(objects, sort_keys=False))
        expected = offline_binds(dump)
        assert expected

        proc = _start_k8s_daemon(api.url, tmp_path)
        try:
            base = rest_url(proc)

            def bound() -> dict[str, str]:
                return {
                    p["metadata"]["name"]: p["spec"]["nodeName"]
                    for p in kube.list("Pod", w.ns)
                    if p["spec"].get("nodeName")
                }

            wait_for("the first cycle's binds in the API", lambda: expected.items() <= bound().items())
            served = json.dumps(_all_events(base))
            assert '"DB_PASSWORD"' in served and SECRET not in served
        finally:
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        db = tmp_path / "data" / "fumarole.db"
        assert SECRET.encode() not in db.read_bytes()
        events = read_log(db)
        first = next(e.event.cycle for e in events if isinstance(e.event, CycleOpened))
        first_binds = {
            e.event.name: e.event.node
            for e in events
            if isinstance(e.event, BindDecided) and e.event.cycle == first
        }
        assert first_binds == expected  # the redacted pods are scheduled as the pods as given
        logged = {e.event.name for e in events if isinstance(e.event, PodUpserted)}
        assert logged == set(originals)
        w.cleanup(kube)
