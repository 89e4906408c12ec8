"""How long jobs wait, who is ahead of them, and a queue that does not exist, over a real daemon's
finished log: GET /v1/jobs and /v1/jobs/{namespace}/{name} (through the read-only view `fumarole serve`
uses) and `fumarole explain`, checked against a full read of the log."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fumarole_api_kit import FUMAROLE, child_env

from fumarole.daemon.runtime.api_view import ReadOnlyView
from fumarole.store.events import CycleOpened, JobExplained

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from fumarole_e2e_kit import _job, read_log, run_daemon, write_small_sim


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small simulated workload, plus e2e/typo in queue `nosuch` (no such Queue) and e2e/big and e2e/big2,
    gangs that never fit (they wait to the end, big2 behind big)."""
    tmp = tmp_path_factory.mktemp("job-wait")
    cluster, workload = write_small_sim(tmp)
    work = list(yaml.safe_load_all(workload.read_text()))
    work += [
        _job("typo", "nosuch", 1, 1, at=0, dur=10, pc="low"),
        _job("big", "a", 2, 16, at=3, dur=10, pc="low"),
        _job("big2", "a", 2, 16, at=4, dur=10, pc="low"),
    ]
    workload.write_text(yaml.safe_dump_all(work, sort_keys=False))
    p = run_daemon("--data-dir", str(tmp / "data"), "--cluster", str(cluster), "--workload", str(workload))
    assert p.returncode == 0, p.stdout + p.stderr
    return tmp / "data" / "fumarole.db"


def _view(db: Path) -> tuple[list[Any], dict[str, Any]]:
    async def go() -> tuple[list[Any], dict[str, Any]]:
        view = await ReadOnlyView.open(str(db), freeze_gc=False)
        try:
            rows = view.jobs()
            return rows, {f"{r.namespace}/{r.name}": view.job(r.namespace, r.name) for r in rows}
        finally:
            await view.close()

    return asyncio.run(go())


def test_waited_and_ahead_match_the_log(finished: Path) -> None:
    now: dict[int, int] = {}
    since: dict[str, int] = {}
    latest: dict[str, JobExplained] = {}
    for row in read_log(finished):
        ev = row.event
        if isinstance(ev, CycleOpened):
            now[ev.cycle] = ev.now_ms
        elif isinstance(ev, JobExplained):
            job = f"{ev.namespace}/{ev.name}"
            if ev.message or ev.reasons:
                since.setdefault(job, ev.cycle)
                latest[job] = ev
            else:
                since.pop(job, None)
                latest.pop(job, None)
    last = max(now)
    rows, details = _view(finished)
    assert since, "no job waits at the end of the log: the test exercises nothing"
    for r in rows:
        job = f"{r.namespace}/{r.name}"
        want = now[last] - now[since[job]] if job in since else None
        assert r.waited_ms == want, job
        assert details[job].waited_ms == want, job
        top = min(latest[job].reasons, key=lambda x: x.rank).code if job in latest else ""
        assert r.wait_reason == top, job
    assert any(r.waited_ms for r in rows)
    big = details["e2e/big2"]
    mine = latest["e2e/big2"]
    ahead = sorted(
        (e.queue_position, k)
        for k, e in latest.items()
        if k != "e2e/big2" and e.queue == mine.queue and 0 < e.queue_position < mine.queue_position
    )
    assert [(a.position, f"{a.namespace}/{a.name}") for a in big.ahead] == ahead[:50]
    assert big.ahead_total == len(ahead) and ahead, ahead


def test_a_missing_queue_is_named(finished: Path) -> None:
    rows, details = _view(finished)
    typo = next(r for r in rows if r.name == "typo")
    assert typo.queue_exists is False and typo.pending
    assert all(r.queue_exists for r in rows if r.name != "typo")
    assert details["e2e/typo"].queue_exists is False
    out = subprocess.run(
        [FUMAROLE, "explain", "--db", str(finished), "e2e/typo"],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
    )
    assert out.returncode == 0, out.stderr
    assert "queue nosuch does not exist" in out.stdout
    assert "no explanation recorded" not in out.stdout
    out = subprocess.run(
        [FUMAROLE, "explain", "--db", str(finished), "e2e/big"],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
    )
    assert "waiting for " in out.stdout and "(virtual time, to the log's last cycle)" in out.stdout, (
        out.stdout
    )


def test_the_new_fields_are_in_the_openapi_document() -> None:
    from fumarole.api.openapi import openapi_document

    schemas = openapi_document()["components"]["schemas"]
    assert {"waited_ms", "wait_reason", "queue_exists"} <= set(schemas["JobRow"]["properties"])
    detail = schemas["JobDetail"]["properties"]
    assert {"waited_ms", "queue_exists", "ahead", "ahead_total"} <= set(detail)
    assert detail["ahead"]["items"]["$ref"].endswith("/AheadRow")
    assert {"namespace", "name", "position", "phase", "wait_reason"} <= set(schemas["AheadRow"]["properties"])
