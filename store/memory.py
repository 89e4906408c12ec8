"""MemoryEventLog: the EventLog contract held in process memory (tests, simulations, benchmarks)."""

from __future__ import annotations

import bisect
from collections.abc import AsyncGenerator, Collection, Sequence

import anyio

from fumarole.store.codec import CodecError, decode, event_row
from fumarole.store.events import Event
from fumarole.store.log import (
    CorruptEventError,
    LogClosedError,
    StoredEvent,
    check_append_args,
    check_checkpoint,
    check_read_args,
)


class _Row:
    __slots__ = ("data", "idem_key", "type", "v")

    def __init__(self, type_: str, v: int, idem_key: str | None, data: bytes) -> None:
        self.type = type_
        self.v = v
        self.idem_key = idem_key
        self.data = data


class MemoryEventLog:
    """An EventLog in memory.

    Events are stored encoded (as the SQLite backend stores them) and decoded on read, so a
    caller cannot mutate what was appended and both backends fail the same way on bad data.
    Every write runs without awaiting, so it is atomic with respect to other tasks.
    """

    def __init__(self) -> None:
        self._rows: list[_Row] = []  # seq = index + 1
        self._keys: dict[str, int] = {}
        self._checkpoints: dict[str, int] = {}
        self._snapshots: dict[str, list[tuple[int, bytes]]] = {}
        self._changed: anyio.Event | None = None
        self._closed = False

    # -- writes -------------------------------------------------------------------------------
    async def append(
        self,
        events: Sequence[Event],
        *,
        idem_keys: Sequence[str | None] | None = None,
        checkpoint: tuple[str, int] | None = None,
    ) -> list[int]:
        self._check_open()
        keys = check_append_args(len(events), idem_keys, checkpoint)
        encoded = [event_row(e) for e in events]  # raises before anything is written
        seqs: list[int] = []
        fresh: dict[str, int] = {}
        new_rows: list[_Row] = []
        next_seq = len(self._rows) + 1
        for (tag, v, data), key in zip(encoded, keys, strict=True):
            if key is not None:
                old = self._keys.get(key, fresh.get(key))
                if old is not None:
                    seqs.append(old)
                    continue
                fresh[key] = next_seq
            new_rows.append(_Row(tag, v, key, data))
            seqs.append(next_seq)
            next_seq += 1
        self._rows.extend(new_rows)
        self._keys.update(fresh)
        if checkpoint is not None:
            self._checkpoints[checkpoint[0]] = checkpoint[1]
        if new_rows:
            self._notify()
        await anyio.lowlevel.checkpoint()
        return seqs

    async def set_checkpoint(self, consumer: str, seq: int) -> None:
        self._check_open()
        check_checkpoint(consumer, seq)
        self._checkpoints[consumer] = seq
        await anyio.lowlevel.checkpoint()

    async def save_snapshot(self, name: str, seq: int, data: bytes) -> None:
        self._check_open()
        if not name:
            raise ValueError("save_snapshot: the name must be a non-empty string")
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ValueError(f"save_snapshot: seq must be a non-negative integer, got {seq!r}")
        snaps = self._snapshots.setdefault(name, [])
        i = bisect.bisect_left(snaps, seq, key=lambda s: s[0])
        if i < len(snaps) and snaps[i][0] == seq:
            snaps[i] = (seq, bytes(data))
        else:
            snaps.insert(i, (seq, bytes(data)))
        await anyio.lowlevel.checkpoint()

    # -- reads --------------------------------------------------------------------------------
    async def read(
        self, from_seq: int = 1, limit: int = 1000, *, types: Collection[str] | None = None
    ) -> list[StoredEvent]:
        self._check_open()
        check_read_args(from_seq, limit)
        await anyio.lowlevel.checkpoint()
        return self._read(from_seq, None, limit, types)

    async def read_range(
        self, from_seq: int, to_seq: int, *, types: Collection[str] | None = None, batch: int = 10000
    ) -> AsyncGenerator[StoredEvent, None]:
        check_read_args(from_seq, batch)
        seq = max(from_seq, 1)
        while True:
            self._check_open()
            end = min(to_seq, len(self._rows), seq + batch - 1)
            if seq > end:
                return
            await anyio.lowlevel.checkpoint()
            for r in self._read(seq, end, batch, types):
                yield r
            seq = end + 1

    async def tail(
        self, from_seq: int, *, limit: int = 1000, timeout: float | None = None
    ) -> list[StoredEvent]:
        check_read_args(from_seq, limit)
        with anyio.move_on_after(timeout):
            while True:
                self._check_open()
                if self._changed is None:
                    self._changed = anyio.Event()
                changed = self._changed
                rows = self._read(from_seq, None, limit, None)
                if rows:
                    return rows
                await changed.wait()
        return []

    async def last_seq(self) -> int:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        return len(self._rows)

    async def checkpoint(self, consumer: str) -> int:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        return self._checkpoints.get(consumer, 0)

    async def latest_snapshot(
        self, name: str, *, at_or_before: int | None = None
    ) -> tuple[int, bytes] | None:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        snaps = self._snapshots.get(name, [])
        if at_or_before is not None:
            snaps = snaps[: bisect.bisect_right(snaps, at_or_before, key=lambda s: s[0])]
        return snaps[-1] if snaps else None

    async def close(self) -> None:
        self._closed = True
        self._notify()
        await anyio.lowlevel.checkpoint()

    # -- internals ----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError("the event log is closed")

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _read(
        self,
        from_seq: int,
        to_seq: int | None,
        limit: int,
        types: Collection[str] | None,
    ) -> list[StoredEvent]:
        wanted = None if types is None else frozenset(types)
        out: list[StoredEvent] = []
        end = len(self._rows) if to_seq is None else min(to_seq, len(self._rows))
        for seq in range(max(from_seq, 1), end + 1):
            row = self._rows[seq - 1]
            if wanted is not None and row.type not in wanted:
                continue
            out.append(_stored(seq, row))
            if len(out) >= limit:
                break
        return out


def _stored(seq: int, row: _Row) -> StoredEvent:
    try:
        ev = decode(row.type, row.v, row.data)
    except CodecError as e:
        raise CorruptEventError(seq, str(e)) from e
    return StoredEvent(seq=seq, type=row.type, event=ev, idem_key=row.idem_key)
