"""deploy/: the systemd unit, the container file and the compose file, checked statically."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from daemon.runtime.settings import load_settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _unit() -> configparser.RawConfigParser:
    cp = configparser.RawConfigParser(strict=False, interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read(DEPLOY / "systemd" / "fumarole.service")
    return cp


def test_unit_has_notify_watchdog_restart_and_hardening() -> None:
    svc = _unit()["Service"]
    assert svc["Type"] == "notify"
    assert int(svc["WatchdogSec"]) > 0
    assert svc["Restart"] == "on-failure"
    assert svc["StateDirectory"] == "fumarole"
    for key in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "DynamicUser"):
        assert key in svc, key
    assert "fumarole run" in svc["ExecStart"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_unit_verifies(tmp_path: Path) -> None:
    text = (DEPLOY / "systemd" / "fumarole.service").read_text()
    exe = shutil.which("true") or "/bin/true"
    unit = tmp_path / "fumarole.service"
    unit.write_text(text.replace("/opt/fumarole/venv/bin/fumarole", exe))
    p = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    problems = [
        line
        for line in (p.stdout + p.stderr).splitlines()
        if "fumarole.service" in line and "Failed to" not in line and "bus" not in line.lower()
    ]
    assert problems == [], p.stdout + p.stderr


def test_example_settings_file_loads() -> None:
    s = load_settings(str(DEPLOY / "systemd" / "fumarole.toml"), env={})
    assert s.log_format == "json"


def test_containerfile_non_root_volume_healthcheck() -> None:
    lines = [ln.strip() for ln in (DEPLOY / "container" / "Containerfile").read_text().splitlines()]
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert any(ln.startswith("VOLUME") and "/var/lib/fumarole" in ln for ln in lines)
    assert any(ln.startswith("HEALTHCHECK") for ln in lines)
    assert any("/healthz" in ln for ln in lines)
    assert any(ln.startswith("STOPSIGNAL SIGTERM") for ln in lines)
    copied = [ln.split()[1] for ln in lines if ln.startswith("COPY ") and "--from" not in ln]
    root = DEPLOY.parent
    for src in copied:
        assert (root / src).exists(), f"Containerfile copies {src}, which does not exist"


def test_compose_runs_daemon_with_jaeger() -> None:
    doc = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = doc["services"]
    assert "jaeger" in services and "fumarole" in services
    env = services["fumarole"]["environment"]
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"].endswith(":4318")
    assert "4318:4318" in services["jaeger"]["ports"]
    assert services["fumarole"]["build"]["dockerfile"] == "deploy/container/Containerfile"
