"""The real daemon as a subprocess on the simulator: log contents, gangs, signals, restart, replay."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from fumarole_e2e_kit import FUMAROLE, env, read_log, run_daemon, start_daemon, write_small_sim

from fumarole.daemon.cache import load, state_image
from fumarole.store.events import (
    BindDecided,
    CycleClosed,
    CycleOpened,
    PodDeleted,
    PodGroupUpserted,
    PodUpserted,
)
from fumarole.store.log import StoredEvent
from fumarole.store.sqlite import SqliteEventLog


def _gangs_bound_whole(rows: list[StoredEvent]) -> list[str]:
    """Every cycle's binds of a job, with the pods it already had placed (or finished), reach minMember.

    Succeeded pods count, as in Volcano's gang readiness (ReadyTaskNum includes Succeeded).
    """
    min_member: dict[str, int] = {}
    placed: dict[str, set[str]] = {}  # job -> pod keys on a node
    job_of: dict[str, str] = {}
    problems: list[str] = []
    binds: dict[str, list[str]] = {}
    for row in rows:
        ev = row.event
        if isinstance(ev, PodGroupUpserted):
            min_member[f"{ev.namespace}/{ev.name}"] = int(ev.manifest.get("spec", {}).get("minMember", 0))
        elif isinstance(ev, PodUpserted):
            key = f"{ev.namespace}/{ev.name}"
            ann = ev.manifest.get("metadata", {}).get("annotations", {}) or {}
            group = ann.get("scheduling.k8s.io/group-name")
            if group:
                job_of[key] = f"{ev.namespace}/{group}"
            phase = ev.manifest.get("status", {}).get("phase", "")
            node = ev.manifest.get("spec", {}).get("nodeName", "")
            job = job_of.get(key)
            if job is not None:
                if node and phase != "Failed":
                    placed.setdefault(job, set()).add(key)
                else:
                    placed.setdefault(job, set()).discard(key)
        elif isinstance(ev, PodDeleted):
            key = f"{ev.namespace}/{ev.name}"
            job = job_of.get(key)
            if job is not None:
                placed.setdefault(job, set()).discard(key)
        elif isinstance(ev, CycleOpened):
            binds = {}
        elif isinstance(ev, BindDecided):
            binds.setdefault(ev.job, []).append(f"{ev.namespace}/{ev.name}")
        elif isinstance(ev, CycleClosed):
            for job, pods in binds.items():
                have = len(placed.get(job, set()) | set(pods))
                if have < min_member.get(job, 0):
                    problems.append(f"cycle {ev.cycle}: {job} bound {have} < minMember {min_member[job]}")
    return problems


def _replay(db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FUMAROLE, "replay", "--db", str(db), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env(),
    )


def test_small_workload_runs_to_completion_and_replays_identical(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path)
    data = tmp_path / "data"
    p = run_daemon("--data-dir", str(data), "--cluster", str(c), "--workload", str(w), "--no-api")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "workload drained" in p.stdout
    rows = read_log(data / "fumarole.db")
    types = Counter(r.type for r in rows)
    assert types["node.upserted"] == 4
    assert types["pod.upserted"] > 0
    assert len({r.event.name for r in rows if isinstance(r.event, PodGroupUpserted)}) == 10
    assert types["cycle.opened"] == types["cycle.closed"] > 0
    assert types["decision.bind"] >= sum(1 + i % 4 for i in range(10))
    assert types["outcome.bind_succeeded"] == types["decision.bind"]
    assert types["config.recorded"] == 1
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    assert _gangs_bound_whole(rows) == []
    # Every pod of the workload ran to completion.
    final_phase: dict[str, str] = {}
    for r in rows:
        if isinstance(r.event, PodUpserted):
            final_phase[f"{r.event.namespace}/{r.event.name}"] = r.event.manifest.get("status", {}).get(
                "phase", ""
            )
    assert final_phase and all(ph == "Succeeded" for ph in final_phase.values()), final_phase
    rp = _replay(data / "fumarole.db")
    assert rp.returncode == 0, rp.stdout + rp.stderr


def test_sigkill_then_restart_finishes_without_double_binds(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=48)
    data = tmp_path / "data"
    args = ("--data-dir", str(data), "--cluster", str(c), "--workload", str(w), "--no-api")
    proc = start_daemon(*args)
    db = data / "fumarole.db"
    deadline = time.monotonic() + 120
    # Kill once a few cycles are in the log (the daemon is mid-run).
    while time.monotonic() < deadline:
        if db.exists() and proc.poll() is None:
            try:
                n = sum(1 for r in read_log(db) if r.type == "cycle.closed")
            except Exception:
                n = 0
            if n >= 5:
                break
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the daemon finished before it could be killed; make the workload longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    p = run_daemon(*args)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "workload drained" in p.stdout
    rows = read_log(db)
    bound_uids = Counter(r.event.uid for r in rows if isinstance(r.event, BindDecided))
    assert bound_uids and max(bound_uids.values()) == 1, [u for u, n in bound_uids.items() if n > 1]
    assert _gangs_bound_whole(rows) == []
    cycles = [r.event.cycle for r in rows if isinstance(r.event, CycleOpened)]
    assert cycles == list(range(1, len(cycles) + 1))

    async def images() -> tuple[object, object]:
        log = await SqliteEventLog.open(str(db), readonly=True)
        try:
            with_snapshot = await load(log)
            full = await load(log, use_snapshot=False)
            return state_image(with_snapshot), state_image(full)
        finally:
            await log.close()

    a, b = asyncio.run(images())
    assert a == b
    rp = _replay(db)
    assert rp.returncode == 0, rp.stdout + rp.stderr


def test_sigterm_mid_run_exits_cleanly_and_resumes(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=24)
    data = tmp_path / "data"
    args = ("--data-dir", str(data), "--cluster", str(c), "--workload", str(w), "--listen", "127.0.0.1:0")
    proc = start_daemon(*args)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    while line and "REST API on" not in line:
        line = proc.stdout.readline()
    assert "REST API on http://127.0.0.1:" in line
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    wal = data / "fumarole.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0, "the WAL was not checkpointed on a clean stop"
    rows = read_log(data / "fumarole.db")
    types = Counter(r.type for r in rows)
    assert types["cycle.opened"] == types["cycle.closed"]
    if "workload drained" not in out:
        assert "interrupted" in out
        p = run_daemon("--data-dir", str(data), "--cluster", str(c), "--workload", str(w), "--no-api")
        assert p.returncode == 0, p.stdout + p.stderr
        assert "workload drained" in p.stdout
    assert _replay(data / "fumarole.db").returncode == 0


def test_kubernetes_adapter_without_credentials_exits_2_and_creates_nothing(tmp_path: Path) -> None:
    # (tests/e2e/test_e2e_kubernetes.py runs the adapter against an API server)
    p = run_daemon(
        "--data-dir",
        str(tmp_path / "d"),
        "--adapter",
        "kubernetes",
        "--no-api",
        timeout=60,
        HOME=str(tmp_path),
        KUBECONFIG="",
    )
    assert p.returncode == 2
    assert f"kubeconfig {tmp_path}/.kube/config: no such file" in p.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("bad", ["--schedule-period=-1", "--listen=0.0.0.0:1"])
def test_bad_settings_exit_2(tmp_path: Path, bad: str) -> None:
    p = run_daemon("--data-dir", str(tmp_path / "d"), bad, "--no-api", timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "fumarole: error:" in p.stderr


def test_bad_workload_or_conf_exit_2_and_create_nothing(tmp_path: Path) -> None:
    c, _ = write_small_sim(tmp_path, jobs=1)
    bad_workload = tmp_path / "bad.yaml"
    bad_workload.write_text(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\n"
        "metadata: {name: x, namespace: a, annotations: {fumarole.io/submit-at: soon}}\nspec: {tasks: []}\n"
    )
    bad_conf = tmp_path / "sched.yaml"
    bad_conf.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - nam: gang\n')
    typo_conf = tmp_path / "typo.yaml"
    typo_conf.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gangg\n')
    cases = [
        (("--cluster", str(c), "--workload", str(bad_workload)), "fumarole.io/submit-at"),
        (("--conf", str(bad_conf)), "tiers[0].plugins[0].name"),
        (
            ("--strict", "--conf", str(typo_conf)),
            "unknown plugin 'gangg' (not a Volcano plugin; did you mean",
        ),
    ]
    for i, (args, needle) in enumerate(cases):
        data = tmp_path / f"data{i}"
        p = run_daemon("--data-dir", str(data), *args, "--no-api", timeout=60)
        assert p.returncode == 2, p.stdout + p.stderr
        assert needle in p.stderr
        assert not data.exists()
