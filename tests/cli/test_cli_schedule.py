"""`fumarole schedule` end to end through the installed console script."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CONF = ROOT / "daemon" / "examples" / "default-conf.yaml"
EXAMPLE_CLUSTER = ROOT / "daemon" / "examples" / "cluster.yaml"


def fumarole(*args: str, seed: str = "0") -> subprocess.CompletedProcess[str]:
    exe = shutil.which("fumarole") or str(Path(sys.executable).parent / "fumarole")
    env = dict(os.environ, PYTHONHASHSEED=seed)
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=120)


def test_example_json_is_byte_identical_across_hash_seeds() -> None:
    args = ("schedule", "--conf", str(EXAMPLE_CONF), "--cluster", str(EXAMPLE_CLUSTER), "--cycles", "2")
    args += ("--now", "manifests")  # the wall clock (the default) differs from run to run
    outs = {fumarole(*args, seed=s).stdout for s in ("0", "1", "12345", "random")}
    assert len(outs) == 1
    data = json.loads(outs.pop())
    assert data["cycles"] == 2
    # The GPU training gang (4 pods x 2 GPUs on two 4-GPU nodes) binds whole.
    train = {k: v for k, v in data["binds"].items() if "train-worker" in k}
    assert len(train) == 4 and set(train.values()) <= {"gpu-0", "gpu-1"}
    # The gang that asks for GPUs on the cpu pool never binds and says why.
    assert not any("bad-fit" in k for k in data["binds"])
    why = data["pending"]["team-a/bad-fit-0"]
    assert "gang" in why and "nodes are unavailable" in why
    assert set(data) == {
        "cycles",
        "now",
        "binds",
        "pipelined",
        "evictions",
        "evictionReasons",
        "podgroups",
        "queues",
        "pending",
    }


def test_table_format_shows_queues_jobs_binds_and_reasons() -> None:
    p = fumarole(
        "schedule", "--conf", str(EXAMPLE_CONF), "--cluster", str(EXAMPLE_CLUSTER), "--format", "table"
    )
    assert p.returncode == 0, p.stderr
    for section in ("QUEUES", "JOBS", "BINDS", "PENDING"):
        assert section in p.stdout
    assert "research" in p.stdout and "team-a/bad-fit-0" in p.stdout
    # not a terminal: plain text, a header line then one row per line, columns 2+ spaces apart
    assert "\x1b[" not in p.stdout
    lines = p.stdout.splitlines()
    binds = lines[lines.index("BINDS") + 1 :]
    assert re.split(r"\s{2,}", binds[0]) == ["POD", "NODE"]
    assert binds[1] and all(len(re.split(r"\s{2,}", row)) == 2 for row in binds[1 : binds.index("")])
    assert all(line == line.rstrip() for line in lines)


def test_bad_manifest_exits_2_naming_file_document_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '4', pods: '10'}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: c1}\n"
        "spec: {schedulerName: volcano, containers: [{name: c, resources: {requests: {cpu: 1x}}}]}\n"
    )
    p = fumarole("schedule", "--cluster", str(bad))
    assert p.returncode == 2
    assert "bad.yaml" in p.stderr and "document 2" in p.stderr and "requests.cpu" in p.stderr
    assert p.stdout == ""


def test_bad_conf_exits_2_naming_the_key(tmp_path: Path) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text(
        "actions: 'enqueue, allocate'\ntiers:\n- plugins:\n  - name: gang\n    enableJobReady: 'yes'\n"
    )
    p = fumarole("schedule", "--conf", str(conf), "--cluster", str(EXAMPLE_CLUSTER))
    assert p.returncode == 2
    assert "tiers[0].plugins[0].enableJobReady" in p.stderr


def test_unknown_action_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text("actions: 'enqueue, allocat'\ntiers: []\n")
    p = fumarole("schedule", "--conf", str(conf), "--cluster", str(EXAMPLE_CLUSTER))
    assert p.returncode == 2
    assert "actions[1]: failed to find action 'allocat' (did you mean 'allocate'?" in p.stderr


@pytest.mark.parametrize("cycles", ["0", "-1"])
def test_cycles_must_be_positive(cycles: str) -> None:
    p = fumarole("schedule", "--cluster", str(EXAMPLE_CLUSTER), "--cycles", cycles)
    assert p.returncode == 2


def test_timings_go_to_stderr_and_leave_the_output_alone() -> None:
    args = ("schedule", "--conf", str(EXAMPLE_CONF), "--cluster", str(EXAMPLE_CLUSTER), "--now", "manifests")
    plain = fumarole(*args)
    timed = fumarole(*args, "--timings")
    assert plain.returncode == timed.returncode == 0
    assert timed.stdout == plain.stdout
    lines = [json.loads(x) for x in timed.stderr.splitlines() if x.startswith('{"timings"')]
    assert len(lines) == 1
    phases = lines[0]["timings"]
    assert list(phases) == ["imports_and_conf", "load", "build", "sessions", "output"]
    assert all(set(v) == {"wall", "cpu"} and v["wall"] >= 0 for v in phases.values())


def test_numpy_is_asked_for_one_blas_thread() -> None:
    # OpenBLAS's idle worker threads spin for ~0.1 CPU s after numpy's import, and a wide product
    # may sum in another order with more threads; importing `daemon` asks for one thread before the
    # scheduler imports numpy (a value in the environment is kept).
    probe = (
        "import io, os, sys, contextlib\n"
        "from daemon.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['schedule', '--cluster', {str(EXAMPLE_CLUSTER)!r}, '--now', 'manifests'])\n"
        "print(rc, 'numpy' in sys.modules, os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert p.stdout.split() == ["0", "True", "1"], p.stderr
    env["OPENBLAS_NUM_THREADS"] = "2"
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert p.stdout.split() == ["0", "True", "2"], p.stderr


def test_the_command_ends_without_the_interpreter_teardown_and_main_called_in_process_returns() -> None:
    # As a command (`main()` reading sys.argv) the output is flushed and the process ends at once
    # (no atexit handler runs: the teardown would free the sessions' objects for ~30 ms); called
    # with arguments, in a process that goes on, `main` returns its code.
    probe = (
        "import atexit, sys\n"
        "from daemon.cli.main import main\n"
        "atexit.register(lambda: print('teardown'))\n"
        f"print('in-process', main(['schedule', '--cluster', {str(EXAMPLE_CLUSTER)!r}, '--now', 'manifests',"
        " '--format', 'json']) == 0)\n"
        f"sys.argv = ['fumarole', 'schedule', '--cluster', {str(EXAMPLE_CLUSTER)!r}, '--now', 'manifests',"
        " '--format', 'json']\n"
        "main()\n"
        "print('not reached')\n"
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "in-process True" in p.stdout, p.stdout[-300:]
    assert p.stdout.rstrip().endswith("}"), p.stdout[-80:]  # the whole output was written
    assert "teardown" not in p.stdout and "not reached" not in p.stdout


def test_queue_capability_is_volcanos_real_capability(tmp_path: Path) -> None:
    """`queues.<q>.capability` is proportion's realCapability: the cluster total less every
    other queue's guarantee, capped by the configured capability (proportion.go OnSessionOpen)."""
    res = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    docs: list[dict[str, object]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"capacity": res, "allocatable": res},
        },
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "capped"},
            "spec": {"weight": 1, "capability": {"cpu": "12"}},
        },
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "guaranteed"},
            "spec": {"weight": 1, "guarantee": {"resource": {"cpu": "6"}}},
        },
    ]
    for q in ("capped", "guaranteed"):
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": f"pg-{q}", "namespace": "ns"},
                "spec": {"queue": q, "minMember": 1},
            }
        )
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p-{q}",
                    "namespace": "ns",
                    "annotations": {"scheduling.k8s.io/group-name": f"pg-{q}"},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
        )
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("\n---\n".join(json.dumps(d) for d in docs))
    p = fumarole("schedule", "--cluster", str(cluster), "--now", "2024-01-01T00:00:00Z")
    assert p.returncode == 0, p.stderr
    queues = json.loads(p.stdout)["queues"]
    # min(12, 16 - 6 + 0) cpu; the other dimensions are the cluster total.
    assert queues["capped"]["capability"] == {"cpu": "10", "memory": "64Gi", "pods": "110"}
    assert queues["guaranteed"]["capability"] == {"cpu": "16", "memory": "64Gi", "pods": "110"}
