"""Helpers for the API tests: a recorded history (real cycles over the example cluster) and views over it."""

from __future__ import annotations

import asyncio
import copy
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fumarole.api.app import build_app
from fumarole.daemon.cache import Projection, load_projection
from fumarole.daemon.manifests import expand_job, load_objects
from fumarole.daemon.runtime.api_view import LiveView
from fumarole.daemon.runtime.conf_watch import bundled_conf_text, conf_hash, parse_scheduler_conf
from fumarole.daemon.runtime.cycle import decide
from fumarole.daemon.runtime.writer import Writer
from fumarole.store.events import (
    BindDecided,
    ClockAdvanced,
    ConfigurationRecorded,
    PodUpserted,
    upserted,
)
from fumarole.store.sqlite import SqliteEventLog

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "daemon/examples/cluster.yaml"
FUMAROLE = str(Path(sys.executable).parent / "fumarole")
TOKEN = "s3cret-token"


def observed(at: int) -> list[Any]:
    """The example cluster (4 cpu nodes, 2 GPU nodes, queues research/batch, four jobs) as observed events."""
    objs = load_objects(str(EXAMPLE))
    pcs = [o for o in objs if o[2]["kind"] == "PriorityClass"]
    out: list[Any] = []
    for f, i, o in objs:
        items = expand_job(f, i, o, priority_classes=pcs) if o["kind"] == "Job" else [o]
        out.extend(upserted(m, at) for m in items)
    return out


async def write_history(path: str, cycles: int = 3) -> dict[str, Any]:
    """A daemon-like run: observed facts, cycles decided and appended, the cluster answering binds."""
    log = await SqliteEventLog.open(path)
    p = Projection()
    info: dict[str, Any] = {"cycles": [], "binds": []}

    async def write(events: list[Any]) -> list[int]:
        seqs = await log.append(events)
        for s, e in zip(seqs, events, strict=True):
            p.fold(s, e)
        return seqs

    text = bundled_conf_text()
    conf = parse_scheduler_conf(text, "bundled")
    await write([ConfigurationRecorded(conf_hash=conf_hash(text), text=text)])
    await write(observed(1_000))
    now = 1_000
    for c in range(1, cycles + 1):
        d = decide(
            p.freeze(cycle=c),
            conf,
            cycle=c,
            watermark=p.seq,
            conf_hash=conf_hash(text),
            previous=p.explanations(),
            previous_queues=p.queue_figures_in_force(),
        )
        seqs = await write(list(d.events))
        info["cycles"].append(seqs[0])
        answers: list[Any] = []
        for s, ev in zip(seqs, d.events, strict=True):
            if isinstance(ev, BindDecided):
                info["binds"].append((s, ev))
                m = copy.deepcopy(p.manifest("Pod", ev.namespace, ev.name))
                assert m is not None
                m["spec"]["nodeName"] = ev.node
                m.setdefault("status", {})["phase"] = "Running"
                answers.append(PodUpserted(namespace=ev.namespace, name=ev.name, manifest=m, at_ms=now))
        now += 1_000
        answers.append(ClockAdvanced(at_ms=now))
        await write(answers)
    info["last"] = p.seq
    await log.close()
    return info


class FakeService:
    """What LiveView reads of the daemon's Service."""

    def __init__(self) -> None:
        self.ready = True

    def leadership(self) -> tuple[bool | None, str]:
        return None, ""

    def config_warnings(self) -> list[str]:
        return []


class LiveFixture:
    """A LiveView over a log file with its writer task running (close() stops both)."""

    def __init__(self, log: SqliteEventLog, view: LiveView, writer: Writer, task: asyncio.Task[None]) -> None:
        self.log = log
        self.view = view
        self.writer = writer
        self.task = task

    @classmethod
    async def open(cls, path: str) -> LiveFixture:
        log = await SqliteEventLog.open(path)
        projection = await load_projection(log)
        writer = Writer(log, projection.fold, projection.seq)
        task = asyncio.get_running_loop().create_task(writer.run())
        view = LiveView(FakeService(), log, projection, writer)  # type: ignore[arg-type]
        return cls(log, view, writer, task)

    async def close(self) -> None:
        self.view.close_index()
        await self.writer.close()
        await self.task
        await self.log.close()


def history_fixture(name: str, *, cycles: int) -> Any:
    """A module-scoped fixture `history`: a log of `cycles` recorded cycles (write_history), written
    once per module in a temporary directory named after `name`; use as `history = history_fixture(…)`."""

    @pytest.fixture(scope="module")
    def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
        db = tmp_path_factory.mktemp(name) / "log.db"
        asyncio.run(write_history(str(db), cycles=cycles))
        return db

    return history


def fresh_copy(history: Path, tmp_path: Path) -> Path:
    """A copy of the recorded log `history` a test may write to (tmp_path/log.db)."""
    db = tmp_path / "log.db"
    shutil.copy(history, db)
    return db


async def live_copy(history: Path, tmp_path: Path) -> LiveFixture:
    """A LiveFixture over a fresh copy of `history`."""
    return await LiveFixture.open(str(fresh_copy(history, tmp_path)))


async def api_client(db: Path, aiohttp_client: Any, token: str = "t") -> AsyncIterator[Any]:
    """An aiohttp test client of the API over the log file `db` (its LiveFixture as `client.fx`);
    for a fixture body: `async for c in api_client(db, aiohttp_client): yield c`."""
    fx = await LiveFixture.open(str(db))
    c = await aiohttp_client(build_app(fx.view, token=token))
    c.fx = fx
    try:
        yield c
    finally:
        await c.close()
        await fx.close()


async def get_json(client: Any, url: str, status: int = 200) -> Any:
    """GET `url`, check the status, return the decoded body."""
    r = await client.get(url)
    assert r.status == status, (url, r.status, await r.text())
    return await r.json()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FUMAROLE_", "NOTIFY_SOCKET"))}
    e["PYTHONUNBUFFERED"] = "1"
    return e


def start_serve(
    db: Path, *extra: str, listen: str = "127.0.0.1:0", env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """`fumarole serve --db db --listen 127.0.0.1:0 [extra...]`; returns the process and its base URL."""
    proc = subprocess.Popen(
        [FUMAROLE, "serve", "--db", str(db), "--listen", listen, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**child_env(), **(env or {})},
    )
    return proc, wait_for_url(proc)


def wait_for_url(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """The base URL of the "REST API on http://HOST:PORT" line the process prints."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                err = proc.stderr.read() if proc.stderr else ""
                raise AssertionError(f"the process exited with {proc.returncode}: {err}")
            continue
        if line.startswith("REST API on "):
            return line.split()[3]
    raise AssertionError("no 'REST API on' line")


def stop(proc: subprocess.Popen[str]) -> int:
    """SIGTERM, then wait; returns the exit code."""
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=10)
