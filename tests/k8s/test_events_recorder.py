"""The event recorder writing to the fake API server through the adapter's own client (aiohttp).

What client-go's recordToSink does, checked on what the server holds: an identical event becomes a
strategic merge patch of the Event's count; a patch of an Event that is gone becomes a create; a
tokened Event recorded again by a restarted recorder answers 409 AlreadyExists and is not written
twice; the queue drops (and counts) what does not fit; the fake counts the writes per verb and
resource in `apiserver_request_total`, as the real server's /metrics does.  With
KUBE_APISERVER=/path/to/kube-apiserver the same tests run against a real server
(../shared/k8s/start.sh), but for the checks of the fake's own request log.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_kit import ApiServer, api_server
from fake_apiserver import ALL
from kube_http import Kube, write_kubeconfig

from fumarole.daemon.adapters.kubernetes.client import KubeApi
from fumarole.daemon.adapters.kubernetes.events import MAX_QUEUED_EVENTS, EventRecorder, ObjectRef, Send

Api = ApiServer


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with api_server(tmp_path_factory.mktemp("k8s"), tokens={"admin": ALL}) as server:
        yield server


@pytest.fixture
def kube(api: Api) -> Kube:
    return Kube(api.url, api.token)


@pytest.fixture
def ns(kube: Kube) -> str:
    name = "t" + uuid.uuid4().hex[:8]
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.fixture
async def send(api: Api, tmp_path: Path) -> AsyncIterator[Send]:
    client = await KubeApi.connect(str(write_kubeconfig(tmp_path / "kubeconfig", api.url, api.token)))

    async def request(method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        return await client.request(method, path, body=body, content_type=content_type)

    try:
        yield request
    finally:
        await client.close()


async def written(rec: EventRecorder, send: Send) -> None:
    """Run the recorder until everything recorded so far is written."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(rec.run, send)
        with anyio.fail_after(30):
            await rec.flush()
        tg.cancel_scope.cancel()


