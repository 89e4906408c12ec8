"""The snapshot guard for the in-process sessions of the scheduler, cache and runtime tests.

The copy-on-write session open (model/snapshot.py `clone`) shares the snapshot's tasks with the
session, and the daemon's snapshots share unchanged jobs and nodes between cycles; so in those
tests `guard_snapshots` fingerprints each snapshot before and after its session and fails the
test if anything in it changed (framework/run.py, model/fingerprint.py).  Elsewhere it stays off:
the fingerprint walks the whole snapshot, too slow for the study's thousands of sessions.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fumarole.daemon.scheduler.framework.run import guard_snapshots

_GUARDED = tuple(Path(__file__).parent / d for d in ("scheduler", "cache", "runtime"))


@pytest.fixture(autouse=True)
def _snapshot_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    path = Path(request.node.path)
    on = any(path.is_relative_to(d) for d in _GUARDED)
    guard_snapshots(on)
    yield
    if on:
        guard_snapshots(False)
