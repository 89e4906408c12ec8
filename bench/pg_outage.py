"""How long replicas on a shared PostgreSQL log take to write again after their database came back,
and to fail over: prints JSON (seconds, min/median/max over --runs).

A throwaway server (initdb + pg_ctl, as the tests start it); per run a new log, a leader and a
standby (`fumarole run --db … --no-api`, the bundled simulation, `lease_duration` --lease), then:

- restart: `pg_ctl restart -m fast` begun → the next event committed;
- stop: `pg_ctl stop -m fast`, --stop seconds, `pg_ctl start` returned → the next event committed;
- terminate: every backend of the database ended (`pg_terminate_backend`) → the next event;
- failover: the leader killed (SIGKILL) → the standby's first event (a new epoch);
- failover_in_outage: the database stopped, the leader killed, the database started → the
  standby's first event (it gives the lost leader one lease of grace after the outage).

Usage: python bench/pg_outage.py [--runs 3] [--lease 1] [--stop 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "store"))
from fumarole_pg_server import PgServer, find_bindir, fresh_dsn, start_server  # noqa: E402

FUMAROLE = str(Path(sys.executable).parent / "fumarole")


def _env(lease: float) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("FUMAROLE_", "OTEL_"))}
    e["FUMAROLE_LEASE_DURATION"] = str(lease)
    return e


async def _head(dsn: str) -> tuple[int, int] | None:
    """(last seq, epoch of the last event), or None while the server does not answer."""
    try:
        conn = await asyncpg.connect(dsn, timeout=1)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
        return None
    try:
        row = await conn.fetchrow(
            "SELECT h.last_seq, coalesce((SELECT epoch FROM events WHERE seq = h.last_seq), 0) "
            "FROM log_head h WHERE id = 1"
        )
        return int(row[0]), int(row[1])
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        return None
    finally:
        conn.terminate()


def head(dsn: str) -> tuple[int, int] | None:
    return asyncio.run(_head(dsn))


def wait_past(dsn: str, seq: int, *, epoch: int = 0, timeout: float = 120) -> float:
    """Monotonic time at which the log first holds an event past `seq` (of at least `epoch`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        h = head(dsn)
        if h is not None and h[0] > seq and h[1] >= epoch:
            return time.monotonic()
        time.sleep(0.005)
    raise RuntimeError(f"no event past {seq} within {timeout}s")


def replica(dsn: str, lease: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [FUMAROLE, "run", "--db", dsn, "--no-api"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(lease),
    )


def terminate_all(server: PgServer, dsn: str) -> None:
    db = dsn.rsplit("/", 1)[1]
    server.psql(
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}' "
        "AND pid <> pg_backend_pid()"
    )


def one_run(server: PgServer, fault: str, lease: float, stop: float) -> float:
    dsn = fresh_dsn(server)
    subprocess.run([FUMAROLE, "migrate", "--db", dsn], check=True, capture_output=True, env=_env(lease))
    a = replica(dsn, lease)
    wait_past(dsn, 0)
    b = replica(dsn, lease)
    try:
        time.sleep(1.5)  # the standby is up and following
        h = head(dsn)
        assert h is not None
        seq = h[0]
        if fault == "restart":
            t0 = time.monotonic()
            server.restart_fast()
        elif fault == "stop":
            server.stop_fast()
            time.sleep(stop)
            server.start()
            t0 = time.monotonic()
        elif fault == "terminate":
            t0 = time.monotonic()
            terminate_all(server, dsn)
        elif fault == "failover":
            t0 = time.monotonic()
            a.send_signal(signal.SIGKILL)
            return wait_past(dsn, seq, epoch=2) - t0
        elif fault == "failover_in_outage":
            server.stop_fast()
            a.send_signal(signal.SIGKILL)
            time.sleep(stop)
            server.start()
            t0 = time.monotonic()
            return wait_past(dsn, seq, epoch=2) - t0
        else:
            raise ValueError(fault)
        h = head(dsn)  # the fault's own moment may have let an append through: count from now
        return wait_past(dsn, max(seq, h[0] if h else seq)) - t0
    finally:
        for p in (a, b):
            p.kill()
            p.wait()


def spread(times: list[float]) -> dict[str, float]:
    """min / median / max of a list of seconds, to the millisecond."""
    return {
        "min": round(min(times), 3),
        "median": round(statistics.median(times), 3),
        "max": round(max(times), 3),
    }


def local_server() -> PgServer:
    """A throwaway PostgreSQL server from Debian's binaries, or exit with a message."""
    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL binaries not found (/usr/lib/postgresql/*/bin)")
    return start_server(bindir)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lease", type=float, default=1.0)
    ap.add_argument("--stop", type=float, default=3.0)
    args = ap.parse_args()
    server = local_server()
    out: dict[str, object] = {"lease_s": args.lease, "stop_s": args.stop, "runs": args.runs}
    try:
        for fault in ("restart", "stop", "terminate", "failover", "failover_in_outage"):
            out[fault] = spread([one_run(server, fault, args.lease, args.stop) for _ in range(args.runs)])
    finally:
        server.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
