"""The dispatcher: tails decision events from its checkpoint and hands binds/evictions to the sink.

For each batch it reads, the dispatcher applies every BindDecided / EvictDecided in log order,
then appends the sink's outcomes and the facts the cluster reported back together with its new
checkpoint, in one transaction.  After a crash the decisions past the checkpoint are forwarded
again; sinks are idempotent (a second bind of a bound pod, an evict of a gone pod, are no-ops).

With `concurrency` > 1 (a live cluster's sink, whose calls wait on the network) up to that many
decisions of a batch are in flight at once; their outcomes are still appended in log order.  A
sink with a `report(seq, event)` method is also handed the batch's PodGroup status changes, job
explanations and queue figures (after its binds and evictions), to write to the cluster; those
have no outcome.
The simulator's sink has neither: it is called one decision at a time, in log order.

What to read, and when: the dispatcher reads only the event types it handles (binds and
evictions, and the reported ones for a reporting sink), and only when the writer has committed
one.  It listens to the writer (every append of this process goes through it): a commit without
such an event just moves `position` on, with no read of the log (a cycle's clock advance, its
cycle markers and explanations, the outcomes themselves).  At start it reads from its checkpoint
to the end of the log whatever is there.  Reading every committed row after every commit (as it
did) cost a query and the decoding of every row of the log, in the database's thread while the
next session ran (~1.5 ms a cycle at 2,000 nodes, the two contending for the interpreter).

A pipelined sink (`PipelinedSink`: the Kubernetes adapter) is not handed batches: every row it
handles is admitted in log order and runs as its own task as soon as it is read (up to `window`
rows at once; the sink's own flow control decides how many API calls that makes), so a bind never
waits for a slower call of the same batch.  Outcomes are appended as they come, grouped into one
transaction every `commit_interval` seconds (or every 1,000), each with the idempotency key
`dispatch:<decision seq>`; the checkpoint that goes with them is the highest seq up to which
every handled row is done (outcome known, report written).  After a crash the rows past the
checkpoint are handed over again: a decision whose outcome was already appended gets the same
outcome again (the sink is idempotent) and the key keeps the log from holding it twice.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import anyio

from fumarole.daemon.adapters.base import PipelinedSink, ReportingSink
from fumarole.store.events import (
    EVENT_TYPES,
    BindDecided,
    BindFailed,
    Event,
    EvictDecided,
    EvictFailed,
    JobExplained,
    OutcomeEvent,
    PodGroupStatusChanged,
    QueueFiguresRecorded,
)

if TYPE_CHECKING:
    from fumarole.daemon.adapters.base import ClusterSink
    from fumarole.daemon.runtime.writer import Writer
    from fumarole.store.log import EventLog, StoredEvent

log = logging.getLogger("fumarole.dispatch")

CONSUMER = "dispatcher"
REPORTED = (PodGroupStatusChanged, JobExplained, QueueFiguresRecorded)


class Dispatcher:
    def __init__(
        self,
        event_log: EventLog,
        writer: Writer,
        sink: ClusterSink,
        *,
        batch: int = 2000,
        concurrency: int = 1,
        window: int = 8192,
        commit_interval: float = 0.05,
    ) -> None:
        self.log = event_log
        self.writer = writer
        self.sink = sink
        self.batch = batch
        self.concurrency = max(1, concurrency)
        self.position = 0  # last log seq handled (checkpoint)
        self.forwarded = 0
        self.failed = 0
        self.superseded = 0  # not acted on: another replica led since (leader election; not failures)
        self._progress = anyio.Event()
        handled: tuple[type, ...] = (BindDecided, EvictDecided)
        if isinstance(sink, ReportingSink):
            handled += REPORTED
        self._handled = handled
        self._types = tuple(sorted(tag for tag, cls in EVENT_TYPES.items() if cls in handled))
        # Told by the writer: the last seq committed, and the last committed event of a handled type.
        self._committed = 0
        self._due = 0
        self._wake = anyio.Event()
        writer.event_listeners.append(self._note)
        writer.listeners.append(self._appended)
        # Pipelined mode (see the module notes).
        self.window = window
        self.commit_interval = commit_interval
        self._running: set[int] = set()  # seqs handed over and not yet done
        self._read_upto = 0  # every handled row up to here has been handed over
        self._done: list[Event] = []  # outcomes not yet appended
        self._done_keys: list[str | None] = []
        self._finished = anyio.Event()

    def _note(self, seq: int, event: Event) -> None:
        if isinstance(event, self._handled):
            self._due = seq

    def _appended(self, folded_seq: int) -> None:
        self._committed = folded_seq
        self._wake.set()

    async def start_position(self) -> int:
        self.position = await self.log.checkpoint(CONSUMER)
        return self.position

    async def wait_until(self, seq: int) -> None:
        """Return once every decision up to `seq` has been forwarded and its outcome committed."""
        while self.position < seq:
            await self._progress.wait()

    async def run(self) -> None:
        if isinstance(self.sink, PipelinedSink):
            await self._run_pipelined(self.sink)
            return
        await self.start_position()
        # Whatever the log holds past the checkpoint may be due (written before this process).
        last = await self.log.last_seq()
        self._committed = max(self._committed, last)
        self._due = max(self._due, last)
        while True:
            if self._due > self.position:
                upto = self._due
                rows = await self.log.read(self.position + 1, self.batch, types=self._types)
                if rows:
                    await self.handle(rows)
                # Every handled event up to `upto` (and up to the last row, all that existed) is done.
                if len(rows) < self.batch:
                    self._advance(max(upto, self.position))
                continue
            if self._committed > self.position:
                self._advance(self._committed)
                continue
            self._wake = anyio.Event()
            if self._committed > self.position or self._due > self.position:
                continue
            await self._wake.wait()

    def _count(self, ev: BindDecided | EvictDecided, outcome: OutcomeEvent) -> None:
        """Count a forwarded decision; a failure is a warning, a superseded one (not acted on:
        another replica led since) an info line and no failure."""
        self.forwarded += 1
        if isinstance(outcome, BindFailed | EvictFailed) and outcome.superseded:
            self.superseded += 1
            log.info("%s of %s/%s: %s", _kind(ev), ev.namespace, ev.name, outcome.reason)
        elif isinstance(outcome, BindFailed | EvictFailed):
            self.failed += 1
            log.warning("%s failed: %s", _kind(ev), outcome.reason)

    def _advance(self, seq: int) -> None:
        if seq > self.position:
            self.position = seq
            prev, self._progress = self._progress, anyio.Event()
            prev.set()

    async def handle(self, rows: list[StoredEvent]) -> None:
        t0 = time.perf_counter()
        decisions = [
            (row.seq, row.event) for row in rows if isinstance(row.event, (BindDecided, EvictDecided))
        ]
        results: list[tuple[OutcomeEvent, list[Event]]] = []
        if self.concurrency == 1:
            for seq, ev in decisions:
                outcome, observed = await self.sink.apply(seq, ev)
                results.append((outcome, list(observed)))
        else:
            results = await self._apply_concurrently(decisions)
        out: list[Event] = []
        for (_seq, ev), (outcome, facts) in zip(decisions, results, strict=True):
            out.append(outcome)
            out.extend(facts)
            self._count(ev, outcome)
        report = self.sink.report if isinstance(self.sink, ReportingSink) else None
        if report is not None:
            await self._report(
                report, [(row.seq, row.event) for row in rows if isinstance(row.event, REPORTED)]
            )
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

    async def _apply_concurrently(
        self, decisions: list[tuple[int, BindDecided | EvictDecided]]
    ) -> list[tuple[OutcomeEvent, list[Event]]]:
        results: list[tuple[OutcomeEvent, list[Event]] | None] = [None] * len(decisions)
        limiter = anyio.CapacityLimiter(self.concurrency)

        async def one(i: int, seq: int, ev: BindDecided | EvictDecided) -> None:
            async with limiter:
                outcome, observed = await self.sink.apply(seq, ev)
                results[i] = (outcome, list(observed))

        async with anyio.create_task_group() as tg:
            for i, (seq, ev) in enumerate(decisions):
                tg.start_soon(one, i, seq, ev)
        return [r for r in results if r is not None]

    async def _report(self, report: Any, events: list[tuple[int, Event]]) -> None:
        if not events:
            return
        limiter = anyio.CapacityLimiter(self.concurrency)

        async def one(seq: int, ev: Event) -> None:
            async with limiter:
                try:
                    await report(seq, ev)
                except Exception as e:  # best effort: a report never stops the dispatcher
                    log.warning("report of %s (seq %d) failed: %s", type(ev).__name__, seq, e)

        async with anyio.create_task_group() as tg:
            for seq, ev in events:
                tg.start_soon(one, seq, ev)

    # ------------------------------------------------------------------ pipelined mode
    async def _run_pipelined(self, sink: PipelinedSink) -> None:
        await self.start_position()
        self._read_upto = self.position
        last = await self.log.last_seq()
        self._committed = max(self._committed, last)
        self._due = max(self._due, last)
        slots = anyio.Semaphore(self.window)
        async with anyio.create_task_group() as tg:
            tg.start_soon(sink.run)
            tg.start_soon(self._commit_loop)
            while True:
                if self._due > self._read_upto:
                    upto = self._due
                    rows = await self.log.read(self._read_upto + 1, self.batch, types=self._types)
                    for row in rows:
                        await slots.acquire()
                        self._running.add(row.seq)
                        sink.admit(row.seq, row.event)
                        tg.start_soon(self._one, sink, row.seq, row.event, slots)
                        self._read_upto = row.seq
                    if len(rows) < self.batch:
                        self._read_upto = max(self._read_upto, upto)
                    continue
                if self._committed > self._read_upto:
                    self._read_upto = self._committed
                    self._finished.set()
                    continue
                self._wake = anyio.Event()
                if self._committed > self._read_upto or self._due > self._read_upto:
                    continue
                await self._wake.wait()

    async def _one(self, sink: PipelinedSink, seq: int, event: Event, slots: anyio.Semaphore) -> None:
        try:
            if isinstance(event, BindDecided | EvictDecided):
                outcome, facts = await sink.apply(seq, event)
                self._done.append(outcome)
                self._done_keys.append(f"dispatch:{seq}")
                for fact in facts:
                    self._done.append(fact)
                    self._done_keys.append(None)
                self._count(event, outcome)
            else:
                try:
                    await sink.report(seq, event)
                except Exception as e:  # best effort: a report never stops the dispatcher
                    log.warning("report of %s (seq %d) failed: %s", type(event).__name__, seq, e)
        finally:
            self._running.discard(seq)
            slots.release()
            self._finished.set()

    def _frontier(self) -> int:
        """The highest seq up to which every handled row is done."""
        return min(self._running) - 1 if self._running else self._read_upto

    async def _commit_loop(self) -> None:
        """Append finished outcomes with the checkpoint they allow (see the module notes)."""
        while True:
            await self._finished.wait()
            self._finished = anyio.Event()
            if len(self._done) < 1000:
                await anyio.sleep(self.commit_interval)
            events, keys = self._done, self._done_keys
            self._done, self._done_keys = [], []
            frontier = self._frontier()
            if events:
                with anyio.CancelScope(shield=True):
                    await self.writer.submit(events, idem_keys=keys, checkpoint=(CONSUMER, frontier))
            elif frontier > self.position and self._due > self.position:
                # Reports only: move the checkpoint on (rows of other types need no checkpoint).
                with anyio.CancelScope(shield=True):
                    await self.writer.submit([], checkpoint=(CONSUMER, frontier))
            self._advance(frontier)


def _kind(ev: BindDecided | EvictDecided) -> str:
    return "decision.bind" if isinstance(ev, BindDecided) else "decision.evict"
