"""Replicas on one PostgreSQL log riding out their database: a leader and a standby (`fumarole run
--db postgresql://… --serve`, the simulator, REST on both) while the real server is restarted
(`pg_ctl restart -m fast`), stopped for longer than the lease and started again, or has every
backend of the database terminated (`pg_terminate_backend`) again and again during appends.

Each run must end as the uninterrupted one (event for event, timings aside, as
test_e2e_postgres compares), with no replica exiting, the leader keeping its term (the standby
gives it a lease of grace after the outage), no raw traceback and one warning line per outage and
process, `fumarole replay` identical, and every endpoint of both replicas answering again
(/readyz ready with the same leader, /healthz naming it, /v1/cycles, /v1/cycles/{id},
/v1/decisions, /v1/jobs/{ns}/{name}, the lease-holder metric).

A leader cut off from the database (a proxy between it and the server, tests/store/fumarole_pg_proxy.py)
for longer than its lease while a standby takes over must step down, not exit: one line naming
the new leader, its API read-only again and naming that leader; and once the new leader is killed
it leads again, from the log as any takeover does, the run ending as the uninterrupted one.

The server is this module's own (restarting the session's shared one would disturb other tests).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fumarole_e2e_kit import FUMAROLE, env, free_port, uninterrupted_pg_run, wait_for
from test_e2e_postgres import (
    LEASE,
    assert_invariants,
    assert_same_run,
    err,
    last_seq,
    lease,
    new_log,
    read_pg,
    replica,
    stop_all,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
from fumarole_pg_proxy import CuttableProxy
from fumarole_pg_server import PgServer, find_bindir, require_pg, start_server
from fumarole_store_kit import run_pg

from fumarole.store.index import DECISION_TYPES
from fumarole.store.log import StoredEvent

FAULT_AT = 1500  # the fault comes once the log holds this many events (of about 5,000)
STOP_SECONDS = 3.0  # longer than the lease (1 s): the leader's renewals fail all along


@pytest.fixture(scope="module")
def server() -> PgServer:
    require_pg()  # the gate: skip without the binaries, fail under CI=true
    bindir = find_bindir()
    assert bindir is not None
    s = start_server(bindir)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def reference(server: PgServer) -> list[StoredEvent]:
    dsn = new_log(server)
    uninterrupted_pg_run(dsn, LEASE)
    return read_pg(dsn)


def get(port: int, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            body = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        body, status = e.read(), e.code
    text = body.decode()
    return status, json.loads(text) if text.startswith(("{", "[")) else text


def decisions(port: int) -> list[int]:
    out: list[int] = []
    since = 1
    while True:
        status, page = get(port, f"/v1/decisions?since={since}&limit=1000")
        assert status == 200, page
        out += [d["seq"] for d in page["items"]]
        if page["next_since"] is None:
            return out
        since = page["next_since"]


def terminate_backends(server: PgServer, dsn: str) -> int:
    """End every session on the log's database but this one; how many."""
    db = dsn.rsplit("/", 1)[1]
    rows = run_pg(
        server.dsn(),
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = $1 AND pid <> pg_backend_pid()",
        db,
    )
    return int(rows[0][0])


def restart(server: PgServer, dsn: str) -> None:
    server.restart_fast()


def stop_and_start(server: PgServer, dsn: str) -> None:
    server.stop_fast()
    time.sleep(STOP_SECONDS)
    server.start()


def terminate_during_appends(server: PgServer, dsn: str) -> None:
    ended = 0
    for _ in range(6):
        before = last_seq(dsn)
        ended += terminate_backends(server, dsn)
        deadline = time.monotonic() + 30
        while last_seq(dsn) == before:  # the next termination comes during the next appends
            assert time.monotonic() < deadline, "no append after a termination"
            time.sleep(0.01)
    assert ended >= 6 * 4  # each time at least the leader's writer, reader, listener and the standby's


