"""GET /v1/decisions from cached row JSON: byte-identical to the typed encoding, bounded, never stale."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fumarole_api_kit import LiveFixture, write_history

import fumarole.store.codec as codec
from fumarole.api.app import build_app
from fumarole.api.decision_json import DecisionJsonCache, decision_page_json, page_json, row_json
from fumarole.api.types import DecisionPage, DecisionRow
from fumarole.daemon.runtime.api_view import ReadOnlyView
from fumarole.store.events import BindDecided, CycleClosed
from fumarole.store.log import CorruptEventError


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
    return fx.view.decision_page(limit=limit, **query)


def _items(page: bytes) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = msgspec.json.decode(page)["items"]
    return items


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
        assert _json_page(live, limit, **query) == want, query  # first time: encoded, not kept
        before = cache.hits
        assert _json_page(live, limit, **query) == want, query  # asked again: seqs first, rows kept
        n = len(_items(want))
        assert all(x["seq"] in cache for x in _items(want)), query
        assert _json_page(live, limit, **query) == want, query  # and then served from the cache
        assert cache.hits - before >= n, query
    assert cache.hits > 0 and cache.misses > 0 and 0 < len(cache) <= cache.misses
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
    cache = live.view.decision_cache
    before = live.view.decision_page(job=bind.job)
    assert live.view.decision_page(job=bind.job) == before  # asked twice: the rows are kept
    n = len(_items(before))
    assert live.view.decision_page(job=bind.job) == before and cache.hits >= n
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
    after = live.view.decision_page(job=bind.job)
    assert after == _typed_page(live, 100, job=bind.job)
    assert _items(after)[:n] == _items(before) and len(_items(after)) == n + 1
    assert _items(after)[-1] == {"seq": seq, "type": "decision.bind", "event": msgspec.to_builtins(new)}
    assert seq in cache  # the missing row was read and kept
    assert live.view.decision_page(job=bind.job) == after
    page = live.view.decision_page(job=bind.job, since=seq)
    assert _items(page) == _items(after)[-1:]
    # a full page says where the next one starts, from the cache as from the store
    for _ in range(3):
        assert msgspec.json.decode(live.view.decision_page(job=bind.job, limit=n))["next_since"] == (
            _items(after)[n - 1]["seq"] + 1
        )


async def test_read_only_view_serves_the_same_bytes(
    recorded: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    db = tmp_path / "ro.db"
    shutil.copy(recorded[0], db)
    view = await ReadOnlyView.open(str(db), decision_cache_bytes=4096, freeze_gc=False)
    try:
        page = view.decision_page(limit=1000)
        typed = view.decisions(limit=1000)
        assert page == msgspec.json.encode(
            DecisionPage(
                items=[DecisionRow(seq=r.seq, type=r.type, event=r.event) for r in typed],  # type: ignore[arg-type]
                next_since=None,
            )
        )
        assert len(view.decision_cache) == 0  # asked once: nothing kept
        assert view.decision_page(limit=1000) == page
        assert 0 < view.decision_cache.bytes <= 4096  # kept, bounded: most rows were evicted
        assert 0 < len(view.decision_cache) < len(typed)
        assert view.decision_page(limit=1000) == page
        assert view.decision_cache.hits > 0
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
    assert decision_page_json(cache.rows(stored), 7) == page_json(stored, limit=6)  # full page: next is 7
    assert decision_page_json(cache.rows(stored), None) == page_json(stored, limit=7)
    assert page_json([], limit=5) == decision_page_json([], None) == b'{"items":[],"next_since":null}'
    off = DecisionJsonCache(0)
    assert off.rows(stored) == cache.rows(stored) and len(off) == 0 and off.bytes == 0
    with pytest.raises(ValueError, match="max_bytes"):
        DecisionJsonCache(-1)
    with pytest.raises(ValueError, match="doorkeeper"):
        DecisionJsonCache(doorkeeper=-1)


def test_doorkeeper_admits_only_queries_asked_before() -> None:
    stored = [(i + 1, "cycle.closed", 1, None, codec.encode(CycleClosed(cycle=i))) for i in range(4)]
    cache = DecisionJsonCache(1 << 20, doorkeeper=2)
    assert [cache.seen(q) for q in ("a", "b", "a", "c", "b", "a")] == [
        False,
        False,
        True,
        False,
        False,
        False,
    ]
    cache.rows(stored[:2], admit=False)
    assert len(cache) == 0 and cache.misses == 2
    cache.rows(stored[:2])
    assert len(cache) == 2 and cache.lookup([1, 2, 3]) == [*cache.rows(stored[:2]), None]
    off = DecisionJsonCache(0)
    assert [off.seen("a") for _ in range(3)] == [0, 0, 0]
    cache.clear()
    assert len(cache) == 0 and cache.bytes == 0 and not cache.seen("a")


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


def _to_v1_podgroup_status(db: Path) -> int:
    """Rewrite the log's decision.podgroup_status rows as v1 wrote them (conditions keyed `type_`)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seq, body FROM events WHERE type = 'decision.podgroup_status'").fetchall()
        for seq, body in rows:
            fields = msgspec.msgpack.decode(body)
            fields["v"] = 1
            fields["conditions"] = [
                {("type_" if k == "type" else k): v for k, v in c.items()} for c in fields["conditions"]
            ]
            conn.execute(
                "UPDATE events SET v = 1, body = ? WHERE seq = ?", (msgspec.msgpack.encode(fields), seq)
            )
    return len(rows)


async def test_old_podgroup_status_rows_are_served_with_conditions_keyed_type(
    recorded: tuple[Path, dict[str, Any]], tmp_path: Path, aiohttp_client: Any
) -> None:
    db = tmp_path / "log.db"
    shutil.copy(recorded[0], db)
    assert _to_v1_podgroup_status(db) > 0
    view = await ReadOnlyView.open(str(db), freeze_gc=False)
    try:
        client = await aiohttp_client(build_app(view))
        pages = []
        for _ in range(3):  # a new query, asked once before, asked twice before (rows from the cache)
            r = await client.get("/v1/decisions?type=decision.podgroup_status")
            assert r.status == 200
            pages.append(await r.read())
        assert pages[0] == pages[1] == pages[2] and b'"type_"' not in pages[0]
        events = [item["event"] for item in json.loads(pages[0])["items"]]
        conditions = [c for e in events for c in e["conditions"]]
        assert conditions and all(c["type"] for c in conditions)
        assert {e["v"] for e in events} == {2}
        train = view.job("team-a", "train")  # the projection folded the upcast events too
        assert train is not None and train.conditions and all(c["type"] for c in train.conditions)
        schema = (await (await client.get("/openapi.json")).json())["components"]["schemas"]
        assert "type" in schema["PodGroupConditionRecord"]["properties"]
        assert "type_" not in schema["PodGroupConditionRecord"]["properties"]
    finally:
        await view.close()
