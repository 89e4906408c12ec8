"""GET /v1/queue-history: queue figures and waiting jobs per queue over cycles, from the decision index,
downsampled to `points` sample cycles (each the state as of that cycle), over a real SQLite log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import LiveFixture, api_client, get_json

from fumarole.api.app import build_app
from fumarole.daemon.runtime.queue_history import QueueHistoryReader, sample_cycles
from fumarole.store.events import (
    CycleClosed,
    CycleOpened,
    JobExplained,
    PendingReason,
    QueueFigures,
    QueueFiguresRecorded,
)
from fumarole.store.sqlite import SqliteEventLog


def _figures(cpu_a: str, share_a: float) -> dict[str, QueueFigures]:
    return {
        "a": QueueFigures(weight=1, deserved={"cpu": "4"}, allocated={"cpu": cpu_a}, share=share_a),
        "b": QueueFigures(
            weight=3, deserved={"cpu": "12", "memory": "1Gi"}, allocated={"cpu": "500m"}, share=0.04
        ),
    }


def _wait(cycle: int, job: str, queue: str, waits: bool) -> JobExplained:
    """An explanation that the job waits (with a reason) or, with none, that it no longer does."""
    reasons = (PendingReason(code="gang-unsatisfied", message="gang"),) if waits else ()
    return JobExplained(
        cycle=cycle, namespace="ns", name=job, queue=queue, message="waits" if waits else "", reasons=reasons
    )


async def _write(path: str) -> None:
    """Cycles 1..10: figures recorded at 1 (a: 1 cpu), 4 (a: 3 cpu) and 8 (a: 6 cpu, over deserved);
    job x waits in a from 2 to 5, job y in b from 3 on, job z in a from 7 on."""
    log = await SqliteEventLog.open(path)
    recorded = {1: _figures("1", 0.25), 4: _figures("3", 0.75), 8: _figures("6", 1.5)}
    explained = {2: [("x", "a", True)], 3: [("y", "b", True)], 5: [("x", "a", False)], 7: [("z", "a", True)]}
    events: list[Any] = []
    for c in range(1, 11):
        events.append(CycleOpened(cycle=c, watermark=0, now_ms=c * 1000, conf_hash="h"))
        if c in recorded:
            events.append(QueueFiguresRecorded(cycle=c, queues=recorded[c]))
        for job, queue, waits in explained.get(c, []):
            events.append(_wait(c, job, queue, waits))
        events.append(CycleClosed(cycle=c))
    await log.append(events)
    await log.close()


@pytest.fixture
async def client(tmp_path: Path, aiohttp_client: Any) -> AsyncIterator[Any]:
    db = tmp_path / "log.db"
    await _write(str(db))
    async for c in api_client(db, aiohttp_client):
        yield c


def test_sample_cycles_spread_evenly_with_both_ends() -> None:
    assert sample_cycles(1, 5, 10) == [1, 2, 3, 4, 5]
    assert sample_cycles(1, 100, 5) == [1, 25, 50, 75, 100]
    assert sample_cycles(3, 3, 1) == [3]
    assert sample_cycles(1, 1000, 1) == [1000]
    assert sample_cycles(5, 4, 10) == []


async def test_every_cycle_is_the_state_as_of_that_cycle(client: Any) -> None:
    h = await get_json(client, "/v1/queue-history")
    assert (h["from_cycle"], h["to_cycle"], h["last_cycle"], h["recorded"]) == (1, 10, 10, 3)
    assert h["cycles"] == list(range(1, 11))
    a, b = h["queues"]
    assert a["name"] == "a" and b["name"] == "b"
    assert a["allocated"]["cpu"] == [1, 1, 1, 3, 3, 3, 3, 6, 6, 6]
    assert a["deserved"]["cpu"] == [4] * 10
    assert a["share"] == [0.25] * 3 + [0.75] * 4 + [1.5] * 3
    assert b["allocated"]["cpu"] == [0.5] * 10
    assert b["deserved"]["memory"] == [1024**3] * 10
    assert a["waiting"] == [0, 1, 1, 1, 0, 0, 1, 1, 1, 1]
    assert b["waiting"] == [0, 0, 1, 1, 1, 1, 1, 1, 1, 1]


async def test_a_range_downsampled_to_points(client: Any) -> None:
    h = await get_json(client, "/v1/queue-history?from=2&to=9&points=3")
    assert h["cycles"] == [2, 5, 9] and h["recorded"] == 2
    a = h["queues"][0]
    assert a["allocated"]["cpu"] == [1, 3, 6] and a["waiting"] == [1, 0, 1]


async def test_the_summary_folds_only_what_was_appended_since(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    await _write(db)
    reader = QueueHistoryReader(db)
    try:
        assert reader.history(from_cycle=None, to_cycle=None, points=5, last_cycle=10).recorded == 3
        log = await SqliteEventLog.open(db)
        await log.append(
            [
                CycleOpened(cycle=11, watermark=0, now_ms=11000, conf_hash="h"),
                QueueFiguresRecorded(cycle=11, queues={}),
                _wait(11, "y", "b", False),
            ]
        )
        await log.close()
        h = reader.history(from_cycle=11, to_cycle=None, points=5, last_cycle=11)
        assert reader.catch_up() == 0  # nothing new: the cursor is at the log's end
        assert h.cycles == [11] and h.recorded == 1
        b = next(q for q in h.queues if q.name == "b")
        assert b.share == [None] and b.allocated == {} and b.waiting == [0]
    finally:
        reader.close()


async def test_an_empty_log_has_no_cycles_and_no_queues(tmp_path: Path, aiohttp_client: Any) -> None:
    db = tmp_path / "empty.db"
    await (await SqliteEventLog.open(str(db))).close()
    fx = await LiveFixture.open(str(db))
    c = await aiohttp_client(build_app(fx.view, token="t"))
    try:
        h = await get_json(c, "/v1/queue-history")
        assert h["cycles"] == [] and h["queues"] == [] and h["last_cycle"] == 0
    finally:
        await c.close()
        await fx.close()


async def test_to_beyond_the_log_stops_at_its_last_cycle(client: Any) -> None:
    h = await get_json(client, "/v1/queue-history?from=9&to=99")
    assert h["cycles"] == [9, 10] and h["to_cycle"] == 10


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("points=0", "query.points"),
        ("points=2001", "query.points"),
        ("from=x", "query.from"),
        ("from=5&to=3", "query.to"),
    ],
)
async def test_bad_query_is_400_naming_the_parameter(client: Any, query: str, path: str) -> None:
    body = await get_json(client, f"/v1/queue-history?{query}", 400)
    assert path in str(body)


async def test_openapi_lists_the_endpoint(client: Any) -> None:
    doc = await get_json(client, "/openapi.json")
    op = doc["paths"]["/v1/queue-history"]["get"]
    assert {p["name"] for p in op["parameters"]} == {"from", "to", "points"}
    assert "QueueHistory" in doc["components"]["schemas"]
