"""The cyclic garbage collector paused around allocation-heavy work that makes no garbage (loading
a cluster, building or encoding a snapshot, a session): one context manager for every such place."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block; the collector's previous state is restored after.

    A block that allocates millions of long-lived objects would otherwise have the collector
    traverse all of them again and again as its generations fill."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
