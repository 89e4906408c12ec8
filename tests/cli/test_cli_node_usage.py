"""Node usage inputs on the command line: one-line errors (exit 2, nothing created) for bad usage
annotations (`fumarole schedule`), a bad simulator usage script and a bad `metrics:` section
(`fumarole run`); and annotations steering `fumarole schedule`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NODE = (
    "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, annotations: {{{ann}}}}}\n"
    "status: {{allocatable: {{cpu: '4', memory: 8Gi, pods: '10'}}}}\n"
)
POD = (
    "apiVersion: v1\nkind: Pod\n"
    "metadata: {name: p, namespace: default, annotations: {fumarole.io/duration: 10s}}\n"
    "spec: {schedulerName: volcano, containers: [{name: c, resources: {requests: {cpu: '1'}}}]}\n"
)


def fumarole(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("fumarole") or str(Path(sys.executable).parent / "fumarole")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120)


def one_line(p: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for part in parts:
        assert part in lines[0], lines[0]


@pytest.mark.parametrize(
    ("ann", "parts"),
    [
        (
            "usage.fumarole.io/cpu: abc, usage.fumarole.io/memory: '3'",
            ("annotations[usage.fumarole.io/cpu]", "percentage"),
        ),
        (
            "usage.fumarole.io/cpu: '-1', usage.fumarole.io/memory: '3'",
            ("annotations[usage.fumarole.io/cpu]",),
        ),
        ("usage.fumarole.io/cpu: '50'", ("annotations[usage.fumarole.io/memory]", "required")),
        (
            "usage.fumarole.io/cpu: '5', usage.fumarole.io/memory: '3', "
            "usage.fumarole.io/metrics-time: yesterday",
            ("annotations[usage.fumarole.io/metrics-time]", "RFC 3339"),
        ),
    ],
)
def test_bad_usage_annotation(tmp_path: Path, ann: str, parts: tuple[str, ...]) -> None:
    c = tmp_path / "c.yaml"
    c.write_text(NODE.format(name="n1", ann=ann))
    one_line(fumarole("schedule", "--cluster", str(c)), "c.yaml", "Node n1", *parts)


def test_annotations_steer_schedule(tmp_path: Path) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text("actions: allocate\ntiers:\n- plugins:\n  - name: usage\n")
    c = tmp_path / "c.yaml"
    c.write_text(
        NODE.format(name="n1", ann="usage.fumarole.io/cpu: '95', usage.fumarole.io/memory: '10'")
        + "---\n"
        + NODE.format(name="n2", ann="usage.fumarole.io/cpu: '50', usage.fumarole.io/memory: '10'")
        + "---\n"
        + NODE.format(name="n3", ann="usage.fumarole.io/cpu: '20', usage.fumarole.io/memory: '10'")
        + "---\n"
        + POD
    )
    p = fumarole("schedule", "--conf", str(conf), "--cluster", str(c), "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["binds"] == {"default/p": "n3"}


@pytest.mark.parametrize(
    ("script", "parts"),
    [
        ("0s cpu=1 memory=2; 1x cpu=3 memory=1", ("entry 2", "bad offset '1x'")),
        ("0s cpu=1", ("entry 1", "needs both")),
        ("10s cpu=1 memory=2; 5s cpu=1 memory=2", ("entry 2", "before the entry before it")),
        ("0s cpu=1 memory=2 disk=3", ("entry 1", "'disk=3'")),
    ],
)
def test_bad_usage_script(tmp_path: Path, script: str, parts: tuple[str, ...]) -> None:
    c, w = tmp_path / "c.yaml", tmp_path / "w.yaml"
    c.write_text(NODE.format(name="n1", ann=f"usage.fumarole.io/script: '{script}'"))
    w.write_text(POD)
    data = tmp_path / "data"
    p = fumarole("run", "--cluster", str(c), "--workload", str(w), "--data-dir", str(data), "--no-api")
    one_line(p, "c.yaml", "Node n1", "annotations[usage.fumarole.io/script]", *parts)
    assert not data.exists()


@pytest.mark.parametrize(
    ("metrics", "part"),
    [
        ("{type: prometheus}", "metrics.address: required"),
        ("{type: graphite, address: 'http://x'}", "metrics.type: 'graphite'"),
        ("{type: prometheus, address: 'x:9090'}", "metrics.address: 'x:9090' is not an http"),
    ],
)
def test_bad_metrics_section(tmp_path: Path, metrics: str, part: str) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text(f"actions: allocate\ntiers:\n- plugins:\n  - name: usage\nmetrics: {metrics}\n")
    data = tmp_path / "data"
    p = fumarole(
        "run",
        "--adapter",
        "kubernetes",
        "--kubeconfig",
        str(tmp_path / "none"),
        "--conf",
        str(conf),
        "--data-dir",
        str(data),
        "--no-api",
    )
    one_line(p, "conf.yaml", part)
    assert not data.exists()
