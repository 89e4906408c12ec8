"""Replicas on one PostgreSQL log (`fumarole run --db postgresql://…`) with the simulator: the leader
killed with SIGKILL again and again while a standby takes over, and a leader paused past its lease
whose next write the database refuses.

Every run is compared event by event with an uninterrupted run (timings and trace ids aside, as in
test_e2e_crash_resume): no decision lost or repeated, no pod bound twice, cycle numbers never
repeat, and `fumarole replay` of the shared log finds every cycle identical.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fumarole_e2e_kit import FUMAROLE, env, free_port, uninterrupted_pg_run, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
from fumarole_pg_server import PgServer, fresh_dsn, require_pg
from fumarole_store_kit import run_pg

from fumarole.daemon.runtime.cycle import comparable, describe
from fumarole.daemon.runtime.shared_log import IGNORE_LEASE_LOSS
from fumarole.store.events import BindDecided, CycleOpened
from fumarole.store.index import DECISION_TYPES
from fumarole.store.log import StoredEvent
from fumarole.store.postgres import PostgresEventLog

SEED = 13
KILLS = 20
LEASE = "1"  # seconds: a standby takes over about a second after the leader's last renewal


@pytest.fixture(scope="module")
def server() -> PgServer:
    return require_pg()


@pytest.fixture(scope="module")
def reference(server: PgServer) -> list[StoredEvent]:
    """The bundled simulation, uninterrupted, on a PostgreSQL log."""
    dsn = fresh_dsn(server)
    uninterrupted_pg_run(dsn, LEASE)
    rows = read_pg(dsn)
    binds = [(r.event.namespace, r.event.name, r.event.uid) for r in rows if isinstance(r.event, BindDecided)]
    assert len(binds) > 100 and len(set(binds)) == len(binds)
    return rows


def new_log(server: PgServer) -> str:
    """A new database with the log's schema (so the test can watch it before a replica starts)."""
    dsn = fresh_dsn(server)
    subprocess.run([FUMAROLE, "migrate", "--db", dsn], check=True, capture_output=True, env=env())
    return dsn


def read_pg(dsn: str) -> list[StoredEvent]:
    async def go() -> list[StoredEvent]:
        log = await PostgresEventLog.open(dsn, readonly=True)
        try:
            return [r async for r in log.read_range(1, await log.last_seq())]
        finally:
            await log.close()

    return asyncio.run(go())


def replica(dsn: str, *args: str, **extra: str) -> subprocess.Popen[str]:
    """A replica, its stderr in a temporary file (`err(p)`): a pipe nobody reads could fill up."""
    errfile = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed with the process object
    p = subprocess.Popen(
        [FUMAROLE, "run", "--db", dsn, *(args or ("--no-api",))],
        stdout=subprocess.DEVNULL,
        stderr=errfile,
        text=True,
        env=env(FUMAROLE_LEASE_DURATION=LEASE, **extra),
    )
    p.errfile = errfile  # type: ignore[attr-defined]
    return p


def err(p: subprocess.Popen[str]) -> str:
    f = p.errfile  # type: ignore[attr-defined]
    f.seek(0)
    return str(f.read())


def lease(dsn: str) -> tuple[int, int | None]:
    """(epoch, PID of the holder) of the shared log's leadership row."""
    epoch, holder = run_pg(dsn, "SELECT epoch, holder FROM leadership WHERE id = 1")[0]
    parts = str(holder).split("/")
    return int(epoch), int(parts[1]) if len(parts) == 3 else None


def last_seq(dsn: str) -> int:
    return int(run_pg(dsn, "SELECT last_seq FROM log_head WHERE id = 1")[0][0])


def assert_same_run(got: list[StoredEvent], ref: list[StoredEvent], what: str) -> None:
    for g, r in zip(got, ref, strict=False):
        if comparable(g.event) != comparable(r.event):
            pytest.fail(
                f"{what}: seq {g.seq} is {describe(g.event)!r}, the reference has {describe(r.event)!r}"
            )
    assert len(got) == len(ref), f"{what}: the log ends at seq {len(got)}, the reference at {len(ref)}"


