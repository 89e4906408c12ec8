"""The dispatcher: tails decision events from its checkpoint and hands binds/evictions to the sink.

For each batch it reads, the dispatcher applies every BindDecided / EvictDecided in log order,
then appends the sink's outcomes and the facts the cluster reported back together with its new
checkpoint, in one transaction.  After a crash the decisions past the checkpoint are forwarded
again; sinks are idempotent (a second bind of a bound pod, an evict of a gone pod, are no-ops).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio

from store.events import BindDecided, BindFailed, Event, EvictDecided, EvictFailed

if TYPE_CHECKING:
    from daemon.adapters.base import ClusterSink
    from daemon.runtime.writer import Writer
    from store.log import EventLog, StoredEvent

log = logging.getLogger("fumarole.dispatch")

CONSUMER = "dispatcher"


class Dispatcher:
    def __init__(self, event_log: EventLog, writer: Writer, sink: ClusterSink, *, batch: int = 2000) -> None:
        self.log = event_log
        self.writer = writer
        self.sink = sink
        self.batch = batch
        self.position = 0  # last log seq handled (checkpoint)
        self.forwarded = 0
        self.failed = 0
        self._progress = anyio.Event()

    async def start_position(self) -> int:
        self.position = await self.log.checkpoint(CONSUMER)
        return self.position

    async def wait_until(self, seq: int) -> None:
        """Return once every decision up to `seq` has been forwarded and its outcome committed."""
        while self.position < seq:
            await self._progress.wait()

    async def run(self) -> None:
        await self.start_position()
        while True:
            rows = await self.log.tail(self.position + 1, limit=self.batch, timeout=0.5)
            if not rows:
                continue
            await self.handle(rows)

    async def handle(self, rows: list[StoredEvent]) -> None:
        t0 = time.perf_counter()
        out: list[Event] = []
        for row in rows:
            ev = row.event
            if isinstance(ev, (BindDecided, EvictDecided)):
                outcome, observed = await self.sink.apply(row.seq, ev)
                out.append(outcome)
                out.extend(observed)
                self.forwarded += 1
                if isinstance(outcome, BindFailed | EvictFailed):
                    self.failed += 1
                    log.warning("%s failed: %s", row.type, outcome.reason)
        last = rows[-1].seq
        # Only a batch that forwarded something writes its checkpoint (with the outcomes); rows
        # without decisions are simply passed over (re-reading them after a restart is harmless).
        if out:
            with anyio.CancelScope(shield=True):
                await self.writer.submit(out, checkpoint=(CONSUMER, last))
        self.position = last
        if out and log.isEnabledFor(logging.DEBUG):
            log.debug(
                "dispatched", extra={"events": len(out), "dispatch_s": round(time.perf_counter() - t0, 6)}
            )
        prev, self._progress = self._progress, anyio.Event()
        prev.set()
