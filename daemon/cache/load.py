"""Projection <-> event log: rebuild from the newest snapshot plus the tail, save snapshots."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import anyio.to_thread

from fumarole.daemon.cache.projection import Projection
from fumarole.daemon.cache.snapshot_codec import (
    SnapshotFormatError,
    decode_projection,
    encode_parts,
    snapshot_parts,
)
from fumarole.daemon.cache.state import DEFAULT_SCHEDULER_NAMES
from fumarole.daemon.scheduler.model.queue import DEFAULT_QUEUE
from fumarole.store.log import EventLog

__all__ = ["SNAPSHOT_NAME", "fold_log", "load", "load_projection", "save", "save_projection"]

SNAPSHOT_NAME = "cache"


async def fold_log(log: EventLog, p: Projection, *, to_seq: int | None = None, batch: int = 10000) -> None:
    """Fold every event after `p.seq` (up to `to_seq`, default the end of the log) into `p`."""
    last = await log.last_seq() if to_seq is None else to_seq
    if last <= p.seq:
        return
    fold = p.fold
    async for row in log.read_range(p.seq + 1, last, batch=batch):
        fold(row.seq, row.event)


async def load(
    log: EventLog,
    *,
    to_seq: int | None = None,
    use_snapshot: bool = True,
    scheduler_names: Iterable[str] = DEFAULT_SCHEDULER_NAMES,
    default_queue: str = DEFAULT_QUEUE,
) -> Projection:
    """The projection at `to_seq` (default: the end): newest usable snapshot at or before it + the tail.

    A snapshot written by another format, or for other scheduler names / default queue, is
    ignored and the log is folded from the start.  Raises the log's CorruptEventError as is.
    """
    names = tuple(scheduler_names)
    p: Projection | None = None
    if use_snapshot:
        snap = await log.latest_snapshot(SNAPSHOT_NAME, at_or_before=to_seq)
        if snap is not None:
            try:
                p = decode_projection(snap[1])
            except SnapshotFormatError as e:  # another format, or damaged bytes: the log rebuilds it
                logging.getLogger("fumarole.cache").warning(
                    "snapshot at seq %d not used (%s); folding the log from the start", snap[0], e
                )
                p = None
            if p is not None and (p.scheduler_names != names or p.default_queue != default_queue):
                p = None
            if p is not None and p.seq != snap[0]:
                p = None
    if p is None:
        p = Projection(scheduler_names=names, default_queue=default_queue)
    await fold_log(log, p, to_seq=to_seq)
    return p


async def save(log: EventLog, p: Projection) -> int:
    """Save the projection's state as the "cache" snapshot at its seq; returns that seq.

    The state is taken at once; encoding it (pickling the parse caches: ~2 s of CPU at 100k
    pods) runs in a worker thread, so the event loop keeps serving and folding meanwhile.
    """
    seq = p.seq
    parts = snapshot_parts(p)
    data = await anyio.to_thread.run_sync(encode_parts, parts)
    await log.save_snapshot(SNAPSHOT_NAME, seq, data)
    return seq


load_projection = load
save_projection = save
