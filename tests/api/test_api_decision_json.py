"""GET /v1/decisions from cached row JSON: byte-identical to the typed encoding, bounded, never stale."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fumarole_api_kit import LiveFixture, write_history

import store.codec as codec
from api.app import build_app
from api.decision_json import DecisionJsonCache, decision_page_json, row_json
from api.types import DecisionPage, DecisionRow
from daemon.runtime.api_view import ReadOnlyView
from store.events import BindDecided, CycleClosed
from store.log import CorruptEventError


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    db = tmp_path_factory.mktemp("api-decision-json") / "log.db"
    info = asyncio.run(write_history(str(db), cycles=3))
    return db, info


@pytest.fixture
async def live(recorded: tuple[Path, dict[str, Any]], tmp_path: Path) -> AsyncIterator[LiveFixture]:
    db = tmp_path / "log.db"
    shutil.copy(recorded[0], db)
    fx = await LiveFixture.open(str(db))
    yield fx
    await fx.close()


def _typed_page(fx: LiveFixture, limit: int, **query: Any) -> bytes:
    """The page as the typed path encodes it (structs decoded by the store, DecisionPage encoded)."""
    rows = fx.view.decisions(limit=limit, **query)
    items = [DecisionRow(seq=r.seq, type=r.type, event=r.event) for r in rows]  # type: ignore[arg-type]
    nxt = rows[-1].seq + 1 if len(rows) >= limit else None
    return msgspec.json.encode(DecisionPage(items=items, next_since=nxt))


def _json_page(fx: LiveFixture, limit: int, **query: Any) -> bytes:
    rows, last = fx.view.decisions_json(limit=limit, **query)
    return decision_page_json(rows, last + 1 if len(rows) >= limit else None)


def _queries(info: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    _, bind = info["binds"][0]
    return [
        (100, {}),
        (1000, {}),
        (3, {"since": 5}),
        (100, {"job": bind.job}),
        (2, {"job": bind.job}),
        (100, {"namespace": bind.namespace, "pod": bind.name}),
        (100, {"node": bind.node, "types": ("decision.bind",)}),
        (100, {"queue": "research"}),
        (100, {"cycle": 2}),
        (100, {"types": ("cycle.closed", "cycle.opened")}),
        (100, {"types": ("decision.job_explained",)}),
        (100, {"types": ("decision.queue_figures",)}),
        (100, {"job": "nobody/nothing"}),
    ]


async def test_cached_rows_are_byte_identical_to_the_typed_encoding(
    live: LiveFixture, recorded: tuple[Path, dict[str, Any]]
) -> None:
    cache = live.view.decision_cache
    for limit, query in _queries(recorded[1]):
        want = _typed_page(live, limit, **query)
        assert _json_page(live, limit, **query) == want, query  # cold: transcoded
        assert _json_page(live, limit, **query) == want, query  # warm: from the cache
    assert cache.hits > 0 and cache.misses > 0 and len(cache) == cache.misses
    # with the cache disabled every row is transcoded, and the answers are the same
    live.view.decision_cache = DecisionJsonCache(0)
    for limit, query in _queries(recorded[1]):
        assert _json_page(live, limit, **query) == _typed_page(live, limit, **query), query
    assert len(live.view.decision_cache) == 0 and live.view.decision_cache.hits == 0


async def test_http_answer_is_the_typed_page(
    live: LiveFixture, recorded: tuple[Path, dict[str, Any]], aiohttp_client: Any
) -> None:
    client = await aiohttp_client(build_app(live.view, token="t"))
    _, bind = recorded[1]["binds"][0]
    for url, limit, query in [
        (f"/v1/decisions?job={bind.job}", 100, {"job": bind.job}),
        ("/v1/decisions?cycle=1&limit=2&since=3", 2, {"cycle": 1, "since": 3}),
        (
            "/v1/decisions?type=cycle.opened,decision.bind&type=cycle.closed",
            100,
            {"types": ("cycle.closed", "cycle.opened", "decision.bind")},
        ),
    ]:
        for _ in range(2):
            r = await client.get(url)
            assert r.status == 200 and r.content_type == "application/json"
            assert await r.read() == _typed_page(live, limit, **query), url
    await client.close()


async def test_new_decisions_are_visible_after_the_cache_is_warm(
    live: LiveFixture, recorded: tuple[Path, dict[str, Any]]
) -> None:
    _, bind = recorded[1]["binds"][0]
    before, _ = live.view.decisions_json(job=bind.job)
    again, _ = live.view.decisions_json(job=bind.job)
    assert again == before and live.view.decision_cache.hits >= len(before)
    new = BindDecided(
        cycle=99,
        namespace=bind.namespace,
        name=bind.name,
        uid=bind.uid,
        node="n-new",
        job=bind.job,
        queue=bind.queue,
    )
    seq = (await live.log.append([new, CycleClosed(cycle=99)]))[0]
    after, last = live.view.decisions_json(job=bind.job)
    assert after[: len(before)] == before
    assert last == seq and len(after) == len(before) + 1
    assert msgspec.json.decode(after[-1]) == {
        "seq": seq,
        "type": "decision.bind",
        "event": msgspec.to_builtins(new),
    }
    paged, _ = live.view.decisions_json(job=bind.job, since=seq)
    assert paged == [after[-1]]


async def test_read_only_view_serves_the_same_bytes(
    recorded: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    db = tmp_path / "ro.db"
    shutil.copy(recorded[0], db)
    view = await ReadOnlyView.open(str(db), decision_cache_bytes=4096, freeze_gc=False)
    try:
        rows, last = view.decisions_json(limit=1000)
        typed = view.decisions(limit=1000)
        assert last == typed[-1].seq
        assert rows == [
            msgspec.json.encode(DecisionRow(seq=r.seq, type=r.type, event=r.event))  # type: ignore[arg-type]
            for r in typed
        ]
        assert 0 < view.decision_cache.bytes <= 4096  # bounded: most rows were evicted
        assert view.decision_cache.hits == 0 and len(view.decision_cache) < len(rows)
        assert view.decisions_json(limit=1000)[0] == rows
    finally:
        await view.close()


def test_cache_is_lru_and_bounded_by_bytes() -> None:
    ev = [CycleClosed(cycle=c) for c in range(6)]
    stored = [(i + 1, "cycle.closed", 1, None, codec.encode(e)) for i, e in enumerate(ev)]
    size = len(row_json(*stored[0][:3], stored[0][4])) + 100
    cache = DecisionJsonCache(3 * size + 10)
    out = cache.rows(stored[:3])
    assert [msgspec.json.decode(r)["seq"] for r in out] == [1, 2, 3] and len(cache) == 3
    cache.rows(stored[:1])  # 1 is now the most recently used
    assert cache.hits == 1
    cache.rows(stored[3:4])  # evicts 2, the least recently used
    assert 2 not in cache and 1 in cache and 3 in cache and 4 in cache
    assert cache.bytes == 3 * size <= cache.max_bytes
    cache.rows(stored)
    assert len(cache) == 3 and cache.bytes <= cache.max_bytes
    off = DecisionJsonCache(0)
    assert off.rows(stored) == cache.rows(stored) and len(off) == 0 and off.bytes == 0
    with pytest.raises(ValueError, match="max_bytes"):
        DecisionJsonCache(-1)


def test_row_json_upcasts_old_versions_and_refuses_corrupt_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    ev = CycleClosed(cycle=7, binds=2)
    current = row_json(40, "cycle.closed", 1, codec.encode(ev))
    assert current == msgspec.json.encode(DecisionRow(seq=40, type="cycle.closed", event=ev))
    old = {k: v for k, v in msgspec.to_builtins(ev).items() if k != "binds"}
    old.update(v=0, bound=2)
    body = msgspec.msgpack.encode(old)

    def up(fields: dict[str, Any]) -> dict[str, Any]:
        fields["binds"] = fields.pop("bound")
        return fields

    monkeypatch.setitem(codec._CURRENT, "cycle.closed", 1)
    monkeypatch.setitem(codec.UPCASTERS, ("cycle.closed", 0), up)
    assert row_json(40, "cycle.closed", 0, body) == current
    with pytest.raises(CorruptEventError):
        row_json(41, "cycle.closed", 1, b"\xc1not msgpack")
    with pytest.raises(CorruptEventError):
        row_json(42, "decision.bind", 1, codec.encode(ev))  # a body of another type
    with pytest.raises(CorruptEventError):
        row_json(43, "cycle.closed", 2, codec.encode(ev))  # newer than the code