def assert_invariants(rows: list[StoredEvent], dsn: str, what: str) -> None:
    cycles = [r.event.cycle for r in rows if isinstance(r.event, CycleOpened)]
    assert cycles == list(range(1, len(cycles) + 1)), f"{what}: cycle numbers repeat or skip"
    binds = [(r.event.namespace, r.event.name, r.event.uid) for r in rows if isinstance(r.event, BindDecided)]
    assert len(set(binds)) == len(binds), f"{what}: a pod was bound twice"
    epochs = [int(r[0]) for r in run_pg(dsn, "SELECT epoch FROM events ORDER BY seq")]
    assert epochs == sorted(epochs), f"{what}: an older leader wrote after a newer one"
    terms = run_pg(dsn, "SELECT epoch, first_seq FROM leader_terms ORDER BY epoch")
    for (epoch, first), (_, nxt) in itertools.pairwise(terms):
        # every row of the term lies in [its first seq, the next term's first seq)
        assert all(epoch == e for e in epochs[first - 1 : nxt - 1]), f"{what}: term {epoch} is not contiguous"


def wait_all(procs: list[subprocess.Popen[str]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"replica {p.pid} did not finish within {timeout}s")


def stop_all(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_kill_9_the_leader_twenty_times(server, reference):
    """Two replicas; SIGKILL whichever leads at a random moment of its term, start another, repeat;
    each run drains to exactly the uninterrupted run's log."""
    rng = random.Random(SEED)
    kills = 0
    runs = 0
    while kills < KILLS:
        runs += 1
        assert runs <= 10, f"only {kills} kills in {runs - 1} runs"
        dsn = new_log(server)
        procs = [replica(dsn), replica(dsn)]
        try:
            seen_epoch = 0
            while True:
                epoch, pid = lease(dsn)
                finished = [p for p in procs if p.poll() is not None]
                if any(p.returncode != 0 for p in finished):
                    bad = next(p for p in finished if p.returncode != 0)
                    pytest.fail(f"replica exited {bad.returncode}: {err(bad)}")
                if finished:  # the workload drained: the leader stopped, the standby will see it too
                    break
                if epoch <= seen_epoch or pid is None:
                    time.sleep(0.02)
                    continue
                seen_epoch = epoch
                leader = next((p for p in procs if p.pid == pid), None)
                assert leader is not None, f"the lease is held by PID {pid}, not one of the replicas"
                if kills >= KILLS:
                    continue  # enough: let this leader drain the run
                time.sleep(rng.uniform(0.0, 0.6))  # a random point of its term: start-up, cycle, dispatch
                if leader.poll() is not None:
                    continue
                os.kill(leader.pid, signal.SIGKILL)
                leader.wait()
                kills += 1
                procs.remove(leader)
                procs.append(replica(dsn))
            wait_all(procs, 60)
        finally:
            stop_all(procs)
        for p in procs:
            assert p.returncode == 0, err(p)
        rows = read_pg(dsn)
        what = f"run {runs} ({kills} kills so far)"
        assert_same_run(rows, reference, what)
        assert_invariants(rows, dsn, what)
    r = subprocess.run(
        [FUMAROLE, "replay", "--db", dsn], capture_output=True, text=True, timeout=120, env=env()
    )
    assert r.returncode == 0 and " 0 different" in r.stdout, r.stdout + r.stderr


def _stale_leader_attempt(server: PgServer, reference: list[StoredEvent]) -> Any:
    dsn = new_log(server)
    a = replica(dsn, **{IGNORE_LEASE_LOSS: "1"})  # a leader that does not notice its lease is gone
    b: subprocess.Popen[str] | None = None
    try:
        deadline = time.monotonic() + 60
        while last_seq(dsn) < 300:  # A leads and is in the middle of the run
            assert a.poll() is None, err(a)
            assert time.monotonic() < deadline, "A made no progress"
            time.sleep(0.01)
        a.send_signal(signal.SIGSTOP)
        stopped_at = last_seq(dsn)
        b = replica(dsn)
        while lease(dsn)[0] < 2:  # B takes over once A's lease (1 s) has run out
            assert b.poll() is None, err(b)
            assert time.monotonic() < deadline, "B never took over"
            time.sleep(0.02)
        a.send_signal(signal.SIGCONT)
        # A steps down and stands by; B drains the run and stops, A leads again and finds it done
        wait_all([b, a], 60)
        a_err = err(a)
        assert b.returncode == 0, err(b)
    finally:
        stop_all([a] + ([b] if b else []))
    return dsn, a.returncode, a_err, stopped_at


def test_a_leader_paused_past_its_lease_is_refused_by_the_database(server, reference):
    """SIGSTOP the leader past its lease, let a standby take over, SIGCONT it: its next write is
    refused by the database (SQLSTATE FM001), it steps down (one line naming the new leader) and
    stands by, and the log holds nothing of its old term after the takeover; once the standby has
    drained the run and stopped, the old leader leads again, finds the run done and stops (0)."""
    for _ in range(3):
        dsn, rc, err, stopped_at = _stale_leader_attempt(server, reference)
        if "idle-in-transaction" in err:
            continue  # paused inside a transaction: the server ended its session instead; again
        break
    assert rc == 0, err
    down = [line for line in err.splitlines() if "stepped down" in line]
    assert len(down) == 1, err
    assert "the database refused this replica's write" in down[0] and "stale leader" in down[0], err
    assert "epoch 1 refused, the current epoch is 2" in down[0] and "(epoch 2); standing by" in down[0], err
    assert "Traceback" not in err, err
    assert lease(dsn)[0] == 3, "the old leader did not lead again"
    first_of_b = int(run_pg(dsn, "SELECT first_seq FROM leader_terms WHERE epoch = 2")[0][0])
    assert first_of_b >= stopped_at
    late = run_pg(dsn, "SELECT count(*) FROM events WHERE epoch = 1 AND seq >= $1", first_of_b)[0][0]
    assert late == 0
    rows = read_pg(dsn)
    assert_same_run(rows, reference, "after the takeover")
    assert_invariants(rows, dsn, "after the takeover")


def decisions_via_api(port: int) -> list[dict[str, Any]]:
    """Every decision GET /v1/decisions pages through."""
    out: list[dict[str, Any]] = []
    since = 1
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/decisions?since={since}&limit=1000") as r:
            page = json.load(r)
        out += page["items"]
        if page["next_since"] is None:
            return out
        since = page["next_since"]


def test_a_standby_serves_the_shared_log_and_answers_the_same_after_taking_over(server, reference):
    dsn = new_log(server)
    pa, pb = free_port(), free_port()
    a = replica(dsn, "--listen", f"127.0.0.1:{pa}", "--serve")
    b: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: lease(dsn)[1] == a.pid, "A never led")
        b = replica(dsn, "--listen", f"127.0.0.1:{pb}", "--serve")
        wait_for(lambda: last_seq(dsn) == len(reference), "the run never drained")
        log_decisions = [r.seq for r in read_pg(dsn) if r.type in DECISION_TYPES]
        wait_for(
            lambda: [d["seq"] for d in decisions_via_api(pb)] == log_decisions, "B's API never caught up"
        )
        from_leader, from_standby = decisions_via_api(pa), decisions_via_api(pb)
        assert from_standby == from_leader
        assert len(from_standby) > 1000
        os.kill(a.pid, signal.SIGKILL)
        a.wait()
        wait_for(lambda: lease(dsn)[1] == b.pid, "B never took over")
        wait_for(lambda: decisions_via_api(pb) == from_leader, "B's answers changed after the takeover")
        b.send_signal(signal.SIGTERM)
        assert b.wait(60) == 0, err(b)
    finally:
        stop_all([a] + ([b] if b else []))
    assert lease(dsn)[0] == 2
