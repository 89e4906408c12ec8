"""`fumarole schedule --now` (the sessions' clock) and PodGroups whose Queue does not exist.

Volcano's sessions read the wall clock, so by default the dry run does too (read once, printed as
`now`); `--now manifests` keeps the reproducible rule (the newest creationTimestamp), and an RFC
3339 time or Unix seconds pins it.  A PodGroup whose Queue is missing stays out of the session
(as in Volcano) but is still reported, with its phase unchanged and the reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

EXE = shutil.which("fumarole") or str(Path(sys.executable).parent / "fumarole")

SLA_CONF = """\
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: sla
- plugins:
  - name: overcommit
"""

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
}


def queue(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1},
        "status": {"state": "Open"},
    }


def podgroup(
    name: str, queue: str, cpu: str, phase: str, created: str = "2020-01-01T00:00:00Z"
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "c1",
            "creationTimestamp": created,
            "annotations": {"volcano.sh/sla-waiting-time": "1h"},
        },
        "spec": {"queue": queue, "minMember": 1, "minResources": {"cpu": cpu}},
        "status": {"phase": phase},
    }


def pod(name: str, group: str, cpu: str, created: str = "2020-01-01T00:00:00Z") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "c1",
            "creationTimestamp": created,
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        },
        "status": {"phase": "Pending"},
    }


def schedule(tmp_path: Path, objects: list[dict[str, Any]], *args: str, conf: str = SLA_CONF) -> Any:
    (tmp_path / "conf.yaml").write_text(conf)
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(objects))
    return subprocess.run(
        [
            EXE,
            "schedule",
            "--conf",
            str(tmp_path / "conf.yaml"),
            "--cluster",
            str(tmp_path / "cluster.yaml"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


# A 2020 PodGroup, 1h sla, asking 100 cpu of a 4-cpu cluster: overcommit refuses it, sla admits it
# once its waiting time is over.
OVERDUE = [NODE, queue("q1"), podgroup("old", "q1", "100", "Pending"), pod("old-0", "old", "100")]


def phase_of(p: subprocess.CompletedProcess[str], uid: str = "c1/old") -> str:
    assert p.returncode == 0, p.stderr
    phase: str = json.loads(p.stdout)["podgroups"][uid]["phase"]
    return phase


def test_default_now_is_the_wall_clock_so_an_expired_sla_is_enqueued(tmp_path: Path) -> None:
    before = time.time()
    p = schedule(tmp_path, OVERDUE)
    after = time.time()
    assert phase_of(p) == "Inqueue"
    now = json.loads(p.stdout)["now"]
    assert now.endswith("Z")
    assert before <= datetime.fromisoformat(now).timestamp() <= after


def test_now_manifests_keeps_the_newest_creation_time(tmp_path: Path) -> None:
    p = schedule(tmp_path, OVERDUE, "--now", "manifests")
    assert phase_of(p) == "Pending"
    assert json.loads(p.stdout)["now"] == "2020-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("now", "phase", "shown"),
    [
        ("2020-01-01T00:59:59Z", "Pending", "2020-01-01T00:59:59Z"),
        ("2020-01-01T02:30:00+01:00", "Inqueue", "2020-01-01T01:30:00Z"),
        ("1577842200", "Inqueue", "2020-01-01T01:30:00Z"),
        ("1577840399.5", "Pending", "2020-01-01T00:59:59.500000Z"),
    ],
)
def test_explicit_now_rfc3339_or_unix_seconds(tmp_path: Path, now: str, phase: str, shown: str) -> None:
    p = schedule(tmp_path, OVERDUE, "--now", now)
    assert phase_of(p) == phase
    assert json.loads(p.stdout)["now"] == shown


def test_table_format_prints_now(tmp_path: Path) -> None:
    p = schedule(tmp_path, OVERDUE, "--now", "manifests", "--format", "table")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "Fumarole dry run: 1 cycle(s), now 2020-01-01T00:00:00Z"


@pytest.mark.parametrize("bad", ["yesterday", "2020-01-01T00:00:00", "2020-13-01T00:00:00Z", "nan", ""])
def test_bad_now_exits_2_naming_the_flag_and_value(tmp_path: Path, bad: str) -> None:
    p = schedule(tmp_path, OVERDUE, "--now", bad)
    assert p.returncode == 2
    assert f"--now: {bad!r}" in p.stderr
    assert p.stdout == ""


# ---------------------------------------------------------------- a PodGroup whose Queue is missing
PLAIN_CONF = """\
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
"""

IN_QUEUE = [NODE, queue("q1"), podgroup("fine", "q1", "1", "Pending"), pod("fine-0", "fine", "1")]
ORPHANS = [
    podgroup("orphan", "nosuch", "1", "Inqueue"),
    pod("orphan-0", "orphan", "1"),
    pod("orphan-1", "orphan", "1"),
    podgroup("waiting", "gone", "1", "Pending"),
    pod("waiting-0", "waiting", "1"),
]


def test_podgroup_with_a_missing_queue_is_reported_with_its_phase_and_pending_pods(tmp_path: Path) -> None:
    p = schedule(tmp_path, IN_QUEUE + ORPHANS, "--now", "manifests", conf=PLAIN_CONF)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    why = "queue 'nosuch' does not exist: the PodGroup is left out of the session"
    assert data["podgroups"]["c1/orphan"] == {"phase": "Inqueue", "conditions": [], "outOfSession": why}
    assert data["podgroups"]["c1/waiting"]["phase"] == "Pending"
    assert "queue 'gone' does not exist" in data["podgroups"]["c1/waiting"]["outOfSession"]
    assert data["pending"]["c1/orphan-0"] == why and data["pending"]["c1/orphan-1"] == why
    assert "queue 'gone' does not exist" in data["pending"]["c1/waiting-0"]
    assert list(data["podgroups"]) == sorted(data["podgroups"])
    # Decisions are those of the same cluster without the orphans.
    alone = schedule(tmp_path, IN_QUEUE, "--now", "manifests", conf=PLAIN_CONF)
    assert data["binds"] == json.loads(alone.stdout)["binds"] == {"c1/fine-0": "n1"}
    assert data["podgroups"]["c1/fine"] == json.loads(alone.stdout)["podgroups"]["c1/fine"]


def test_missing_queue_in_the_table(tmp_path: Path) -> None:
    p = schedule(tmp_path, IN_QUEUE + ORPHANS, "--now", "manifests", "--format", "table", conf=PLAIN_CONF)
    assert p.returncode == 0, p.stderr
    rows = [ln.split() for ln in p.stdout.splitlines()]
    orphan = next(r for r in rows if r[:1] == ["c1/orphan"])
    assert orphan[:7] == ["c1/orphan", "Inqueue", "queue", "'nosuch'", "does", "not", "exist:"]
    assert any(r[:1] == ["c1/orphan-0"] and "'nosuch'" in r for r in rows)
