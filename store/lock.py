"""The event log's writer lock: one writing process per log file (`fumarole run`, `fumarole migrate`).

The lock is an exclusive flock(2) on `<db>.lock` beside the database, holding the holder's PID
for the message another process gets.  The kernel drops a flock when its holder exits however it
ends (kill -9 included), so a crash never leaves a stale lock: the file may stay behind, unlocked
and harmless.  Readers (`serve`, `events`, `replay`, `explain`) never take it; SQLite's WAL lets
them read beside the writer.  `check_unlocked` only looks, and creates nothing.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from fumarole.store.log import LogError

__all__ = ["LogLockedError", "WriterLock", "check_unlocked", "lock_path"]

# A concurrent check_unlocked holds a shared lock for a few microseconds: retry briefly before
# concluding that another writer holds the log.
_ACQUIRE_ATTEMPTS = 5
_ACQUIRE_PAUSE_S = 0.02


class LogLockedError(LogError):
    """Another process holds the log's writer lock."""

    def __init__(self, db: str, lock: str, pid: int | None) -> None:
        who = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"{db}: the event log is in use by {who} (writer lock {lock})")
        self.db = db
        self.lock = lock
        self.pid = pid


def lock_path(db: str | Path) -> Path:
    """The lock file of the log at `db`: `<db>.lock`."""
    return Path(f"{db}.lock")


def _holder_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _try_flock(fd: int, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def check_unlocked(db: str | Path) -> None:
    """Raise LogLockedError when a writer holds the log at `db`; creates nothing."""
    path = lock_path(db)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    except OSError as e:
        raise LogError(f"{path}: cannot open the writer lock: {e.strerror}") from e
    try:
        if not _try_flock(fd, fcntl.LOCK_SH):
            raise LogLockedError(str(db), str(path), _holder_pid(fd))
    finally:
        os.close(fd)  # also drops the shared lock


class WriterLock:
    """A held writer lock; `release()` (or process exit) drops it."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def acquire(cls, db: str | Path) -> WriterLock:
        """Take the writer lock of the log at `db` (creating the lock file), or raise LogLockedError."""
        path = lock_path(db)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes
        except OSError as e:
            raise LogError(f"{path}: cannot create the writer lock: {e.strerror}") from e
        try:
            for attempt in range(_ACQUIRE_ATTEMPTS):
                if _try_flock(fd, fcntl.LOCK_EX):
                    break
                if attempt + 1 < _ACQUIRE_ATTEMPTS:
                    time.sleep(_ACQUIRE_PAUSE_S)
            else:
                raise LogLockedError(str(db), str(path), _holder_pid(fd))
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, path)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock (idempotent); the file stays, emptied."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
