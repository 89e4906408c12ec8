"""The parse caches survive a snapshot and a restart (daemon/cache/snapshot_codec.py): a projection
restored from the bytes freezes the same snapshot without parsing its pods again; caches written
by other code, or unreadable, are ignored (the freeze parses) and never an error.  Random event
sequences with restarts in between: test_cache_property.test_cache_live_state_equals_replayed_state."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
from test_cache_incremental_freeze import _cluster, _fresh, _pod

from fumarole.daemon.cache import Projection, decode_projection, encode_projection, load, save, state_image
from fumarole.daemon.cache.describe import describe_snapshot
from fumarole.store.memory import MemoryEventLog


def _frozen(p: Projection) -> tuple[Any, list[str]]:
    return describe_snapshot(p.freeze(cycle=2)), list(p.problems)


def _pods_parsed(p: Projection) -> int:
    return sum(1 for kind, _key in p._parsed if kind == "Pod")


def _events() -> list[Any]:
    bad = _pod("bad", "a")
    bad = msgspec.structs.replace(bad, manifest={**bad.manifest, "spec": "not a mapping"})
    return [*_cluster(pods=6), _pod("waiting", "b", cpu="3"), bad]


def _rewritten(data: bytes, **fields: Any) -> bytes:
    raw = msgspec.msgpack.decode(data)
    raw.update(fields)
    return msgspec.msgpack.encode(raw)


def test_cache_restored_projection_freezes_without_parsing_pods() -> None:
    live = _fresh(_events())
    want = _frozen(live)
    assert any("Pod ns/bad" in m for m in want[1])
    restored = decode_projection(encode_projection(live))
    assert _pods_parsed(restored) == 0
    assert _frozen(restored) == want
    # Only the pod whose parse failed was parsed again (errors are not persisted).
    assert _pods_parsed(restored) == 1
    # And it keeps folding: a changed pod is parsed, the others are not.
    restored.fold(restored.seq + 1, _pod("p1", "b", node="n1", cpu="2"))
    live.fold(live.seq + 1, _pod("p1", "b", node="n1", cpu="2"))
    assert _frozen(restored) == _frozen(live)
    assert _pods_parsed(restored) == 2


def test_cache_parse_caches_of_other_code_are_ignored() -> None:
    live = _fresh(_events())
    want = _frozen(live)
    data = encode_projection(live)
    for bad in (
        _rewritten(data, caches_fingerprint="another build"),
        _rewritten(data, caches=b"not a pickle"),
    ):
        restored = decode_projection(bad)
        assert restored.parse_caches()["templates"] == {}
        assert _frozen(restored) == want
        assert _pods_parsed(restored) == 8


def test_cache_images_without_parse_caches_still_load() -> None:
    live = _fresh(_events())
    want = _frozen(live)
    restored = decode_projection(_rewritten(encode_projection(live), caches=b"", caches_fingerprint=""))
    assert _frozen(restored) == want


def test_cache_snapshot_saved_while_folding_goes_on_is_the_state_at_its_seq() -> None:
    events = _events()
    later = [_pod("p1", "b", node="n1", cpu="2"), _pod("new", "a", cpu="1")]

    async def scenario() -> tuple[int, Projection]:
        log = MemoryEventLog()
        await log.append(events)
        live = _fresh(events)
        live.freeze(cycle=1)  # parse caches filled
        saved: list[int] = []

        async def saving() -> None:
            saved.append(await save(log, live))

        async with anyio.create_task_group() as tg:
            tg.start_soon(saving)
            await anyio.sleep(0)  # the save took its parts and is encoding in a thread
            for ev in later:  # the loop keeps folding meanwhile
                live.fold(live.seq + 1, ev)
                live.freeze(cycle=2)
        await log.append(later)
        return saved[0], await load(log, to_seq=saved[0])

    seq, restored = anyio.run(scenario)
    assert seq == len(events)
    assert state_image(restored) == state_image(_fresh(events))
    assert _frozen(restored) == _frozen(_fresh(events))
