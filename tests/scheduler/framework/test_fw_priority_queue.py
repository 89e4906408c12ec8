"""PriorityQueue pops in the same order as Go's container/heap, even with stale comparators."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fumarole.daemon.scheduler.framework.priority_queue import PriorityQueue


class GoHeap:
    """A transcription of container/heap's algorithm (Push = append + up; Pop = swap, down, remove)."""

    def __init__(self, less: Callable[[Any, Any], bool]) -> None:
        self.h: list[Any] = []
        self.less = less

    def _less(self, i: int, j: int) -> bool:
        return self.less(self.h[i], self.h[j])

    def _swap(self, i: int, j: int) -> None:
        self.h[i], self.h[j] = self.h[j], self.h[i]

    def _up(self, j: int) -> None:
        while True:
            i = int((j - 1) / 2)  # Go's integer division truncates toward zero
            if i == j or not self._less(j, i):
                break
            self._swap(i, j)
            j = i

    def _down(self, i0: int, n: int) -> None:
        i = i0
        while True:
            j1 = 2 * i + 1
            if j1 >= n or j1 < 0:
                break
            j = j1
            j2 = j1 + 1
            if j2 < n and self._less(j2, j1):
                j = j2
            if not self._less(j, i):
                break
            self._swap(i, j)
            i = j

    def push(self, x: Any) -> None:
        self.h.append(x)
        self._up(len(self.h) - 1)

    def pop(self) -> Any:
        n = len(self.h) - 1
        self._swap(0, n)
        self._down(0, n)
        return self.h.pop()


# An operation is ("push", item, new_key_for_some_item) or ("pop",).
ops = st.lists(
    st.one_of(
        st.tuples(st.just("push"), st.integers(0, 30), st.integers(0, 30), st.integers(-5, 5)),
        st.tuples(st.just("pop")),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(ops, st.booleans())
def test_matches_go_heap_with_changing_keys(operations: list[tuple], ties: bool) -> None:
    """Keys change between operations (as queue shares do during allocate): pops must match Go's."""
    keys_a: dict[int, int] = {}
    keys_b: dict[int, int] = {}

    def less_for(keys: dict[int, int]) -> Callable[[int, int], bool]:
        def less(l: int, r: int) -> bool:
            kl, kr = keys.get(l, 0), keys.get(r, 0)
            if ties:
                return kl < kr  # ties leave the order to the algorithm
            return (kl, l) < (kr, r)

        return less

    ours: PriorityQueue[int] = PriorityQueue(less_for(keys_a))
    ref = GoHeap(less_for(keys_b))
    counter = 0
    for op in operations:
        if op[0] == "push":
            _, _, other, delta = op
            item = counter
            counter += 1
            ours.push(item)
            ref.push(item)
            # mutate some item's key after the push: the heap is now stale
            keys_a[other] = keys_a.get(other, 0) + delta
            keys_b[other] = keys_b.get(other, 0) + delta
        elif len(ref.h):
            assert ours.pop() == ref.pop()
        assert len(ours) == len(ref.h)
        assert ours.empty() is (len(ref.h) == 0)
    while len(ref.h):
        assert ours.pop() == ref.pop()
    assert ours.empty()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-100, 100), max_size=50))
def test_sorted_output_with_stable_keys(values: list[int]) -> None:
    q: PriorityQueue[int] = PriorityQueue(lambda l, r: l < r)
    for v in values:
        q.push(v)
    out = [q.pop() for _ in range(len(values))]
    assert out == sorted(values)


def test_known_stale_heap_example_differs_from_a_fresh_sort() -> None:
    """A stale heap pops by its stale shape (as Volcano's does), not by a fresh minimum."""
    keys = {"a": 1, "b": 2, "c": 3}
    q: PriorityQueue[str] = PriorityQueue(lambda l, r: keys[l] < keys[r])
    for x in ("a", "b", "c"):
        q.push(x)
    keys["c"] = 0  # c is now the smallest, but sits below a in the heap
    assert [q.pop() for _ in range(3)] == ["a", "c", "b"]


def test_clone_is_independent() -> None:
    q: PriorityQueue[int] = PriorityQueue(lambda l, r: l < r)
    for v in (3, 1, 2):
        q.push(v)
    c = q.clone()
    assert c.pop() == 1
    assert len(q) == 3 and len(c) == 2
    assert [q.pop() for _ in range(3)] == [1, 2, 3]
