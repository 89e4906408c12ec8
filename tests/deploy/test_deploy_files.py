"""deploy/: the systemd unit, the container file and the compose file, checked statically."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fumarole.daemon.runtime.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# image:tag@sha256:<64 hex> (a registry host with a port would also have a colon: none is used here)
PINNED_IMAGE = re.compile(r"^[a-z0-9./_-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$")


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


def _containerfile_lines() -> list[str]:
    return [ln.strip() for ln in (DEPLOY / "container" / "Containerfile").read_text().splitlines()]


def test_every_base_image_is_pinned_by_digest() -> None:
    froms = [ln.split()[1] for ln in _containerfile_lines() if ln.upper().startswith("FROM ")]
    assert froms, "no FROM in the Containerfile"
    for image in froms:
        assert PINNED_IMAGE.match(image), f"Containerfile: FROM {image} is not image:tag@sha256:<digest>"
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    for name, service in services.items():
        if "image" in service:
            assert PINNED_IMAGE.match(service["image"]), f"compose.yaml: service {name}: image not pinned"
        else:
            assert "build" in service, f"compose.yaml: service {name} has neither image nor build"


def test_container_installs_the_hash_checked_runtime_lock() -> None:
    text = "\n".join(_containerfile_lines())
    assert "--require-hashes -r requirements/runtime.txt" in text
    assert "--no-deps ." in text  # fumarole itself: nothing resolved past the lock


def _dockerignore_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex: `**/` any directories, `*` and `?` within one name."""
    out = ""
    for token in re.split(r"(\*\*/|\*|\?|\[[^\]]*\])", pattern):
        if token == "**/":
            out += "(?:.*/)?"
        elif token == "*":
            out += "[^/]*"
        elif token == "?":
            out += "[^/]"
        elif token.startswith("["):
            out += token
        else:
            out += re.escape(token)
    return re.compile(out)


def _dockerignore_excludes(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent directories wins."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        regex = _dockerignore_regex(pattern.removeprefix("!"))
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            excluded = not negated
    return excluded


def test_dockerignore_keeps_the_venv_and_data_out_and_what_the_image_copies_in() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    for path in (
        ".venv",
        ".venv/bin/python",
        ".git",
        "fumarole-data/fumarole.db",
        ".mypy_cache",
        ".pytest_cache",
        ".hypothesis",
        "tests/deploy/test_deploy_files.py",
        "daemon/__pycache__/cli.cpython-311.pyc",
        "fumarole.egg-info/PKG-INFO",
    ):
        assert _dockerignore_excludes(patterns, path), f".dockerignore lets {path} into the build context"
    copied = [ln.split()[1] for ln in _containerfile_lines() if ln.startswith("COPY ") and "--from" not in ln]
    for src in copied:
        for path in [src] + [str(p.relative_to(ROOT)) for p in sorted((ROOT / src).rglob("*.py"))[:5]]:
            assert not _dockerignore_excludes(patterns, path), f".dockerignore excludes {path}, copied"


def _systemd_section_of_readme() -> str:
    """The install steps of docs/daemon.md's systemd section (where the README sends readers)."""
    page = (ROOT / "docs" / "daemon.md").read_text()
    start = page.index("## Running under systemd")
    return page[start : page.index("\n## ", start + 1)]


def test_unit_documentation_targets_exist() -> None:
    docs = _unit()["Unit"]["Documentation"].split()
    assert docs
    installs = _systemd_section_of_readme()
    for url in docs:
        scheme, _, rest = url.partition(":")
        assert scheme in ("file", "http", "https"), f"Documentation={url}: no man page or info ships"
        if scheme == "file":
            target = rest.removeprefix("//")
            # docs/daemon.md's install steps put a repository file there
            m = re.search(r"install [^\n]*?(\S+) " + re.escape(target) + r"\s", installs)
            assert m, f"Documentation={url}: docs/daemon.md's systemd steps install nothing there"
            assert (ROOT / m.group(1)).is_file(), (
                f"Documentation={url}: {m.group(1)} is not in the repository"
            )
