"""HeapSettler: what is new is frozen out of the cyclic collector's reach each cycle, and cyclic
garbage that became unreachable after it was frozen is still reclaimed by a whole collection once
the heap grew by `full_growth`, and at least every `full_every` cycles."""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Iterator

import pytest

from fumarole.daemon.runtime.heap import HeapSettler, loading


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture(autouse=True)
def _unfrozen_afterwards() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_heap_settle_freezes_the_survivors() -> None:
    gc.unfreeze()
    HeapSettler(full_every=10).settle()
    assert gc.get_freeze_count() > 0


def test_heap_frozen_cyclic_garbage_is_reclaimed_by_the_periodic_full_collection() -> None:
    gc.unfreeze()
    settler = HeapSettler(full_every=3)
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    alive = weakref.ref(a)
    settler.settle()  # cycle 1: the pair is alive, so it is frozen
    del a, b
    settler.settle()  # cycle 2: frozen objects are out of the collector's reach
    assert alive() is not None
    settler.settle()  # cycle 3: unfreeze, collect everything
    assert alive() is None


def test_heap_full_every_must_be_positive() -> None:
    with pytest.raises(ValueError, match="full_every"):
        HeapSettler(full_every=0)
    with pytest.raises(ValueError, match="full_growth"):
        HeapSettler(full_growth=0)


def test_heap_whole_collection_once_the_heap_grew_by_full_growth() -> None:
    gc.unfreeze()
    settler = HeapSettler(full_every=10**6, full_growth=0.25)
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    alive = weakref.ref(a)
    settler.settle()  # cycle 1: the pair is alive, so it is frozen
    del a, b
    settler.settle()  # the heap did not grow: young collection only
    settler.settle()
    assert alive() is not None and settler.full_collections == 0
    ballast = [_Node() for _ in range(sys.getallocatedblocks() // 2)]
    settler.settle()  # the heap grew by half, past a quarter: unfreeze, collect everything
    assert alive() is None and settler.full_collections == 1
    settler.settle()  # measured afresh after the whole collection: no growth since
    assert settler.full_collections == 1
    del ballast


def test_heap_paused_stops_cyclic_collection_inside_and_restores_it() -> None:
    settler = HeapSettler()
    with settler.paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), settler.paused():
        raise RuntimeError("a failing session")
    assert gc.isenabled()


def test_heap_paused_freezes_what_the_block_kept_so_no_young_collection_follows() -> None:
    # A session allocates far past the young generation's threshold with the collector off;
    # re-enabled as it was, the collector would traverse the survivors at the next allocation.
    gc.unfreeze()
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    settler = HeapSettler()
    with settler.paused():
        kept = [_Node() for _ in range(50_000)]
    assert gc.get_freeze_count() >= len(kept)
    assert gc.get_count()[0] < 100
    gc.callbacks.append(seen)
    try:
        after = [_Node() for _ in range(100)]
    finally:
        gc.callbacks.remove(seen)
    assert collections == [] and len(after) == 100


def test_heap_loading_pauses_collection_and_freezes_what_was_loaded() -> None:
    gc.unfreeze()
    with loading():
        assert not gc.isenabled()
        loaded = [_Node() for _ in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(loaded)
    gc.unfreeze()
    with pytest.raises(RuntimeError), loading():
        raise RuntimeError("a failing load")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_heap_first_settle_only_freezes() -> None:
    gc.unfreeze()
    settler = HeapSettler(full_every=2)
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    alive = weakref.ref(a)
    del a, b
    settler.settle()  # cycle 1: frozen as it is (the freshly loaded heap is not traversed)
    assert alive() is not None
    settler.settle()  # cycle 2 (full_every): unfreeze, collect everything
    assert alive() is None
