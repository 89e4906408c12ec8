"""deploy/kubernetes/: the RBAC grants exactly what the adapter checks for; the Deployment as documented."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fumarole.daemon.adapters.kubernetes import lease_permissions
from fumarole.daemon.adapters.kubernetes.client import REQUIRED_PERMISSIONS
from fumarole.daemon.runtime.conf_watch import parse_scheduler_conf

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def _docs() -> dict[str, dict[str, Any]]:
    out = {}
    for f in sorted(DEPLOY.glob("*.yaml")):
        for d in yaml.safe_load_all(f.read_text()):
            if d:
                out[f"{d['kind']}/{d['metadata']['name']}"] = d
    return out


def _grants(role: dict[str, Any], namespace: str = "") -> set[tuple[str, str, str, str, str]]:
    out = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                name, _, sub = res.partition("/")
                for verb in rule["verbs"]:
                    out.add((verb, group, name, sub, namespace))
    return out


def test_the_cluster_role_grants_exactly_what_the_adapter_uses() -> None:
    docs = _docs()
    used = {(p.verb, p.group, p.resource, p.subresource, p.namespace) for p in REQUIRED_PERMISSIONS}
    assert _grants(docs["ClusterRole/fumarole-scheduler"]) == used
    role = docs["Role/fumarole-leader-election"]
    ns = role["metadata"]["namespace"]
    leases = {(p.verb, p.group, p.resource, p.subresource, p.namespace) for p in lease_permissions(ns)}
    assert _grants(role, ns) == leases
    for binding in ("ClusterRoleBinding/fumarole-scheduler", "RoleBinding/fumarole-leader-election"):
        subject = docs[binding]["subjects"][0]
        assert (subject["kind"], subject["name"], subject["namespace"]) == ("ServiceAccount", "fumarole", ns)


def test_the_deployment_runs_two_electing_replicas_with_probes_and_the_conf() -> None:
    docs = _docs()
    dep = docs["Deployment/fumarole"]
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "fumarole"
    c = pod["containers"][0]
    assert c["args"][:3] == ["run", "--adapter", "kubernetes"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["FUMAROLE_LEADER_ELECT"] == "true" and "OTEL_EXPORTER_OTLP_ENDPOINT" in env
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["resources"]["requests"]
    conf_path = c["args"][c["args"].index("--conf") + 1]
    mount = next(m for m in c["volumeMounts"] if conf_path.startswith(m["mountPath"]))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    cm = docs[f"ConfigMap/{volume['configMap']['name']}"]
    text = cm["data"][Path(conf_path).name]
    parse_scheduler_conf(
        text, "configmap", strict=True
    )  # Volcano's default configuration, valid for the daemon
    assert docs["Service/fumarole"]["spec"]["ports"][0]["port"] == 8321


def test_the_probes_and_the_service_names_pass_the_host_allow_list() -> None:
    """kubelet probes a pod as http://<pod IP>:8321 (Host: <pod IP>:8321); in-cluster clients use the
    Service's names: the access rules the Deployment configures answer both, and no other name."""
    from fumarole.api.access import Access
    from fumarole.daemon.runtime.settings import load_settings, split_listen

    c = _docs()["Deployment/fumarole"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    image = (DEPLOY.parent / "container" / "Containerfile").read_text()
    env["FUMAROLE_LISTEN"] = image.split("FUMAROLE_LISTEN=", 1)[1].split()[0]
    env["FUMAROLE_ALLOW_REMOTE"] = "true"
    s = load_settings(env=env)
    access = Access(listen_host=split_listen(s.listen)[0], allowed_hosts=s.allowed_hosts)
    for host in ("10.244.3.7:8321", "[fd00:10:244::7]:8321", "127.0.0.1:8321", "localhost:8321"):
        assert access.host_allowed(host), host
    for host in ("fumarole:8321", "fumarole.fumarole-system.svc.cluster.local:8321"):
        assert access.host_allowed(host), host
    assert not access.host_allowed("rebind.attacker.example:8321")
    token = next(e for e in c["env"] if e["name"] == "FUMAROLE_READ_TOKEN")
    assert token["valueFrom"]["secretKeyRef"]["optional"] is True  # the pods start without the Secret
    assert {c["livenessProbe"]["httpGet"]["path"], c["readinessProbe"]["httpGet"]["path"]} <= {
        "/healthz",
        "/readyz",
    }  # the routes that never need the read token
