"""The codec: round trips of every event type, versioning and upcasting, refusal of bad bytes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fumarole_store_kit import ALL_SAMPLES, clock, node

from fumarole.store.codec import UPCASTERS, CodecError, current_version, decode, encode, event_row
from fumarole.store.events import (
    EVENT_TYPES,
    ClockAdvanced,
    NodeUpserted,
    PodGroupConditionRecord,
    PodGroupStatusChanged,
    event_type,
)


def test_samples_cover_every_event_type():
    assert sorted(event_type(e) for e in ALL_SAMPLES) == sorted(EVENT_TYPES)


@pytest.mark.parametrize("event", ALL_SAMPLES, ids=lambda e: event_type(e))
def test_round_trip(event):
    tag, v, data = event_row(event)
    assert tag == event_type(event)
    assert v == current_version(tag) == (2 if tag in ("clock.advanced", "decision.podgroup_status") else 1)
    assert decode(tag, v, data) == event
    # the bytes are a msgpack map carrying the tag and the version
    raw = msgspec.msgpack.decode(data)
    assert raw["type"] == tag and raw["v"] == v


def test_encoding_is_deterministic_for_equal_events():
    assert encode(node(1)) == encode(node(1))
    assert encode(node(1)) != encode(node(2))


def test_encode_refuses_non_events_and_unencodable_values():
    with pytest.raises(CodecError, match="not an event"):
        encode({"type": "node.upserted"})  # type: ignore[arg-type]
    with pytest.raises(CodecError, match="cannot encode"):
        encode(NodeUpserted(name="a", manifest={"x": object()}))
    with pytest.raises(CodecError, match="v=3"):
        encode(NodeUpserted(name="a", manifest={}, v=3))


@pytest.mark.parametrize(
    ("type_", "v", "data", "message"),
    [
        ("node.nope", 1, encode(node(1)), "unknown event type 'node.nope'"),
        ("node.upserted", 2, encode(node(1)), "newer Fumarole"),
        ("node.upserted", 1, b"\xc1", "node.upserted v1"),
        ("node.upserted", 1, b"", "node.upserted v1"),
        ("node.upserted", 1, encode(clock(1)), "Invalid value 'clock.advanced'"),
        ("node.upserted", 1, msgspec.msgpack.encode({"type": "node.upserted", "name": 3}), "Expected `str`"),
        ("node.upserted", 0, encode(node(1)), "no upcaster"),
    ],
)
def test_decode_refuses_bad_rows(type_, v, data, message):
    with pytest.raises(CodecError, match=message):
        decode(type_, v, data)


def test_upcasters_run_in_order_from_the_stored_version():
    calls: list[int] = []

    def v_minus1_to_0(f: dict[str, Any]) -> dict[str, Any]:
        calls.append(-1)
        f["node_name"] = f.pop("nodename")
        return f

    def v0_to_1(f: dict[str, Any]) -> dict[str, Any]:
        calls.append(0)
        f["name"] = f.pop("node_name")
        f.setdefault("manifest", {})
        return f

    table = {("node.upserted", -1): v_minus1_to_0, ("node.upserted", 0): v0_to_1}
    old = msgspec.msgpack.encode({"type": "node.upserted", "v": -1, "nodename": "n1", "at_ms": 5})
    ev = decode("node.upserted", -1, old, upcasters=table)
    assert ev == NodeUpserted(name="n1", manifest={}, at_ms=5)
    assert ev.v == 1
    assert calls == [-1, 0]


def test_an_upcaster_producing_a_bad_shape_is_an_error():
    table = {("node.upserted", 0): lambda f: {"name": 1}}
    with pytest.raises(CodecError, match="upcast from v0"):
        decode("node.upserted", 0, msgspec.msgpack.encode({"x": 1}), upcasters=table)


def test_a_v1_clock_advance_reads_as_one_with_no_facts():
    old = msgspec.msgpack.encode({"type": "clock.advanced", "v": 1, "at_ms": 7000})
    assert decode("clock.advanced", 1, old) == ClockAdvanced(at_ms=7000, facts=0)


def test_shipped_upcaster_registry_only_names_known_types_and_old_versions():
    for (tag, v), fn in UPCASTERS.items():
        assert tag in EVENT_TYPES and v < current_version(tag) and callable(fn)


def test_podgroup_conditions_are_keyed_type_and_a_v1_event_keyed_type__still_decodes():
    cond = PodGroupConditionRecord(type="Unschedulable", status="True", reason="NotEnoughResources")
    ev = PodGroupStatusChanged(cycle=4, namespace="ns", name="pg", phase="Pending", conditions=(cond,))
    tag, v, data = event_row(ev)
    assert (tag, v) == ("decision.podgroup_status", 2)
    written = msgspec.msgpack.decode(data)["conditions"][0]
    assert written["type"] == "Unschedulable" and "type_" not in written
    assert b'"type":"Unschedulable"' in msgspec.json.encode(ev)
    # what v1 (before the rename) wrote: the condition's kind under `type_`
    old = msgspec.msgpack.encode(
        {
            "type": "decision.podgroup_status",
            "v": 1,
            "cycle": 4,
            "namespace": "ns",
            "name": "pg",
            "phase": "Pending",
            "running": 0,
            "succeeded": 0,
            "failed": 0,
            "conditions": [
                {
                    "type_": "Unschedulable",
                    "status": "True",
                    "reason": "NotEnoughResources",
                    "message": "",
                    "transition_id": "",
                }
            ],
            "trace_id": "",
        }
    )
    assert decode("decision.podgroup_status", 1, old) == ev
