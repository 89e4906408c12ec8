"""This replica's Lease holder identity: the same across its restarts, never shared by two processes.

The identity is `HOSTNAME_<id>`: `HOSTNAME` (a Deployment's pod name, else the host's name) and an
id kept in `<data_dir>/lease-identity`, created on the first start.  The process holds an
exclusive flock(2) on that file for as long as it runs (the kernel drops it when the process ends,
kill -9 included), so two live processes never claim the same file; a second one (two replicas
sharing a data directory, as PostgreSQL replicas may) gets a fresh random id instead, and says so.

Why it matters (leader.py): a Lease held by the identity read from an unlocked file was held by
a process that used this data directory on this host and is gone, i.e. this replica's previous
life; the restarted replica renews that Lease at once instead of waiting it out, and acts on the
decisions its previous life committed but had not forwarded.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("fumarole.kubernetes.leader")

IDENTITY_FILE = "lease-identity"
_ID = re.compile(r"^[0-9a-f]{16}$")


def host_name() -> str:
    """The pod's name in a cluster (`HOSTNAME`), else the host's name."""
    return os.environ.get("HOSTNAME") or socket.gethostname()


def random_identity(host: str | None = None) -> str:
    return f"{host or host_name()}_{uuid.uuid4().hex[:16]}"


@dataclass(slots=True)
class ClaimedIdentity:
    """An identity and whether it is this data directory's stable one (its flock held until release)."""

    identity: str
    stable: bool
    _fd: int | None = field(default=None, repr=False)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # drops the flock


def claim_identity(data_dir: str | Path, *, host: str | None = None) -> ClaimedIdentity:
    """The stable identity kept in `data_dir` (created if need be), or a random one when the file is
    held by another live process or cannot be written (a warning says why)."""
    host = host or host_name()
    path = Path(data_dir) / IDENTITY_FILE
    try:
        Path(data_dir).mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # O_CLOEXEC: not inherited
    except OSError as e:
        return _unstable(path, str(e.strerror), host)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        return _unstable(path, "held by another process sharing this data directory", host)
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        if not _ID.match(text):
            text = uuid.uuid4().hex[:16]
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{text}\n".encode(), 0)
            os.fsync(fd)
    except OSError as e:
        os.close(fd)
        return _unstable(path, str(e.strerror), host)
    return ClaimedIdentity(f"{host}_{text}", stable=True, _fd=fd)


def _unstable(path: Path, why: str, host: str) -> ClaimedIdentity:
    identity = random_identity(host)
    log.warning("lease identity %s: %s; using %s (not stable across restarts)", path, why, identity)
    return ClaimedIdentity(identity, stable=False)
