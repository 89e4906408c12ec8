"""Listing: pages fetched ahead, every kind at once, Pods and Nodes decoded without managedFields.

The typed decoding gives the same map (keys in the same order) as a plain decoding with
`managedFields` stripped, on a payload recorded from kube-apiserver and on an object carrying every
ObjectMeta field; against the fake API server (the real wire protocol), a listing in pages of 2 logs
exactly the events a listing in one piece logs; an expired `continue` token restarts the listing in
one piece.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

from cluster_kit import node, node_status, pod, podgroup, queue
from fake_apiserver import FakeApiServer
from kube_http import Kube, write_kubeconfig

from fumarole.daemon.adapters.kubernetes.client import KubeApi
from fumarole.daemon.adapters.kubernetes.listing import decode_items, decode_watch_frame, list_collection
from fumarole.daemon.adapters.kubernetes.objects import KINDS, trimmed
from fumarole.daemon.adapters.kubernetes.source import KubeSource

PAYLOADS = Path(__file__).resolve().parents[1] / "k8s" / "payloads"


def plain(raw: bytes) -> list[dict[str, Any]]:
    """The items as a plain decoding gives them, less managedFields (what objects.trimmed drops)."""
    items = msgspec.json.decode(raw)["items"]
    for obj in items:
        obj.get("metadata", {}).pop("managedFields", None)
    return list(items)


def test_the_recorded_pod_list_decodes_as_a_plain_decoding_without_managed_fields() -> None:
    raw = (PAYLOADS / "pod_list.json").read_bytes()
    assert b"managedFields" in raw
    typed = decode_items("Pod", raw)
    assert typed == plain(raw)  # (the recording's keys are sorted: the order is checked below)


def test_every_object_meta_field_is_kept_in_the_api_order() -> None:
    meta = {
        "name": "p",
        "generateName": "p-",
        "namespace": "ns",
        "selfLink": "/api/v1/namespaces/ns/pods/p",
        "uid": "u-1",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2026-11-28T00:00:00Z",
        "deletionTimestamp": "2026-11-28T00:01:00Z",
        "deletionGracePeriodSeconds": 30,
        "labels": {"a": "b"},
        "annotations": {"x/y": "1"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u-n"}],
        "finalizers": ["f"],
        "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}],
    }
    for kind in ("Pod", "Node"):
        body = {"items": [{"metadata": meta, "spec": {"nodeName": "n"}, "status": {"phase": "Pending"}}, {}]}
        raw = msgspec.json.encode(body)
        assert msgspec.json.encode(decode_items(kind, raw)) == msgspec.json.encode(plain(raw))


def test_recorded_watch_frames_log_what_a_plain_decoding_logs() -> None:
    """The watch's typed decoding (Pods and Nodes without managedFields) gives the object the plain
    decoding gives once objects.trimmed has stripped it (the recording's keys are sorted; the order
    of ObjectMeta's keys is the API's, as checked for listings above)."""
    frames = msgspec.json.decode((PAYLOADS / "watch_frames.json").read_bytes())
    assert any("managedFields" in (f["object"].get("metadata") or {}) for f in frames)
    kinds = {k.name: k for k in KINDS}
    for frame in frames:
        line = msgspec.json.encode(frame)
        type_, obj = decode_watch_frame("Pod", line)
        assert type_ == frame["type"]
        if type_ in ("ADDED", "MODIFIED", "DELETED"):
            want = trimmed(kinds["Pod"], msgspec.json.decode(line)["object"])
            assert trimmed(kinds["Pod"], obj) == want
        else:
            assert obj == frame["object"]


def test_watch_frames_of_every_shape_decode() -> None:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    assert decode_watch_frame("Pod", msgspec.json.encode({"type": "ERROR", "object": status})) == (
        "ERROR",
        status,
    )
    bookmark = {"kind": "Pod", "metadata": {"resourceVersion": "9"}}
    assert decode_watch_frame("Pod", msgspec.json.encode({"type": "BOOKMARK", "object": bookmark}))[1] == (
        bookmark
    )
    # A frame of a kind decoded as a plain map, an object that is not one, and no object at all.
    pg = {"kind": "PodGroup", "metadata": {"name": "g", "managedFields": []}, "spec": {"minMember": 2}}
    assert decode_watch_frame("PodGroup", msgspec.json.encode({"type": "ADDED", "object": pg}))[1] == pg
    assert decode_watch_frame("Pod", b'{"type": "MODIFIED", "object": null}') == ("MODIFIED", None)
    assert decode_watch_frame("Node", b'{"type": "ADDED"}') == ("ADDED", None)
    with pytest.raises(msgspec.DecodeError):
        decode_watch_frame("Pod", b'{"type": "ADDED", "object": {')


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer().start()
    kube = Kube(server.url, "admin")
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lst"}})
    kube.create(queue("lst-q", 1))
    for i in range(5):
        kube.create(node(f"lst-n{i}", 8))
        kube.patch_status("Node", f"lst-n{i}", "", node_status(8))
    for g in range(3):
        kube.create(podgroup("lst", f"lst-g{g}", "lst-q", 2, ""))
        for j in range(2):
            kube.create(pod("lst", f"lst-g{g}-{j}", f"lst-g{g}", 1, ""))
    try:
        yield server
    finally:
        server.stop()


def listed(fake: FakeApiServer, tmp_path: Path, page_size: int) -> list[bytes]:
    kc = write_kubeconfig(tmp_path / "kubeconfig", fake.url, "admin")

    async def go() -> list[bytes]:
        api = await KubeApi.connect(str(kc))
        try:
            source = KubeSource(api, ["volcano"], clock=lambda: 7, page_size=page_size)
            events, keys = await source.list_all()
            assert set(source.resource_versions) == {k.name for k in KINDS}
            return [msgspec.json.encode([type(e).__name__, k, e]) for e, k in zip(events, keys, strict=True)]
        finally:
            await api.close()

    return anyio.run(go)


def test_a_listing_in_pages_logs_what_a_listing_in_one_piece_logs(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    whole = listed(fake, tmp_path, 0)
    assert len(whole) >= 2 + 5 + 3 + 6  # resync markers, nodes, podgroups, pods
    assert listed(fake, tmp_path, 2) == whole
    assert listed(fake, tmp_path, 1) == whole


def test_an_expired_continue_token_lists_in_one_piece(fake: FakeApiServer, tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kubeconfig", fake.url, "admin")
    asked: list[dict[str, Any]] = []

    async def go() -> list[dict[str, Any]]:
        api = await KubeApi.connect(str(kc))
        try:

            async def fetch(query: dict[str, Any]) -> tuple[int, bytes]:
                asked.append(dict(query))
                if "continue" in query:  # the revision was compacted meanwhile, as etcd does
                    return 410, b'{"kind":"Status","reason":"Expired","code":410,"message":"too old"}'
                return await api.request_bytes("GET", "/api/v1/pods", query=query)

            items, rv = await list_collection("Pod", fetch, page_size=2)
            assert rv
            return items
        finally:
            await api.close()

    items = anyio.run(go)
    assert [q.get("limit") for q in asked] == [2, 2, None]
    assert len([p for p in items if p["metadata"]["namespace"] == "lst"]) == 6
