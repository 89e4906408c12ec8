"""The dispatcher reads the log only when the writer committed a decision it forwards: commits
without one move its position on with no read; decisions already in the log at start are
forwarded first; every decision is forwarded once, in log order, with its outcome committed."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import anyio

from fumarole.daemon.runtime.dispatch import Dispatcher
from fumarole.daemon.runtime.writer import Writer
from fumarole.store.events import BindDecided, BindSucceeded, ClockAdvanced, CycleClosed, CycleOpened, Event
from fumarole.store.log import StoredEvent
from fumarole.store.memory import MemoryEventLog


class CountingLog(MemoryEventLog):
    """The in-memory log, counting the reads of the dispatcher's kind."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def read(
        self, from_seq: int = 1, limit: int = 1000, *, types: Collection[str] | None = None
    ) -> list[StoredEvent]:
        self.reads += 1
        return await super().read(from_seq, limit, types=types)


class Cluster:
    """A cluster that accepts every bind (the sink side of an adapter)."""

    def __init__(self) -> None:
        self.applied: list[tuple[int, str]] = []

    async def apply(self, seq: int, decision: Any) -> tuple[Any, list[Any]]:
        self.applied.append((seq, decision.name))
        return BindSucceeded(decision_seq=seq, namespace="ns", name=decision.name, node=decision.node), []


def _bind(name: str, cycle: int = 1) -> BindDecided:
    return BindDecided(
        cycle=cycle, namespace="ns", name=name, uid=f"u-{name}", node="n0", job="ns/j", queue="q"
    )


def _quiet(cycle: int) -> list[Event]:
    return [
        ClockAdvanced(at_ms=cycle * 1000),
        CycleOpened(cycle=cycle, watermark=0, now_ms=cycle * 1000, conf_hash="", trace_id=""),
        CycleClosed(cycle=cycle, binds=0, evictions=0, pipelined=0, jobs=0, tasks=0, pending_tasks=0),
    ]


async def _scenario(before: list[Event]) -> tuple[CountingLog, Cluster, list[int]]:
    log = CountingLog()
    if before:
        await log.append(before)
    folded: list[int] = []
    writer = Writer(log, lambda seq, _ev: folded.append(seq), await log.last_seq())
    cluster = Cluster()
    dispatcher = Dispatcher(log, writer, cluster)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        tg.start_soon(dispatcher.run)
        with anyio.fail_after(10):
            await dispatcher.wait_until(await log.last_seq())
            reads_at_start = log.reads
            for cycle in range(2, 12):  # ten cycles that decide nothing: no read at all
                seqs = await writer.submit(_quiet(cycle))
                await dispatcher.wait_until(seqs[-1])
            assert log.reads == reads_at_start
            seqs = await writer.submit([*_quiet(12), _bind("late-a", 12), _bind("late-b", 12)])
            await dispatcher.wait_until(seqs[-1])
            assert log.reads == reads_at_start + 1
            await dispatcher.wait_until(await log.last_seq())  # its own outcomes need no read
            assert log.reads == reads_at_start + 1
        await writer.close()
        tg.cancel_scope.cancel()
    return log, cluster, folded


def test_dispatch_reads_only_after_a_committed_decision() -> None:
    log, cluster, _ = anyio.run(_scenario, [])
    assert [name for _, name in cluster.applied] == ["late-a", "late-b"]
    outcomes = [r.event for r in anyio.run(log.read, 1, 1000) if isinstance(r.event, BindSucceeded)]
    assert [o.decision_seq for o in outcomes] == [seq for seq, _ in cluster.applied]


def test_dispatch_forwards_what_the_log_held_at_start_then_the_rest() -> None:
    before: list[Event] = [*_quiet(1), _bind("early-a"), _bind("early-b"), *_quiet(1)]
    log, cluster, _ = anyio.run(_scenario, before)
    assert [name for _, name in cluster.applied] == ["early-a", "early-b", "late-a", "late-b"]
    assert [seq for seq, _ in cluster.applied][:2] == [4, 5]
    checkpoint = anyio.run(log.checkpoint, "dispatcher")
    assert checkpoint == cluster.applied[-1][0]