def events_about(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    return sorted(
        (e for e in kube.list("Event", ns) if e["involvedObject"]["name"] == name),
        key=lambda e: e["metadata"]["name"],
    )


async def test_a_decision_forwarded_again_after_a_restart_writes_one_scheduled_event(
    kube: Kube, ns: str, send: Send
) -> None:
    ref = ObjectRef.pod(ns, "p", "uid-p")
    message = f"Successfully assigned {ns}/p to n1"
    first_life = EventRecorder()
    first_life.record(ref, "Normal", "Scheduled", message, dedup_token="17/uid-p")
    await written(first_life, send)
    assert (first_life.counters.created, first_life.counters.already_existed) == (1, 0)

    second_life = EventRecorder()  # a restart: nothing remembered
    second_life.record(ref, "Normal", "Scheduled", message, dedup_token="17/uid-p")
    await written(second_life, send)
    assert (second_life.counters.created, second_life.counters.already_existed) == (0, 1)
    assert second_life.counters.failed == 0
    [event] = events_about(kube, ns, "p")
    assert (event["reason"], event["message"], event["count"]) == ("Scheduled", message, 1)
    assert event["source"] == {"component": "volcano"} and event["reportingComponent"] == "volcano"
    assert event["involvedObject"] == {
        "kind": "Pod",
        "namespace": ns,
        "name": "p",
        "uid": "uid-p",
        "apiVersion": "v1",
    }

    untokened = EventRecorder()  # client-go's clock-named Event: written a second time
    untokened.record(ref, "Normal", "Scheduled", message)
    await written(untokened, send)
    assert untokened.counters.created == 1 and len(events_about(kube, ns, "p")) == 2


async def test_an_identical_event_patches_the_count_and_a_gone_one_is_created_again(
    api: Api, kube: Kube, ns: str, send: Send
) -> None:
    ref = ObjectRef.pod(ns, "q", "uid-q")
    rec = EventRecorder()
    for _ in range(3):
        rec.record(ref, "Warning", "FailedScheduling", "0/4 nodes are available")
    await written(rec, send)
    [event] = events_about(kube, ns, "q")
    assert event["count"] == 3
    assert (rec.counters.created, rec.counters.patched) == (1, 2)
    if api.fake is not None:
        patches = [
            (m, p, s)
            for m, p, s in api.fake.requests
            if m == "PATCH" and p.startswith(f"/api/v1/namespaces/{ns}/events/")
        ]
        assert len(patches) == 2 and all(s == 200 for *_, s in patches)

    kube.request("DELETE", kube.path("Event", event["metadata"]["name"], ns))
    rec.record(ref, "Warning", "FailedScheduling", "0/4 nodes are available")
    await written(rec, send)
    assert (rec.counters.created, rec.counters.patched, rec.counters.failed) == (2, 2, 0)
    [again] = events_about(kube, ns, "q")  # created under the same name, with the count so far
    assert (again["metadata"]["name"], again["count"]) == (event["metadata"]["name"], 4)
    assert again["firstTimestamp"] == event["firstTimestamp"]


async def test_ten_similar_events_leave_nine_events_and_one_combined(kube: Kube, ns: str, send: Send) -> None:
    ref = ObjectRef.pod(ns, "r", "uid-r")
    rec = EventRecorder()
    for i in range(11):
        rec.record(ref, "Warning", "FailedScheduling", f"{i}/4 nodes are available")
    await written(rec, send)
    events = events_about(kube, ns, "r")
    assert len(events) == 10
    combined = [e for e in events if e["message"].startswith("(combined from similar events): ")]
    assert [(e["message"], e["count"]) for e in combined] == [
        ("(combined from similar events): 10/4 nodes are available", 2)
    ]
    assert (rec.counters.created, rec.counters.patched, rec.counters.skipped) == (10, 1, 0)


async def test_the_spam_filter_skips_after_25_events_about_one_pod(kube: Kube, ns: str, send: Send) -> None:
    ref = ObjectRef.pod(ns, "s", "uid-s")
    rec = EventRecorder()
    for _ in range(30):
        rec.record(ref, "Warning", "FailedScheduling", "the same")
    await written(rec, send)
    assert (rec.counters.created, rec.counters.patched, rec.counters.skipped) == (1, 24, 5)
    [event] = events_about(kube, ns, "s")
    assert event["count"] == 25


def test_a_full_queue_drops_and_counts() -> None:
    rec = EventRecorder()
    for i in range(MAX_QUEUED_EVENTS):
        assert rec.record(ObjectRef.pod("ns", f"p{i}"), "Normal", "Scheduled", "m")
    assert not rec.record(ObjectRef.pod("ns", "one-too-many"), "Normal", "Scheduled", "m")
    assert (rec.queued, rec.counters.dropped) == (MAX_QUEUED_EVENTS, 1)


async def test_the_fake_counts_writes_per_verb_and_resource_as_the_real_metrics_do(
    api: Api, kube: Kube, ns: str, send: Send
) -> None:
    before = kube.request_totals()
    rec = EventRecorder()
    ref = ObjectRef.pod(ns, "m", "uid-m")
    rec.record(ref, "Normal", "Scheduled", "a", dedup_token="1")
    rec.record(ref, "Normal", "Scheduled", "a", dedup_token="1")  # identical: a patch
    await written(rec, send)
    rec2 = EventRecorder()
    rec2.record(ref, "Normal", "Scheduled", "a", dedup_token="1")  # 409 AlreadyExists
    await written(rec2, send)
    after = kube.request_totals()
    delta = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    assert delta[("POST", "events", "")] == 2 and delta[("PATCH", "events", "")] == 1
    if api.fake is not None:
        assert api.fake.write_counts()[("POST", "events", "")] >= 2
        assert any(k[0] == "POST" and k[3] == "events" and k[6] == "409" for k in api.fake.request_totals)
        posts = [r for r in api.fake.requests if r[0] == "POST" and r[1] == f"/api/v1/namespaces/{ns}/events"]
        assert [s for *_, s in posts] == [201, 409]
