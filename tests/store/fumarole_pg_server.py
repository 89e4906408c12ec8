"""A throwaway PostgreSQL server for the tests and benchmarks: initdb + pg_ctl in a temporary directory.

`pg_server()` starts one server per process on first use (as the unprivileged user `nobody` when
run as root: initdb refuses root) listening on 127.0.0.1 at a free port, trust authentication,
fsync off, and stops it at exit.  `fresh_dsn()` creates an empty database on it and returns its
DSN.  The binaries come from Debian's `postgresql` package (/usr/lib/postgresql/<major>/bin).
`require_pg()` is the tests' gate: without the binaries a test is skipped with the reason, except
under CI=true where it fails (the suite must not pass silently without PostgreSQL).
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

_USER = "fumarole"


@dataclass
class PgServer:
    bindir: Path
    datadir: Path
    port: int
    runas: list[str]
    opts: str = ""

    def pg_ctl(self, *args: str) -> None:
        """Run pg_ctl on this server's cluster (as the server's user), waiting for it to finish."""
        r = subprocess.run(
            [*self.runas, str(self.bindir / "pg_ctl"), "-D", str(self.datadir), *args],
            capture_output=True,
            text=True,
            check=False,
            cwd=self.datadir.parent,
        )
        if r.returncode != 0:
            raise RuntimeError(f"pg_ctl {' '.join(args)} failed ({r.returncode}): {r.stderr or r.stdout}")

    def restart_fast(self) -> None:
        """`pg_ctl restart -m fast`: every session ended, the server back with the same options."""
        log = str(self.datadir.parent / "server.log")  # else the server keeps pg_ctl's output open
        self.pg_ctl("-m", "fast", "-l", log, "-w", "-t", "60", "restart")

    def stop_fast(self) -> None:
        """`pg_ctl stop -m fast` (sessions ended, refused until `start`)."""
        self.pg_ctl("-m", "fast", "-w", "-t", "60", "stop")

    def start(self) -> None:
        """`pg_ctl start` with the options the server was first started with."""
        log = str(self.datadir.parent / "server.log")
        self.pg_ctl("-o", self.opts, "-l", log, "-w", "-t", "60", "start")

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        out = subprocess.run(
            [
                str(self.bindir / "psql"),
                "-X",
                "-qAt",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                self.dsn(database),
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout

    def stop(self) -> None:
        subprocess.run(
            [*self.runas, str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "stop"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(self.datadir.parent, ignore_errors=True)


def find_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/<major>/bin holding initdb and pg_ctl, or $FUMAROLE_PG_BIN."""
    env = os.environ.get("FUMAROLE_PG_BIN")
    if env:
        return Path(env)
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    for d in reversed(found):
        if (d / "pg_ctl").exists() and (d / "postgres").exists():
            return d
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(bindir: Path, *, durable: bool = False) -> PgServer:
    """initdb a new cluster in a temporary directory and start it; raises RuntimeError naming the step.

    The tests' server skips fsync (nothing survives it anyway); `durable=True` (the benchmark) keeps
    PostgreSQL's defaults: fsync, synchronous_commit, full_page_writes."""
    root = Path(tempfile.mkdtemp(prefix="fumarole-pg-"))
    datadir = root / "data"
    runas: list[str] = []
    if os.geteuid() == 0:
        runas = ["runuser", "-u", "nobody", "--"]
        os.chmod(root, 0o755)
        shutil.chown(root, "nobody")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}

    def run(cmd: list[str], step: str) -> None:
        r = subprocess.run([*runas, *cmd], capture_output=True, text=True, env=env, cwd=root, check=False)
        if r.returncode != 0:
            raise RuntimeError(
                f"PostgreSQL test server: {step} failed ({r.returncode}): {r.stderr or r.stdout}"
            )

    run(
        [str(bindir / "initdb"), "-D", str(datadir), "-U", _USER, "-A", "trust", "-E", "UTF8", "--no-sync"],
        "initdb",
    )
    port = _free_port()
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=200"
    if not durable:
        opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    run(
        [
            str(bindir / "pg_ctl"),
            "-D",
            str(datadir),
            "-o",
            opts,
            "-l",
            str(root / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        ],
        "pg_ctl start",
    )
    server = PgServer(bindir, datadir, port, runas, opts)
    atexit.register(server.stop)
    deadline = time.monotonic() + 30
    while True:
        try:
            server.psql("SELECT 1")
            return server
        except subprocess.CalledProcessError as e:
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL test server: not answering: {e.stderr}") from e
            time.sleep(0.1)


_server: PgServer | None = None
_counter = itertools.count(1)


def pg_server() -> PgServer:
    """The process's test server, started on first use."""
    global _server
    if _server is None:
        bindir = find_bindir()
        if bindir is None:
            raise FileNotFoundError(
                "PostgreSQL binaries not found (/usr/lib/postgresql/*/bin; apt-get install postgresql)"
            )
        _server = start_server(bindir)
    return _server


def require_pg() -> PgServer:
    """The server, or skip (locally, without the binaries) / fail (under CI=true, or when it cannot start)."""
    try:
        return pg_server()
    except FileNotFoundError as e:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and no PostgreSQL server: {e}")
        pytest.skip(str(e))


def fresh_dsn(server: PgServer) -> str:
    """A new, empty database on the server; its DSN."""
    name = f"t{os.getpid()}_{next(_counter)}"
    server.psql(f"CREATE DATABASE {name} TEMPLATE template0")
    return server.dsn(name)
