"""The event log's writer lock (store/lock.py): one holder, its PID named, gone with its process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fumarole.store.lock import LogLockedError, WriterLock, check_unlocked, lock_path

_HOLD = """
import sys, time
from fumarole.store.lock import WriterLock
lock = WriterLock.acquire(sys.argv[1])
print("held", flush=True)
time.sleep(600)
"""


def _holder(db: Path) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(db)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_second_holder_is_refused_naming_the_first_pid(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    first = _holder(db)
    try:
        with pytest.raises(LogLockedError) as err:
            WriterLock.acquire(db)
        assert err.value.pid == first.pid
        assert f"in use by process {first.pid}" in str(err.value)
        assert str(lock_path(db)) in str(err.value)
        with pytest.raises(LogLockedError):
            check_unlocked(db)
    finally:
        first.kill()
        first.wait()
        assert first.stdout is not None
        first.stdout.close()


def test_kill_9_leaves_no_stale_lock(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    first = _holder(db)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert first.stdout is not None
    first.stdout.close()
    assert lock_path(db).exists()  # the file stays, its lock does not
    check_unlocked(db)
    with WriterLock.acquire(db) as lock:
        assert lock.held
        assert lock_path(db).read_text() == f"{os.getpid()}\n"


def test_release_frees_and_check_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    check_unlocked(db)
    assert list(tmp_path.iterdir()) == []
    lock = WriterLock.acquire(db)
    with pytest.raises(LogLockedError):  # flock: another open file in the same process conflicts too
        WriterLock.acquire(db)
    lock.release()
    lock.release()
    assert not lock.held
    WriterLock.acquire(db).release()
