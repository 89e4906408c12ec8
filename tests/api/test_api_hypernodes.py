"""GET /v1/hypernodes: the HyperNodes resolved against the nodes as a session resolves them (members
by exact name, regular expression and labels; HyperNode members give the parent; a broken topology
says so), and GET /v1/nodes' pod_jobs (each pod's job, what the dashboard links a pod to)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import LiveFixture
from hypernode_kit import EXPECTED, cluster, hypernode, member

from fumarole.api.app import build_app
from fumarole.store.events import upserted
from fumarole.store.sqlite import SqliteEventLog


async def _client(aiohttp_client: Any, db: Path, objects: list[dict[str, Any]]) -> Any:
    log = await SqliteEventLog.open(str(db))
    try:
        await log.append([upserted(o, 1000) for o in objects])
    finally:
        await log.close()
    fx = await LiveFixture.open(str(db))
    c = await aiohttp_client(build_app(fx.view, token="t"))
    c.fx = fx
    return c


@pytest.fixture
async def client(tmp_path: Path, aiohttp_client: Any) -> AsyncIterator[Any]:
    c = await _client(aiohttp_client, tmp_path / "log.db", cluster())
    yield c
    await c.close()
    await c.fx.close()


async def test_hypernodes_are_resolved_members_and_tiers(client: Any) -> None:
    r = await client.get("/v1/hypernodes")
    assert r.status == 200
    body = await r.json()
    assert body["tiers"] == [1, 2] and body["ready"] is True and body["problem"] == ""
    got = {h["name"]: (h["tier"], h["parent"], h["children"], h["nodes"]) for h in body["items"]}
    assert got == EXPECTED  # node-9, named by rack-b but absent, is not listed
    assert [h["tier_name"] for h in body["items"]] == ["rack", "rack", "rack", "spine", "spine"]
    assert body["folded_seq"] == client.fx.view.folded_seq()


async def test_nodes_say_which_job_each_pod_belongs_to(client: Any) -> None:
    node = await (await client.get("/v1/nodes/node-0")).json()
    assert node["pods"] == ["e2e/train-w-0"]
    assert node["pod_jobs"] == {"e2e/train-w-0": "e2e/train"}
    assert (await (await client.get("/v1/nodes/node-5")).json())["pod_jobs"] == {}


async def test_a_member_with_two_parents_makes_the_topology_not_ready(
    tmp_path: Path, aiohttp_client: Any
) -> None:
    objs = [*cluster(), hypernode("spine-2", 2, [member("HyperNode", exactMatch={"name": "rack-a"})])]
    c = await _client(aiohttp_client, tmp_path / "log.db", objs)
    try:
        body = await (await c.get("/v1/hypernodes")).json()
        assert body["ready"] is False
        assert "rack-a already has a parent spine-0" in body["problem"]
    finally:
        await c.close()
        await c.fx.close()


async def test_no_hypernodes(tmp_path: Path, aiohttp_client: Any) -> None:
    c = await _client(aiohttp_client, tmp_path / "log.db", cluster()[:3])
    try:
        body = await (await c.get("/v1/hypernodes")).json()
        assert body["items"] == [] and body["tiers"] == [] and body["ready"] is True
    finally:
        await c.close()
        await c.fx.close()