def answering(port: int, leader_pid: int, leading: bool, logged: list[int] | None = None) -> None:
    """Every endpoint of the replica on `port` answers, naming the same leader."""
    if logged is not None:
        wait_for(lambda: decisions(port) == logged, f"the API on {port} never answered again")
    for path in ("/readyz", "/healthz"):
        wait_for(lambda path=path: get(port, path)[0] == 200, f"{path} on {port} never answered again")
        status, body = get(port, path)
        assert body["leading"] is leading and body["leader"].split("/")[1] == str(leader_pid), body
    status, cycles = get(port, "/v1/cycles?limit=5")
    assert status == 200 and cycles["items"], cycles
    status, one = get(port, f"/v1/cycles/{cycles['items'][0]['cycle']}")
    assert status == 200, one
    status, page = get(port, "/v1/decisions?limit=5")
    assert status == 200 and page["items"], page
    status, jobs = get(port, "/v1/jobs")
    assert status == 200 and jobs["items"], jobs
    job = jobs["items"][0]
    status, detail = get(port, f"/v1/jobs/{job['namespace']}/{job['name']}")
    assert status == 200, detail
    status, metrics = get(port, "/metrics")
    assert f'fumarole_lease_holder{{holder="{body["leader"]}"}} 1.0' in metrics
    assert f"fumarole_leader {1.0 if leading else 0.0}" in metrics


FAULTS = [(1500, restart), (2500, stop_and_start), (3500, terminate_during_appends)]


def test_the_replicas_ride_out_a_restart_a_stop_and_terminated_backends(server, reference):
    """One run (a leader A, a standby B, REST on both) through the three faults in turn."""
    dsn = new_log(server)
    pa, pb = free_port(), free_port()
    a = replica(dsn, "--listen", f"127.0.0.1:{pa}", "--serve")
    b: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: lease(dsn)[1] == a.pid, f"A never led: {err(a)}")
        b = replica(dsn, "--listen", f"127.0.0.1:{pb}", "--serve")
        wait_for(lambda: get(pb, "/readyz")[0] == 200, f"B's API never caught up: {err(b)}")
        # Caught up, B stays ready while A appends (it used to flap to 503 now and then).
        polls = []
        while last_seq(dsn) < FAULTS[0][0]:
            polls.append(get(pb, "/readyz")[0])
        assert set(polls) <= {200}, polls
        for at, fault in FAULTS:
            wait_for(lambda at=at: last_seq(dsn) >= at, "the run never got far")
            assert last_seq(dsn) < len(reference) - 500, "the run drained before the faults"
            before = last_seq(dsn)
            fault(server, dsn)
            wait_for(lambda before=before: last_seq(dsn) > before + 50, f"no write after {fault.__name__}")
            for p in (a, b):
                assert p.poll() is None, f"after {fault.__name__} a replica exited {p.returncode}: {err(p)}"
            assert lease(dsn) == (1, a.pid), f"the leader lost its term in {fault.__name__}"
            answering(pa, a.pid, True)
            answering(pb, a.pid, False)
        wait_for(lambda: last_seq(dsn) == len(reference), "the run never drained", timeout=120)
        logged = [r.seq for r in read_pg(dsn) if r.type in DECISION_TYPES]
        answering(pa, a.pid, True, logged)
        answering(pb, a.pid, False, logged)
        for p in (a, b):
            p.send_signal(signal.SIGTERM)
        for p in (a, b):
            assert p.wait(60) == 0, err(p)
    finally:
        stop_all([a] + ([b] if b else []))
    for p in (a, b):
        text = err(p)
        assert "Traceback" not in text, text
        lost, back = text.count("cannot be reached"), text.count("answers again after")
        # one line when an outage starts and one when it ends (the restart and the stop; the
        # terminations, each over in milliseconds, may add a pair each), per log of the process
        assert lost == back and 2 <= lost <= 2 * (2 + 6), text
    rows = read_pg(dsn)
    assert_same_run(rows, reference, "through the faults")
    assert_invariants(rows, dsn, "through the faults")
    r = subprocess.run(
        [FUMAROLE, "replay", "--db", dsn], capture_output=True, text=True, timeout=120, env=env()
    )
    assert r.returncode == 0 and " 0 different" in r.stdout, r.stdout + r.stderr


CUT_SECONDS = 2.5  # longer than the lease (1 s): the standby takes over meanwhile


