"""What the commands say to a user who got something slightly wrong: one line naming it (exit 2),
or, where the run can go on, a warning saying what was assumed; and the table in human units."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fumarole.daemon.cli.tables import human_bytes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "preempt-by-priority"
NODE = (
    "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
    "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n"
)


def fumarole(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("fumarole") or str(Path(sys.executable).parent / "fumarole")
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, env=dict(os.environ), timeout=120, cwd=cwd
    )


def test_an_example_directory_works_as_cluster_its_scheduler_configuration_skipped() -> None:
    by_file = fumarole(
        "schedule", "--conf", str(EXAMPLE / "scheduler.yaml"), "--cluster", str(EXAMPLE / "cluster.yaml"),
        "--cycles", "2", "--now", "manifests",
    )  # fmt: skip
    by_dir = fumarole(
        "schedule", "--conf", str(EXAMPLE / "scheduler.yaml"), "--cluster", str(EXAMPLE),
        "--cycles", "2", "--now", "manifests",
    )  # fmt: skip
    assert by_dir.returncode == 0, by_dir.stderr
    assert by_dir.stdout == by_file.stdout and json.loads(by_dir.stdout)["evictions"]
    assert "note:" not in by_dir.stderr  # it is the --conf file: nothing to say
    alone = fumarole("schedule", "--cluster", str(EXAMPLE), "--now", "manifests")
    assert alone.returncode == 0, alone.stderr
    note = f"note: {EXAMPLE / 'scheduler.yaml'}: a scheduler configuration, not manifests: skipped"
    assert f"{note} (pass it as --conf)" in alone.stderr


def test_a_directory_without_manifests_is_one_line_and_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = fumarole("schedule", "--cluster", str(empty))
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr
        == f"fumarole: error: {empty}: no manifest files (*.yaml, *.yml, *.json) in the directory\n"
    )
    only_conf = tmp_path / "conf"
    only_conf.mkdir()
    shutil.copy(EXAMPLE / "scheduler.yaml", only_conf / "scheduler.yaml")
    done = fumarole("schedule", "--cluster", str(only_conf))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert f"skipped {only_conf / 'scheduler.yaml'}: a scheduler configuration, for --conf" in done.stderr


def test_now_manifests_without_timestamps_says_it_starts_at_the_epoch(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(NODE)
    done = fumarole("schedule", "--cluster", str(tmp_path / "c.yaml"), "--now", "manifests")
    assert done.returncode == 0 and json.loads(done.stdout)["now"] == "1970-01-01T00:00:00Z"
    assert "--now manifests: no pod or PodGroup has a metadata.creationTimestamp" in done.stderr
    assert "1970-01-01T00:00:00Z" in done.stderr
    pinned = fumarole("schedule", "--cluster", str(tmp_path / "c.yaml"), "--now", "0")
    assert pinned.returncode == 0 and "creationTimestamp" not in pinned.stderr


def test_documents_count_from_1_as_lines_do(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(NODE + "---\nkind: a: b\n")  # the second document, its line 6
    done = fumarole("schedule", "--cluster", str(bad))
    assert done.returncode == 2
    assert done.stderr.startswith(f"fumarole: error: {bad}: document 2: line 6, column 8: "), done.stderr
    first = tmp_path / "first.yaml"
    first.write_text("apiVersion: v1\nkind: Pod\nmetadata: []\n")
    done = fumarole("schedule", "--cluster", str(first))
    assert done.stderr == f"fumarole: error: {first}: document 1: metadata: expected a mapping, got a list\n"


@pytest.mark.parametrize("command", [("events",), ("replay",), ("serve",), ("explain", "a/b"), ("migrate",)])
def test_db_naming_a_directory_says_so(tmp_path: Path, command: tuple[str, ...]) -> None:
    name, *rest = command
    done = fumarole(name, "--db", str(tmp_path), *rest)
    assert done.returncode == 2
    assert done.stderr == (
        f"fumarole: error: {tmp_path}: is a directory, not an event log (the log is DIR/fumarole.db)\n"
    )


def test_data_dir_naming_a_file_says_so(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("")
    done = fumarole("run", "--data-dir", str(f), "--no-api", "--max-cycles", "1")
    assert done.returncode == 2
    assert (
        done.stderr
        == f"fumarole: error: data_dir: {f} is a file, not a directory (the log goes in DIR/fumarole.db)\n"
    )


def test_the_table_shows_memory_in_human_units(tmp_path: Path) -> None:
    pod = (
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\n"
        "spec: {schedulerName: volcano, containers: [{name: c,\n"
        "  resources: {requests: {cpu: '1', memory: 1G}}}]}\n"
    )
    (tmp_path / "c.yaml").write_text(NODE + pod)
    table = fumarole("schedule", "--cluster", str(tmp_path / "c.yaml"), "--format", "table", "--now", "0")
    assert table.returncode == 0, table.stderr
    assert "memory=953.7Mi" in table.stdout and "1000000000" not in table.stdout
    exact = json.loads(fumarole("schedule", "--cluster", str(tmp_path / "c.yaml"), "--now", "0").stdout)
    assert exact["queues"]["root"]["statusAllocated"]["memory"] == "1000000000"  # the JSON stays exact


@pytest.mark.parametrize(
    ("amount", "shown"),
    [(0, "0"), (512, "512"), (1024, "1Ki"), (1536, "1.5Ki"), (10**9, "953.7Mi"), (12 * 2**30, "12Gi"),
     (2**40 - 1, "1Ti"), (2**20 - 1, "1Mi"), (-(2**30), "-1Gi")],
)  # fmt: skip
def test_human_bytes(amount: int, shown: str) -> None:
    assert human_bytes(amount) == shown
