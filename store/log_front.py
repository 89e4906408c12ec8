"""The front every durable event log shares: argument checks and indexing of the three write
calls, the context manager, and the paged `read_range`.

`SqliteEventLog` (store/sqlite.py) and `PostgresEventLog` (store/postgres.py) differ in how a
write reaches the database (one writer thread fed by a queue; a pooled connection with retries)
and in how a page of rows is selected and decoded; what a caller sees of `append`,
`set_checkpoint`, `save_snapshot` and `read_range` is the same, and is written once here.  A
backend provides:

- `_write(rows, checkpoint, snapshot)`: commit the indexed rows, the consumer checkpoint and the
  snapshot (each optional) in one transaction; return the rows' seqs;
- `_check_writable()`: raise the backend's error when this log may not be written;
- `_select_rows(from_seq, to_seq, limit, types)`: raw rows in seq order, seq first;
- `_decode(row)`: one raw row as a `StoredEvent`;
- `close()`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Collection, Sequence
from typing import Any, Self

from fumarole.store.events import Event
from fumarole.store.index import IndexedRow, indexed_rows
from fumarole.store.log import (
    StoredEvent,
    check_append_args,
    check_checkpoint,
    check_read_args,
    check_snapshot_args,
)

__all__ = ["LogFront"]


class LogFront:
    """Mixed into a durable event log; see the module notes for what the backend provides."""

    async def _write(
        self,
        rows: list[IndexedRow],
        checkpoint: tuple[str, int] | None,
        snapshot: tuple[str, int, bytes] | None,
    ) -> list[int]:
        raise NotImplementedError

    def _check_writable(self) -> None:
        raise NotImplementedError

    async def _select_rows(
        self, from_seq: int, to_seq: int | None, limit: int, types: Collection[str] | None
    ) -> Sequence[Any]:
        raise NotImplementedError

    def _decode(self, row: Any) -> StoredEvent:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- writes ----------------------------------------------------------------------------------
    async def append(
        self,
        events: Sequence[Event],
        *,
        idem_keys: Sequence[str | None] | None = None,
        checkpoint: tuple[str, int] | None = None,
    ) -> list[int]:
        keys = check_append_args(len(events), idem_keys, checkpoint)
        rows = indexed_rows(events, keys)
        if not rows and checkpoint is None:
            self._check_writable()
            return []
        return await self._write(rows, checkpoint, None)

    async def set_checkpoint(self, consumer: str, seq: int) -> None:
        check_checkpoint(consumer, seq)
        await self._write([], (consumer, seq), None)

    async def save_snapshot(self, name: str, seq: int, data: bytes) -> None:
        check_snapshot_args(name, seq)
        await self._write([], None, (name, seq, bytes(data)))

    # -- reads -----------------------------------------------------------------------------------
    async def read_range(
        self, from_seq: int, to_seq: int, *, types: Collection[str] | None = None, batch: int = 10000
    ) -> AsyncGenerator[StoredEvent, None]:
        check_read_args(from_seq, batch)
        seq = from_seq
        while seq <= to_seq:
            page = await self._select_rows(seq, to_seq, batch, types)
            if not page:
                return
            for row in page:  # decoded one at a time: only what the consumer keeps stays alive
                yield self._decode(row)
            seq = int(page[-1][0]) + 1
