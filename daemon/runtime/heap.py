"""Keeping CPython's cyclic garbage collector off the daemon's long-lived heap.

The projection holds every manifest, parsed record and cached task, node and job: millions of
objects at 100k pods.  A session allocates a copy of the snapshot that lives until it ends, and
those survivors make CPython run full collections every few cycles, each traversing the whole
heap (a pause of up to a second at 2,000 nodes, whichever step it lands in).

`HeapSettler.settle()`, called once per cycle after the freeze, moves what is not frozen yet
(what changed since the last cycle) to the permanent generation (`gc.freeze`), where the
collector does not traverse it.  Reference counting still frees frozen objects; only cyclic
garbage among them would wait, so the heap is unfrozen and collected whole once it has grown
by `full_growth` (a half) since the last whole collection, and at least every `full_every`
cycles (as CPython's own rule for its oldest generation, a full collection only once the
long-lived objects grew by a quarter: the cost of whole collections stays proportional to what
was allocated, ~3 times the final heap traversed while it grows, and frozen cyclic garbage is
bounded by half the heap).  Each whole collection is logged at debug level.  The heap's size is
read as `sys.getallocatedblocks()` (a walk over the allocator's arenas, < 1 ms at 3M objects;
`gc.get_freeze_count()` walks every frozen object, ~0.1 s there).

Measured on a 2,000-node run (bench/daemon.py's workload), the collections this replaced found
nothing: a young collection before each freeze (3-7 ms a cycle late in the run: the young
objects' references reach all over a heap of millions of objects) and a whole one every 100
cycles (0.8-3 s each).  Sessions leave no cyclic garbage (`run_session` releases the session)
and the projection's objects are freed by reference counting; a configuration that did leave
some would only bring the next whole collection nearer.

`loading()` wraps the start-up load the same way (paused, then frozen). The first `settle()`
only freezes: what exists then is the freshly loaded projection (at 100k
pods a full collection of it takes ~1 s of a restart's first cycle, and it holds next to no
cyclic garbage); it is collected with the rest at the next whole collection.

`HeapSettler.paused()` wraps the freeze (it allocates the snapshot's new objects) and the
session: no cyclic collection runs while it allocates its copy of the snapshot (with the
long-lived heap frozen, CPython would otherwise run full collections over the session's growing
heap every ~70k allocations).  When the block ends, what it allocated and kept (the snapshot's
new objects; the session's result and decision events) is frozen at once, before the collector
is re-enabled: the allocation count the block ran up would otherwise trigger a young collection
at the first allocation after it, which traversed those survivors for nothing (~0.5-1.5 ms a
cycle at 1,000-2,000 nodes: `gc.freeze()` also resets that count).  Collection never changes
what a session decides: it only moves when memory is reclaimed.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from fumarole.daemon.gc_pause import collector_paused

__all__ = ["HeapSettler", "loading"]

log = logging.getLogger("fumarole.heap")


@contextmanager
def loading() -> Iterator[None]:
    """Around loading the projection at start-up: no cyclic collection inside, and what was
    loaded goes straight to the permanent generation (`gc.freeze`): it is long-lived, and the
    full collection its allocations would trigger next traverses all of it (~1-2 s at 100k pods).
    `HeapSettler` collects the whole heap every `full_every` cycles."""
    with collector_paused():
        yield
        gc.freeze()


class HeapSettler:
    def __init__(self, *, full_every: int = 2000, full_growth: float = 0.5) -> None:
        if full_every < 1:
            raise ValueError("full_every: at least 1")
        if full_growth <= 0:
            raise ValueError("full_growth: must be positive")
        self.full_every = full_every
        self.full_growth = full_growth
        self.cycles = 0
        self.full_collections = 0
        self._last_full = 0
        self._blocks_after_full = 0

    def settle(self) -> None:
        """Freeze what is not frozen yet; collect the whole heap first once it grew by
        `full_growth` since the last whole collection, or `full_every` calls after it."""
        self.cycles += 1
        if self.cycles == 1:
            gc.freeze()
            self._blocks_after_full = sys.getallocatedblocks()
            return
        grown = sys.getallocatedblocks() > self._blocks_after_full * (1 + self.full_growth)
        if grown or self.cycles - self._last_full >= self.full_every:
            t0, before = time.perf_counter(), sys.getallocatedblocks()
            gc.unfreeze()
            found = gc.collect()
            gc.freeze()
            self.full_collections += 1
            self._last_full = self.cycles
            self._blocks_after_full = sys.getallocatedblocks()
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "heap collected whole",
                    extra={
                        "cycle": self.cycles,
                        "blocks_before": before,
                        "blocks_after": self._blocks_after_full,
                        "unreachable": found,
                        "seconds": round(time.perf_counter() - t0, 6),
                    },
                )
            return
        gc.freeze()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No cyclic collection inside the block (the collector's previous state is restored),
        and what the block allocated and kept goes to the permanent generation when it ends
        (as the next `settle()` would put it), before the collector is re-enabled."""
        with collector_paused():
            yield
            gc.freeze()
