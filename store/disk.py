"""The SQLite log's file system: writable and with room before a writer starts, a read-only disk
for readers, and a failed write's cause (a full disk, the file-size limit) in words naming the file.

`check_writable(db)` runs before a writer does any work: the data directory must accept new files
(SQLite's `-wal` and `-shm` beside the log), the log and its companions must be writable, the file
system must have some room and the process's file-size limit (RLIMIT_FSIZE, `ulimit -f`) must be
above the log's size.  `os.access` asks the kernel, so a read-only mount or an immutable file
(`chattr +i`) is refused for root as well; permission bits that root overrides are not.

`readonly_uri(db)` is the URI readers open: `mode=ro`, plus `immutable=1` when the directory
cannot be written and no `-wal` file is there (a log on a read-only disk, or copied to one: no
writer can be at work, and SQLite could not create the `-shm` file a WAL reader otherwise needs).

`write_failure(path, e)` is the one-line message of a failed SQLite write: SQLite reports a full
disk as SQLITE_FULL and a write past the file-size limit (EFBIG) as a bare I/O error, so the
file system's free space and the limit are looked at to say which.
"""

from __future__ import annotations

import os
import resource
import sqlite3
from pathlib import Path

from fumarole.store.log import LogError

__all__ = ["MIN_FREE_BYTES", "check_writable", "readonly_uri", "write_failure"]

MIN_FREE_BYTES = 64 << 10
"""Below this much free space (for this user) the file system counts as full at start."""

_COMPANIONS = ("-wal", "-shm")


def _files(db: Path) -> list[Path]:
    return [db, *(Path(f"{db}{s}") for s in _COMPANIONS)]


def check_writable(db: str | Path) -> None:
    """Raise LogError (one line naming the file) unless a writer can work on the log at `db`."""
    path = Path(db)
    d = path.parent
    if not os.access(d, os.W_OK | os.X_OK):
        raise LogError(
            f"{d}: the data directory is not writable ({_why_not(d)}); the event log writes its files there"
        )
    for f in _files(path):
        if f.exists() and not os.access(f, os.R_OK | os.W_OK):
            raise LogError(f"{f}: the event log file is not writable ({_why_not(f)})")
    free = _free_bytes(d)
    if free is not None and free < MIN_FREE_BYTES:
        raise LogError(f"{d}: the disk is full ({free} bytes free); the event log cannot grow")
    limit = _size_limit()
    if limit is not None:
        size = max((f.stat().st_size for f in _files(path) if f.exists()), default=0)
        if size >= limit:
            raise LogError(
                f"{path}: the file-size limit (ulimit -f: {limit} bytes) does not exceed the log's size "
                f"({size} bytes); the event log cannot grow"
            )


def readonly_uri(db: str | Path) -> str:
    """The SQLite URI a reader opens the log at `db` with (see the module notes)."""
    path = Path(db).resolve()
    uri = f"{path.as_uri()}?mode=ro"
    if not os.access(path.parent, os.W_OK) and not Path(f"{path}-wal").exists():
        uri += "&immutable=1"
    return uri


def write_failure(path: str, e: BaseException) -> str:
    """One line: why a write to the log at `path` failed (a full disk, the file-size limit, …)."""
    detail = " ".join(str(e).split())
    name = getattr(e, "sqlite_errorname", None)
    if isinstance(e, OSError) and e.strerror:
        detail = e.strerror
    elif name:
        detail = f"{detail} ({name})"
    d = Path(path).parent
    free = _free_bytes(d)
    limit = _size_limit()
    files = [f for f in _files(Path(path)) if f.exists()]
    size = max((f.stat().st_size for f in files), default=0)
    if free is not None and free < MIN_FREE_BYTES:
        cause = f"the disk is full ({free} bytes free in {d})"
    elif limit is not None and size + (1 << 16) >= limit:  # a write of up to a few pages crossed it
        cause = f"the file-size limit is reached (ulimit -f: {limit} bytes)"
    elif _is_full(e):
        cause = "the disk is full"
    elif isinstance(e, sqlite3.OperationalError) and "readonly" in str(e):
        cause = "the file cannot be written (a read-only disk or file)"
    else:
        return f"{path}: write failed, nothing of it was written: {detail}"
    return f"{path}: write failed, nothing of it was written: {cause}: {detail}"


def _is_full(e: BaseException) -> bool:
    import errno

    if isinstance(e, OSError):
        return e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
    return getattr(e, "sqlite_errorname", "") == "SQLITE_FULL"


def _why_not(p: Path) -> str:
    """The kernel's reason a write to `p` would fail (a read-only file system, permission)."""
    try:
        st = os.statvfs(p)
    except OSError as e:
        return e.strerror or str(e)
    if st.f_flag & os.ST_RDONLY:
        return "read-only file system"
    return "permission denied (or an immutable file)"


def _free_bytes(d: Path) -> int | None:
    try:
        st = os.statvfs(d)
    except OSError:
        return None
    return int(st.f_bavail * st.f_frsize)


def _size_limit() -> int | None:
    soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else int(soft)