def _cut_off(proxy: CuttableProxy, dsn: str, epoch: int, new_leader: subprocess.Popen[str]) -> None:
    """Cut the proxy until `new_leader` took the lease (epoch `epoch`), a little longer, restore."""
    proxy.cut()
    wait_for(lambda: lease(dsn) == (epoch, new_leader.pid), f"no takeover: {err(new_leader)}")
    time.sleep(max(0.0, CUT_SECONDS - 1.0))
    proxy.restore()


def test_a_leader_cut_off_past_its_lease_steps_down_and_leads_again(server, reference):
    """A leads through a proxy that is cut for longer than the lease while B (connected directly)
    takes over: A steps down (no exit), stands by naming B; B is killed, A leads again; the log
    ends as the uninterrupted run.  Cut off once more after the run drained (A only renews its
    lease then, so it finds the lease taken rather than a write refused), A steps down again."""
    dsn = new_log(server)
    proxy = CuttableProxy(server.port)
    pa, pb = free_port(), free_port()
    a = replica(proxy.dsn_through(dsn), "--listen", f"127.0.0.1:{pa}", "--serve")
    procs = [a]
    try:
        wait_for(lambda: lease(dsn)[1] == a.pid, f"A never led: {err(a)}")
        b = replica(dsn, "--listen", f"127.0.0.1:{pb}", "--serve")
        procs.append(b)
        wait_for(lambda: get(pb, "/readyz")[0] == 200, f"B's API never caught up: {err(b)}")
        wait_for(lambda: last_seq(dsn) >= FAULT_AT, "the run never got far")
        _cut_off(proxy, dsn, 2, b)
        # A stepped down: alive, its API read-only and naming B, while B goes on
        wait_for(lambda: "stepped down" in err(a), f"A never stepped down: {err(a)}")
        assert a.poll() is None, f"A exited {a.returncode}: {err(a)}"
        before = last_seq(dsn)
        wait_for(lambda: last_seq(dsn) > before + 50, "no write under B")
        assert last_seq(dsn) < len(reference) - 500, "the run drained before B was killed"
        answering(pa, b.pid, False)
        answering(pb, b.pid, True)
        b.kill()
        b.wait()
        wait_for(lambda: lease(dsn) == (3, a.pid), f"A never led again: {err(a)}")
        wait_for(lambda: last_seq(dsn) == len(reference), "the run never drained", timeout=120)
        logged = [r.seq for r in read_pg(dsn) if r.type in DECISION_TYPES]
        answering(pa, a.pid, True, logged)
        # drained, A only renews: cut off again while C takes over
        c = replica(dsn, "--listen", f"127.0.0.1:{pb}", "--serve")
        procs.append(c)
        wait_for(lambda: get(pb, "/readyz")[0] == 200, f"C's API never caught up: {err(c)}")
        _cut_off(proxy, dsn, 4, c)
        wait_for(lambda: err(a).count("stepped down") == 2, f"A never stepped down again: {err(a)}")
        answering(pa, c.pid, False, logged)
        for p in (a, c):
            p.send_signal(signal.SIGTERM)
        for p in (a, c):
            assert p.wait(60) == 0, err(p)
    finally:
        stop_all(procs)
        proxy.close()
    text = err(a)
    assert "Traceback" not in text, text
    down = [line for line in text.splitlines() if "stepped down" in line]
    assert len(down) == 2, text  # one line each time, naming the new leader
    assert f"/{b.pid}/" in down[0] and "leads the shared log now (epoch 2)" in down[0], down
    assert "another replica took the lease over" in down[1] and f"/{c.pid}/" in down[1], down
    assert not [line for line in text.splitlines() if line.startswith("error")], text
    rows = read_pg(dsn)
    assert_same_run(rows, reference, "through the step-downs and the second term")
    assert_invariants(rows, dsn, "through the step-downs and the second term")
    terms = run_pg(dsn, "SELECT epoch, holder FROM leader_terms ORDER BY epoch")
    assert [(int(e), int(str(h).split("/")[1])) for e, h in terms] == [
        (1, a.pid),
        (2, b.pid),
        (3, a.pid),
        (4, c.pid),
    ]
    r = subprocess.run(
        [FUMAROLE, "replay", "--db", dsn], capture_output=True, text=True, timeout=120, env=env()
    )
    assert r.returncode == 0 and " 0 different" in r.stdout, r.stdout + r.stderr
