"""GET endpoints over a recorded history: cycles, decisions, events, jobs, queues, nodes, metrics."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fumarole_api_kit import api_client, get_json, write_history


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    db = tmp_path_factory.mktemp("api-reads") / "log.db"
    info = asyncio.run(write_history(str(db), cycles=3))
    return db, info


@pytest.fixture
async def client(
    history: tuple[Path, dict[str, Any]], tmp_path: Path, aiohttp_client: Any
) -> AsyncIterator[Any]:
    db = tmp_path / "log.db"
    shutil.copy(history[0], db)
    async for c in api_client(db, aiohttp_client):
        yield c


async def test_health_and_ready(client: Any, history: tuple[Path, dict[str, Any]]) -> None:
    assert await get_json(client, "/healthz") == {"status": "ok"}
    ready = await get_json(client, "/readyz")
    assert ready == {
        "ready": True,
        "folded_seq": history[1]["last"],
        "last_seq": history[1]["last"],
        "config_warnings": [],
    }
    client.fx.view._service.ready = False
    assert (await get_json(client, "/readyz", 503))["ready"] is False


async def test_cycles_are_keyset_paged_with_counts(client: Any, history: tuple[Path, dict[str, Any]]) -> None:
    first = await get_json(client, "/v1/cycles?limit=2")
    assert [c["cycle"] for c in first["items"]] == [1, 2]
    assert [c["seq"] for c in first["items"]] == history[1]["cycles"][:2]
    c1 = first["items"][0]
    assert c1["watermark"] == c1["seq"] - 1 and len(c1["conf_hash"]) == 64
    assert c1["closed"]["binds"] == 8 and c1["closed"]["jobs"] == 4  # the example cluster's first cycle
    nxt = await get_json(client, f"/v1/cycles?since={first['next_since']}&limit=2")
    assert [c["cycle"] for c in nxt["items"]] == [3]
    assert nxt["next_since"] is None


async def test_cycle_detail_lists_its_decisions(client: Any, history: tuple[Path, dict[str, Any]]) -> None:
    d = await get_json(client, "/v1/cycles/1")
    assert d["cycle"]["cycle"] == 1
    types = [x["type"] for x in d["decisions"]]
    assert types[0] == "cycle.opened" and types[-1] == "cycle.closed"
    assert types.count("decision.bind") == 8
    assert "decision.queue_figures" in types
    assert all(x["event"]["cycle"] == 1 for x in d["decisions"])
    page = await get_json(client, "/v1/cycles/1?limit=3")
    assert len(page["decisions"]) == 3 and page["next_since"] == page["decisions"][-1]["seq"] + 1
    assert (await get_json(client, "/v1/cycles/99", 404))["error"] == "not-found"
    bad = await get_json(client, "/v1/cycles/x1", 400)
    assert bad["path"] == "path.id"


async def test_decisions_by_job_pod_queue_node_cycle(
    client: Any, history: tuple[Path, dict[str, Any]]
) -> None:
    binds = history[1]["binds"]
    seq, ev = binds[0]
    by_job = await get_json(client, f"/v1/decisions?job={ev.job}")
    assert by_job["items"] and all(
        x["event"].get("job", f"{x['event']['namespace']}/{x['event']['name']}") == ev.job
        for x in by_job["items"]
    )
    assert seq in [x["seq"] for x in by_job["items"]]
    by_pod = await get_json(client, f"/v1/decisions?pod={ev.namespace}/{ev.name}")
    assert [x["seq"] for x in by_pod["items"]] == [seq]
    by_node = await get_json(client, f"/v1/decisions?node={ev.node}&type=decision.bind")
    assert by_node["items"] and {x["event"]["node"] for x in by_node["items"]} == {ev.node}
    by_queue = await get_json(client, "/v1/decisions?queue=research&type=decision.bind")
    assert {x["event"]["queue"] for x in by_queue["items"]} == {"research"}
    assert len(by_queue["items"]) == sum(1 for _, b in binds if b.queue == "research")
    by_cycle = await get_json(client, "/v1/decisions?cycle=2&limit=1000")
    assert {x["event"]["cycle"] for x in by_cycle["items"]} == {2}
    page1 = await get_json(client, "/v1/decisions?cycle=1&limit=2")
    page2 = await get_json(client, f"/v1/decisions?cycle=1&limit=2&since={page1['next_since']}")
    assert page2["items"][0]["seq"] > page1["items"][-1]["seq"]
    none = await get_json(client, "/v1/decisions?job=nobody/nothing")
    assert none == {"items": [], "next_since": None}


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("limit=0", "query.limit"),
        ("limit=1001", "query.limit"),
        ("since=-1", "query.since"),
        ("cycle=abc", "query.cycle"),
        ("type=decision.nope", "query.type"),
        ("since=99999999999999999999999", "query.since"),
    ],
)
async def test_decisions_bad_query_is_400_with_the_parameter(client: Any, query: str, path: str) -> None:
    body = await get_json(client, f"/v1/decisions?{query}", 400)
    assert body["error"] == "bad-request" and body["path"] == path and body["detail"]


async def test_events_keyset_paged_and_filtered(client: Any, history: tuple[Path, dict[str, Any]]) -> None:
    page = await get_json(client, "/v1/events?limit=5")
    assert [x["seq"] for x in page["items"]] == [1, 2, 3, 4, 5]
    assert page["items"][0]["type"] == "config.recorded"
    nxt = await get_json(client, f"/v1/events?since={page['next_since']}&limit=5")
    assert nxt["items"][0]["seq"] == 6
    nodes = await get_json(client, "/v1/events?type=node.upserted&limit=100")
    assert len(nodes["items"]) == 6 and {x["type"] for x in nodes["items"]} == {"node.upserted"}
    both = await get_json(client, "/v1/events?type=node.upserted,queue.upserted&limit=100")
    assert {x["type"] for x in both["items"]} == {"node.upserted", "queue.upserted"}
    assert (await get_json(client, "/v1/events?type=bogus", 400))["path"] == "query.type"
    tail = await get_json(client, f"/v1/events?since={history[1]['last'] + 1}")
    assert tail == {"items": [], "next_since": None}


async def test_jobs_list_and_filters(client: Any) -> None:
    jobs = await get_json(client, "/v1/jobs")
    names = [f"{j['namespace']}/{j['name']}" for j in jobs["items"]]
    assert names == sorted(names) and "team-a/bad-fit" in names and "team-a/train" in names
    train = next(j for j in jobs["items"] if j["name"] == "train")
    assert train["pending"] is False and train["tasks_by_status"] == {"Running": 4}
    research = await get_json(client, "/v1/jobs?queue=research")
    assert research["items"] and {j["queue"] for j in research["items"]} == {"research"}
    assert (await get_json(client, "/v1/jobs?phase=NoSuchPhase"))["items"] == []


async def test_pending_job_is_explained_with_ranked_reasons(client: Any) -> None:
    bad = await get_json(client, "/v1/jobs/team-a/bad-fit")
    assert bad["pending"] is True and bad["tasks_by_status"].get("Pending")
    ex = bad["explanation"]
    assert ex["message"].startswith(f"{bad['tasks_by_status']['Pending']}/")
    assert ex["queue_position"] >= 1
    assert [r["rank"] for r in ex["reasons"]] == list(range(len(ex["reasons"])))
    top = ex["reasons"][0]
    assert top["code"] in {"predicates-failed", "gang-unsatisfied", "enqueue-rejected", "queue-overused"}
    assert any(r["total_nodes"] == 6 and r["nodes"] for r in ex["reasons"]), ex["reasons"]
    assert set(ex["pods"]) and all(p.startswith("team-a/bad-fit") for p in ex["pods"])
    done = await get_json(client, "/v1/jobs/team-a/train")
    assert done["pending"] is False and done["explanation"] is None
    assert {t["status"] for t in done["tasks"]} == {"Running"} and all(t["node"] for t in done["tasks"])
    missing = await get_json(client, "/v1/jobs/team-a/nope", 404)
    assert missing["error"] == "not-found" and "team-a/nope" in missing["detail"]


async def test_queues_carry_spec_and_plugin_figures(client: Any) -> None:
    qs = await get_json(client, "/v1/queues")
    by = {q["name"]: q for q in qs["items"]}
    assert by["research"]["weight"] == 3 and by["batch"]["weight"] == 1
    assert by["batch"]["capability"]["cpu"] == "40"
    assert by["research"]["deserved"] and by["research"]["allocated"]["nvidia.com/gpu"] == "8"
    assert 0 < by["research"]["share"] <= 1 and by["research"]["state"] == "Open"
    one = await get_json(client, "/v1/queues/research")
    assert one == by["research"]
    await get_json(client, "/v1/queues/none", 404)


async def test_nodes_show_allocatable_idle_used_pods(client: Any) -> None:
    ns = await get_json(client, "/v1/nodes")
    by = {n["name"]: n for n in ns["items"]}
    assert set(by) == {"cpu-0", "cpu-1", "cpu-2", "cpu-3", "gpu-0", "gpu-1"}
    gpu = by["gpu-0"]
    assert gpu["allocatable"]["nvidia.com/gpu"] and gpu["used"]["nvidia.com/gpu"]
    assert sorted(gpu["pods"]) == gpu["pods"] and all(
        p.startswith("team-a/train-worker-") for p in gpu["pods"]
    )
    assert await get_json(client, "/v1/nodes/gpu-0") == gpu
    await get_json(client, "/v1/nodes/none", 404)


async def test_metrics_use_volcano_names(client: Any) -> None:
    # metrics count what the daemon folds from now on; fold one more cycle's worth through the writer
    from fumarole.store.events import CycleClosed, JobExplained

    fx = client.fx
    await fx.writer.submit(
        [
            JobExplained(
                cycle=9,
                namespace="team-a",
                name="etl",
                queue="batch",
                message="1/1 pods pending",
                pods={"team-a/etl-0": "x"},
            ),
            CycleClosed(cycle=9, binds=2, pending_tasks=3, duration_s=0.012, plugin_seconds={"gang": 0.001}),
        ]
    )
    r = await client.get("/metrics")
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
    text = await r.text()
    assert "volcano_e2e_scheduling_latency_milliseconds_count 1.0" in text
    assert 'volcano_schedule_attempts_total{result="scheduled"} 2.0' in text
    assert 'volcano_schedule_attempts_total{result="unschedulable"} 3.0' in text
    assert (
        'volcano_plugin_scheduling_latency_milliseconds_count{OnSession="Callbacks",plugin="gang"} 1.0'
        in text
    )
    assert 'volcano_unschedule_task_count{job_id="etl"} 1.0' in text
    assert 'volcano_queue_weight{queue_name="research"} 3.0' in text  # seeded from the folded figures
    assert (
        'volcano_queue_allocated_scalar_resources{queue_name="research",resource="nvidia.com/gpu"} 8000.0'
        in text
    )
    assert "volcano_unschedule_job_count" in text and "_created" not in text


async def test_openapi_document(client: Any) -> None:
    doc = await get_json(client, "/openapi.json")
    assert doc["openapi"] == "3.1.0"
    for path in (
        "/v1/cycles",
        "/v1/cycles/{id}",
        "/v1/decisions",
        "/v1/events",
        "/v1/jobs",
        "/v1/jobs/{namespace}/{name}",
        "/v1/queues",
        "/v1/queues/{name}",
        "/v1/nodes",
        "/v1/nodes/{name}",
        "/v1/hypernodes",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert path in doc["paths"], path
    schemas = doc["components"]["schemas"]
    assert {"JobDetail", "PendingReason", "IngestRequest", "BindDecided", "Problem"} <= set(schemas)
    assert set(doc["paths"]["/v1/events"]) == {"get", "post"}


async def test_unknown_route_is_json_404(client: Any) -> None:
    body = await get_json(client, "/v2/nothing", 404)
    assert body["error"] == "not-found"
