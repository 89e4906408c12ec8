"""POST /v1/events: bearer token (401/403), 400 with the JSON path (nothing written), idempotency."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import TOKEN, history_fixture, live_copy

from fumarole.api.app import build_app
from fumarole.daemon.runtime.api_view import ReadOnlyView

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _node(name: str, key: str) -> dict[str, Any]:
    return {
        "idem_key": key,
        "event": {
            "type": "node.upserted",
            "name": name,
            "manifest": {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name},
                "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
            },
            "at_ms": 5_000,
        },
    }


history = history_fixture("api-ingest", cycles=1)


async def _client(history: Path, tmp_path: Path, aiohttp_client: Any, **kw: Any) -> Any:
    fx = await live_copy(history, tmp_path)
    c = await aiohttp_client(build_app(fx.view, **kw))
    c.fx = fx
    return c


@pytest.fixture
async def client(history: Path, tmp_path: Path, aiohttp_client: Any) -> AsyncIterator[Any]:
    c = await _client(history, tmp_path, aiohttp_client, token=TOKEN, max_body_bytes=4096)
    yield c
    await c.close()
    await c.fx.close()


async def _last(client: Any) -> int:
    return int(await client.fx.log.last_seq())


async def test_ingest_appends_folds_and_is_idempotent(client: Any) -> None:
    before = await _last(client)
    body = {"events": [_node("new-0", "k-0"), _node("new-1", "k-1")]}
    r = await client.post("/v1/events", json=body, headers=AUTH)
    assert r.status == 200, await r.text()
    out = await r.json()
    assert out == {"seqs": [before + 1, before + 2], "written": 2, "duplicates": 0}
    nodes = await (await client.get("/v1/nodes/new-1")).json()
    assert nodes["allocatable"]["cpu"] == "8"  # folded into the projection right after the commit
    again = await client.post(
        "/v1/events", json={"events": [_node("new-1", "k-1"), _node("new-2", "k-2")]}, headers=AUTH
    )
    out2 = await again.json()
    assert out2 == {"seqs": [before + 2, before + 3], "written": 1, "duplicates": 1}
    assert await _last(client) == before + 3
    rows = await client.fx.log.read(before + 1, 10)
    assert [r.idem_key for r in rows] == ["k-0", "k-1", "k-2"]


async def test_a_key_repeated_inside_one_batch_is_written_once(client: Any) -> None:
    before = await _last(client)
    r = await client.post("/v1/events", json={"events": [_node("a", "dup"), _node("a", "dup")]}, headers=AUTH)
    assert (await r.json()) == {"seqs": [before + 1, before + 1], "written": 1, "duplicates": 1}


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda b: b["events"][1]["event"].pop("name"), "$.events[1].event"),
        (lambda b: b["events"][0]["event"].__setitem__("name", 7), "$.events[0].event.name"),
        (lambda b: b["events"][1]["event"].__setitem__("type", "decision.bind"), "$.events[1].event.type"),
        (lambda b: b["events"][0]["event"].__setitem__("manifest", "x"), "$.events[0].event.manifest"),
        (lambda b: b["events"][0].pop("idem_key"), "$.events[0]"),
        (lambda b: b["events"][1].__setitem__("idem_key", ""), "$.events[1].idem_key"),
        (lambda b: b["events"][0]["event"].__setitem__("v", 9), "$.events[0].event.v"),
        (lambda b: b["events"][0]["event"].__setitem__("at_ms", -5), "$.events[0].event.at_ms"),
        (lambda b: b.__setitem__("extra", 1), "$"),
        (lambda b: b.__setitem__("events", []), "$.events"),
    ],
)
async def test_bad_body_is_400_with_json_path_and_writes_nothing(client: Any, mutate: Any, path: str) -> None:
    body = {"events": [_node("ok-0", "b-0"), _node("ok-1", "b-1")]}
    mutate(body)
    before = await _last(client)
    r = await client.post("/v1/events", json=body, headers=AUTH)
    assert r.status == 400, await r.text()
    problem = await r.json()
    assert problem["error"] == "bad-request" and problem["path"] == path, problem
    assert problem["detail"]
    assert await _last(client) == before
    assert (await client.get("/v1/nodes/ok-0")).status == 404


async def test_not_json_empty_and_wrong_media_type(client: Any) -> None:
    before = await _last(client)
    r = await client.post(
        "/v1/events", data=b"{not json", headers={**AUTH, "Content-Type": "application/json"}
    )
    assert r.status == 400 and (await r.json())["path"] == "$"
    r = await client.post("/v1/events", data=b"", headers={**AUTH, "Content-Type": "application/json"})
    assert r.status == 400
    r = await client.post("/v1/events", data=b"a=b", headers={**AUTH, "Content-Type": "text/plain"})
    assert r.status == 415
    assert await _last(client) == before


async def test_body_over_the_limit_is_413(client: Any) -> None:
    before = await _last(client)
    big = {"events": [_node(f"n{i}", f"big-{i}") for i in range(40)]}
    assert len(json.dumps(big)) > 4096
    r = await client.post("/v1/events", json=big, headers=AUTH)
    assert r.status == 413
    assert (await r.json())["error"] == "too-large"
    assert await _last(client) == before


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        ({"Authorization": f"Basic {TOKEN}"}, 401),
        ({"Authorization": "Bearer"}, 401),
    ],
)
async def test_missing_or_wrong_token_is_401(client: Any, headers: dict[str, str], status: int) -> None:
    before = await _last(client)
    r = await client.post("/v1/events", json={"events": [_node("x", "auth")]}, headers=headers)
    assert r.status == status
    assert r.headers.get("WWW-Authenticate", "").startswith("Bearer")
    assert (await r.json())["error"] == "unauthorized"
    assert await _last(client) == before


async def test_no_token_configured_refuses_writes_with_403(
    history: Path, tmp_path: Path, aiohttp_client: Any
) -> None:
    c = await _client(history, tmp_path, aiohttp_client, token="")
    try:
        before = await _last(c)
        r = await c.post(
            "/v1/events", json={"events": [_node("x", "k")]}, headers={"Authorization": "Bearer "}
        )
        assert r.status == 403
        assert "no API token is configured" in (await r.json())["detail"]
        assert await _last(c) == before
    finally:
        await c.close()
        await c.fx.close()


async def test_read_only_view_refuses_writes_with_403(history: Path, aiohttp_client: Any) -> None:
    view = await ReadOnlyView.open(str(history))
    try:
        c = await aiohttp_client(build_app(view, token=TOKEN))
        r = await c.post("/v1/events", json={"events": [_node("x", "k")]}, headers=AUTH)
        assert r.status == 403 and "read-only" in (await r.json())["detail"]
        jobs = await (await c.get("/v1/jobs")).json()
        assert any(j["name"] == "bad-fit" for j in jobs["items"])
        await c.close()
    finally:
        await view.close()
