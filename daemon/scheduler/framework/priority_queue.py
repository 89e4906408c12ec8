"""A priority queue with Go's container/heap algorithm, so pops match Volcano's even with stale keys.

Volcano orders queues and jobs with `less` functions whose answers change while items sit in
the heap (queue shares move as tasks are allocated).  Python's heapq sifts differently, which
would pop a different item from the same stale heap; this class follows Go's push/pop exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PriorityQueue(Generic[T]):
    __slots__ = ("_items", "_less")

    def __init__(self, less: Callable[[T, T], bool]) -> None:
        self._less = less
        self._items: list[T] = []

    def __len__(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def push(self, item: T) -> None:
        self._items.append(item)
        self._up(len(self._items) - 1)

    def pop(self) -> T:
        items = self._items
        n = len(items) - 1
        items[0], items[n] = items[n], items[0]
        self._down(0, n)
        return items.pop()

    def clone(self) -> PriorityQueue[T]:
        q: PriorityQueue[T] = PriorityQueue(self._less)
        q._items = list(self._items)
        return q

    def adopt(self, other: PriorityQueue[T]) -> None:
        """Take `other`'s items (Volcano's worksheet ShallowCopyFrom)."""
        self._items = other._items

    def _up(self, j: int) -> None:
        items, less = self._items, self._less
        while True:
            i = (j - 1) // 2  # parent
            if i == j or j <= 0 or not less(items[j], items[i]):
                break
            items[i], items[j] = items[j], items[i]
            j = i

    def _down(self, i0: int, n: int) -> bool:
        items, less = self._items, self._less
        i = i0
        while True:
            j1 = 2 * i + 1
            if j1 >= n or j1 < 0:
                break
            j = j1
            j2 = j1 + 1
            if j2 < n and less(items[j2], items[j1]):
                j = j2
            if not less(items[j], items[i]):
                break
            items[i], items[j] = items[j], items[i]
            i = j
        return i > i0
