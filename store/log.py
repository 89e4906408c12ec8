"""The EventLog protocol every backend implements, the stored-row type and the log's errors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from contextvars import ContextVar
from typing import Protocol

import msgspec

from fumarole.store.events import Event

# How long a read may wait for a database that cannot be reached before it fails (seconds; None:
# the log's own setting).  The REST API sets a short one for its requests (a request answers 503
# during an outage instead of waiting for its end); the daemon's own reads wait it out.
READ_PATIENCE: ContextVar[float | None] = ContextVar("fumarole_read_patience", default=None)


class StoredEvent(msgspec.Struct, frozen=True):
    """One row of the log: its gap-free sequence number (from 1), tag, decoded event and idempotency key."""

    seq: int
    type: str
    event: Event
    idem_key: str | None = None


class LogError(Exception):
    """Base of every error the event log raises."""


class CorruptEventError(LogError):
    """A stored row cannot be decoded (bad bytes, unknown type, version newer than the code).

    The message is one line naming the seq and, when the backend knows it, the log (`where`: the
    SQLite file): `<where>: event log row seq=N cannot be decoded: <detail>`.
    """

    def __init__(self, seq: int, detail: str, where: str = "") -> None:
        head = f"{where}: event log row" if where else "event log: row"
        super().__init__(f"{head} seq={seq} cannot be decoded: {' '.join(detail.split())}")
        self.seq = seq
        self.detail = detail
        self.where = where


class LogClosedError(LogError):
    """The log was closed (or its writer stopped) before the operation could run."""


class FencedError(LogError):
    """The database refused a write of a leader whose term has ended (another replica leads now)."""


class EventLog(Protocol):
    """An append-only, gap-free, idempotent event log with consumer checkpoints and snapshots."""

    async def append(
        self,
        events: Sequence[Event],
        *,
        idem_keys: Sequence[str | None] | None = None,
        checkpoint: tuple[str, int] | None = None,
    ) -> list[int]:
        """Append atomically (one transaction); returns each event's seq.

        An event whose idem_key already exists (in the log or earlier in the same batch) is not
        written again and answers with the ORIGINAL seq.  `checkpoint=(consumer, seq)` is written
        in the same transaction (a consumer's outcomes and its new checkpoint commit together).
        """
        ...

    async def read(
        self, from_seq: int = 1, limit: int = 1000, *, types: Collection[str] | None = None
    ) -> list[StoredEvent]:
        """Events with seq >= from_seq in ascending order, at most `limit` (keyset paging)."""
        ...

    def read_range(
        self, from_seq: int, to_seq: int, *, types: Collection[str] | None = None, batch: int = 10000
    ) -> AsyncIterator[StoredEvent]:
        """Every event with from_seq <= seq <= to_seq in order, read `batch` rows at a time."""
        ...

    async def tail(
        self, from_seq: int, *, limit: int = 1000, timeout: float | None = None
    ) -> list[StoredEvent]:
        """Like read, but waits until at least one event with seq >= from_seq exists (or timeout -> [])."""
        ...

    async def last_seq(self) -> int:
        """The highest seq in the log; 0 when empty."""
        ...

    async def checkpoint(self, consumer: str) -> int:
        """The consumer's checkpoint; 0 when it has none."""
        ...

    async def set_checkpoint(self, consumer: str, seq: int) -> None:
        """Record the consumer's checkpoint (its own transaction)."""
        ...

    async def save_snapshot(self, name: str, seq: int, data: bytes) -> None:
        """Store the bytes of projection `name` as of log position `seq` (replaces one at the same seq)."""
        ...

    async def latest_snapshot(
        self, name: str, *, at_or_before: int | None = None
    ) -> tuple[int, bytes] | None:
        """The newest snapshot of `name` (with seq <= at_or_before when given) as (seq, data), or None."""
        ...

    async def close(self) -> None:
        """Finish pending writes and release resources; idempotent."""
        ...


def check_append_args(
    n: int, idem_keys: Sequence[str | None] | None, checkpoint: tuple[str, int] | None
) -> list[str | None]:
    """Validate append's arguments (shared by the backends); returns one key (or None) per event."""
    if idem_keys is None:
        keys: list[str | None] = [None] * n
    else:
        keys = list(idem_keys)
        if len(keys) != n:
            raise ValueError(f"append: {n} events but {len(keys)} idempotency keys")
        for k in keys:
            if k is not None and (not isinstance(k, str) or k == ""):
                raise ValueError(f"append: an idempotency key must be a non-empty string or None, got {k!r}")
    if checkpoint is not None:
        check_checkpoint(*checkpoint)
    return keys


def check_checkpoint(consumer: str, seq: int) -> None:
    """A checkpoint names a consumer (non-empty string) and a non-negative seq."""
    if not isinstance(consumer, str) or not consumer:
        raise ValueError(f"checkpoint: the consumer must be a non-empty string, got {consumer!r}")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise ValueError(f"checkpoint: seq must be a non-negative integer, got {seq!r}")


def check_snapshot_args(name: str, seq: int) -> None:
    """A snapshot has a non-empty name and a non-negative seq."""
    if not isinstance(name, str) or not name:
        raise ValueError("save_snapshot: the name must be a non-empty string")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise ValueError(f"save_snapshot: seq must be a non-negative integer, got {seq!r}")


def check_read_args(from_seq: int, limit: int) -> None:
    """from_seq and limit are integers; limit is at least 1."""
    if isinstance(from_seq, bool) or not isinstance(from_seq, int):
        raise ValueError(f"read: from_seq must be an integer, got {from_seq!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"read: limit must be a positive integer, got {limit!r}")
