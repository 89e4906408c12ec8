"""Every session the runtime tests run in process checks that it left its snapshot untouched (the daemon's
snapshots share unchanged jobs and nodes with earlier ones, so a session must never write to one).

The copy-on-write session open (model/snapshot.py `clone`) shares the snapshot's tasks with the
session; `guard_snapshots` fingerprints each snapshot before and after its session and fails the
test if anything in it changed (framework/run.py, model/fingerprint.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from daemon.scheduler.framework.run import guard_snapshots


@pytest.fixture(autouse=True)
def _snapshot_guard() -> Iterator[None]:
    guard_snapshots(True)
    yield
    guard_snapshots(False)
