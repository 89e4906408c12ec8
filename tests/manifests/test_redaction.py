"""daemon/manifests/redaction.py: what of a pod is dropped before it is logged, and that the
scheduler's decisions over redacted pods are those over the pods as given."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from fumarole.daemon.manifests.redaction import redact_event, redact_pod
from fumarole.store.events import NodeUpserted, PodUpserted

FUMAROLE = str(Path(sys.executable).parent / "fumarole")
SECRET = "hunter2-s3cr3t"


def secret_pod(name: str = "p", cpu: str = "1", **spec: Any) -> dict[str, Any]:
    """A pod whose containers carry a secret in every place a secret hides."""
    container = {
        "name": "app",
        "image": "registry.example/app:1",
        "command": ["/bin/app", f"--db-password={SECRET}"],
        "args": ["--token", SECRET],
        "env": [
            {"name": "DB_PASSWORD", "value": SECRET},
            {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "api", "key": "key"}}},
            {"name": "PLAIN"},
        ],
        "envFrom": [{"secretRef": {"name": "db-credentials"}}],
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu}},
        "ports": [{"containerPort": 8080, "hostPort": 18080}],
        "livenessProbe": {"exec": {"command": ["check", SECRET]}},
        "readinessProbe": {
            "httpGet": {"path": "/", "port": 8080, "httpHeaders": [{"name": "X", "value": SECRET}]}
        },
        "startupProbe": {"tcpSocket": {"port": 8080}},
        "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", f"echo {SECRET}"]}}},
        "volumeMounts": [{"name": "creds", "mountPath": "/creds"}],
    }
    init = {
        "name": "init",
        "image": "busybox",
        "command": ["sh", "-c", f"login {SECRET}"],
        "env": [{"name": "INIT_SECRET", "value": SECRET}],
        "resources": {"requests": {"cpu": "2"}},
        "restartPolicy": "Always",
    }
    applied = json.dumps({"spec": {"containers": [{"env": [{"name": "DB_PASSWORD", "value": SECRET}]}]}})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "a"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied, "keep": "me"},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [container],
            "initContainers": [init],
            "volumes": [{"name": "creds", "secret": {"secretName": "db-credentials"}}],
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            **spec,
        },
    }


def test_every_carrier_of_a_secret_is_dropped_and_the_scheduler_inputs_kept() -> None:
    pod = secret_pod()
    before = copy.deepcopy(pod)
    out = redact_pod(pod)
    assert pod == before  # the input is never changed
    assert SECRET not in json.dumps(out)
    c, init = out["spec"]["containers"][0], out["spec"]["initContainers"][0]
    assert c["env"] == [{"name": "DB_PASSWORD"}, {"name": "API_KEY"}, {"name": "PLAIN"}]
    for gone in ("command", "args", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle"):
        assert gone not in c
    assert c["envFrom"] == [{"secretRef": {"name": "db-credentials"}}]  # a reference, no value
    for kept in ("name", "image", "resources", "ports", "volumeMounts"):
        assert c[kept] == before["spec"]["containers"][0][kept]
    assert init == {
        "name": "init",
        "image": "busybox",
        "env": [{"name": "INIT_SECRET"}],
        "resources": {"requests": {"cpu": "2"}},
        "restartPolicy": "Always",
    }
    assert out["metadata"]["annotations"] == {"keep": "me"}
    assert out["metadata"]["labels"] == {"app": "a"}
    for key in ("volumes", "nodeSelector", "tolerations", "schedulerName"):
        assert out["spec"][key] == before["spec"][key]
    assert redact_pod(out) == out  # idempotent


def test_a_pod_with_nothing_to_drop_is_returned_as_is() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "x"},
        "spec": {"containers": [{"name": "c", "env": [{"name": "A"}]}]},
    }
    assert redact_pod(pod) is pod
    odd: dict[str, Any] = {
        "kind": "Pod",
        "spec": {"containers": ["not a map", {"name": "c", "env": "garbage"}]},
    }
    assert redact_pod(odd)["spec"]["containers"] == ["not a map", {"name": "c"}]
    assert redact_pod({"kind": "Pod", "spec": None}) == {"kind": "Pod", "spec": None}


def test_redact_event_touches_pod_upserts_only() -> None:
    ev = PodUpserted(namespace="default", name="p", manifest=secret_pod(), at_ms=5)
    out = redact_event(ev)
    assert isinstance(out, PodUpserted) and (out.namespace, out.name, out.at_ms) == ("default", "p", 5)
    assert SECRET not in json.dumps(out.manifest)
    node = NodeUpserted(name="n", manifest={"kind": "Node", "metadata": {"name": "n"}})
    assert redact_event(node) is node
    clean = redact_event(out)
    assert clean is out


def test_the_decisions_over_redacted_pods_are_those_over_the_pods_as_given(tmp_path: Path) -> None:
    cluster: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i}", "labels": {"disk": "ssd" if i else "hdd"}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
        for i in range(3)
    ]
    pods = [secret_pod(f"p{i}", cpu=str(1 + i % 3)) for i in range(8)]
    given, redacted = tmp_path / "given.yaml", tmp_path / "redacted.yaml"
    given.write_text(yaml.safe_dump_all([*cluster, *pods], sort_keys=False))
    redacted.write_text(yaml.safe_dump_all([*cluster, *(redact_pod(p) for p in pods)], sort_keys=False))
    outs = []
    for f in (given, redacted):
        r = subprocess.run(
            [FUMAROLE, "schedule", "--cluster", str(f), "--now", "0", "--cycles", "2"],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
        outs.append(json.loads(r.stdout))
    assert outs[0]["binds"], outs[0]  # some pods bound (ssd nodes, host ports, init sidecars)
    assert outs[0] == outs[1]
