"""The single writer: every append goes through it, so the log is written first and the cache
folds the same events in sequence order right after the commit.

Callers `await writer.submit(events, ...)`; the request waits in a bounded stream (back
pressure), the writer task appends it (one transaction; checkpoint in the same transaction),
folds each newly written event into the projection, then answers with the sequence numbers.
Requests without a checkpoint that are queued together are merged into one append (group
commit).  An event answered with an older sequence (idempotent duplicate) is not folded again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from fumarole.store.events import Event
from fumarole.store.log import EventLog, FencedError

log = logging.getLogger("fumarole.writer")

MAX_GROUP_EVENTS = 20_000


@dataclass(slots=True)
class _Request:
    events: list[Event]
    idem_keys: list[str | None] | None
    checkpoint: tuple[str, int] | None
    done: anyio.Event = field(default_factory=anyio.Event)
    seqs: list[int] = field(default_factory=list)
    error: BaseException | None = None


class WriterClosedError(RuntimeError):
    """The writer has stopped; nothing more can be appended."""


class Writer:
    """Owns appends to the log and folds into the projection (`fold(seq, event)`)."""

    def __init__(
        self,
        event_log: EventLog,
        fold: Callable[[int, Event], None],
        folded_seq: int,
        *,
        queue_size: int = 64,
    ) -> None:
        self.log = event_log
        self._fold = fold
        self.folded_seq = folded_seq
        self.appended_events = 0
        self._send: MemoryObjectSendStream[_Request]
        self._recv: MemoryObjectReceiveStream[_Request]
        self._send, self._recv = anyio.create_memory_object_stream[_Request](queue_size)
        self._progress = anyio.Event()
        self._closed = False
        self.listeners: list[Callable[[int], None]] = []
        # Called with (seq, event) for each newly folded event, right after the projection folded it.
        self.event_listeners: list[Callable[[int, Event], None]] = []

    async def submit(
        self,
        events: Sequence[Event],
        *,
        idem_keys: Sequence[str | None] | None = None,
        checkpoint: tuple[str, int] | None = None,
    ) -> list[int]:
        """Append (durably) and fold; returns each event's sequence number."""
        if self._closed:
            raise WriterClosedError("the writer has stopped")
        if not events and checkpoint is None:
            return []
        req = _Request(list(events), list(idem_keys) if idem_keys is not None else None, checkpoint)
        await self._send.send(req)
        await req.done.wait()
        if req.error is not None:
            raise req.error
        return req.seqs

    async def wait_folded(self, seq: int) -> None:
        """Return once the projection includes every event up to `seq`."""
        while self.folded_seq < seq:
            ev = self._progress
            await ev.wait()

    async def run(self) -> None:
        """The writer task; ends when `close()` is called and the queue is empty."""
        async with self._recv:
            async for first in self._recv:
                group = [first]
                if first.checkpoint is None:
                    n = len(first.events)
                    while n < MAX_GROUP_EVENTS:
                        try:
                            nxt = self._recv.receive_nowait()
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                        group.append(nxt)
                        if nxt.checkpoint is not None:
                            break
                        n += len(nxt.events)
                await self._process(group)

    async def _process(self, group: list[_Request]) -> None:
        # Requests with a checkpoint are appended on their own (their checkpoint must commit with
        # exactly their events); the rest of the group is merged into one append.
        plain = [r for r in group if r.checkpoint is None]
        marked = [r for r in group if r.checkpoint is not None]
        if plain:
            await self._append(plain)
        for r in marked:
            await self._append([r])

    async def _append(self, reqs: list[_Request]) -> None:
        events: list[Event] = []
        keys: list[str | None] = []
        for r in reqs:
            events.extend(r.events)
            keys.extend(r.idem_keys if r.idem_keys is not None else [None] * len(r.events))
        checkpoint = reqs[0].checkpoint if len(reqs) == 1 else None
        try:
            with anyio.CancelScope(shield=True):
                seqs = await self.log.append(events, idem_keys=keys, checkpoint=checkpoint)
        except Exception as e:  # the log is unchanged: tell every caller
            # (a refused stale leader's append is reported once, by its step-down)
            log.log(logging.DEBUG if isinstance(e, FencedError) else logging.ERROR, "append failed: %s", e)
            for r in reqs:
                r.error = e
                r.done.set()
            return
        self.appended_events += len(events)
        for seq, ev in zip(seqs, events, strict=True):
            if seq > self.folded_seq:
                self._fold(seq, ev)
                self.folded_seq = seq
                for listener in self.event_listeners:
                    listener(seq, ev)
        i = 0
        for r in reqs:
            r.seqs = seqs[i : i + len(r.events)]
            i += len(r.events)
            r.done.set()
        for fn in self.listeners:
            fn(self.folded_seq)
        prev, self._progress = self._progress, anyio.Event()
        prev.set()

    async def close(self) -> None:
        """Stop accepting requests; `run` drains what is queued and returns."""
        self._closed = True
        await self._send.aclose()
