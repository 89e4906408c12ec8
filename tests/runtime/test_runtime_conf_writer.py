"""Writer (log first, then fold, idempotent duplicates folded once) and configuration reload."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from fumarole.daemon.cache import Projection
from fumarole.daemon.runtime.conf_watch import ConfError, ConfWatcher, conf_hash
from fumarole.daemon.runtime.session_loop import CycleRunner
from fumarole.daemon.runtime.writer import Writer
from fumarole.store.events import ConfigurationRecorded, ConfigurationRejected, CycleOpened, NodeUpserted
from fumarole.store.memory import MemoryEventLog

GOOD = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: priority\n'
OTHER = 'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n'
BAD = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - nam: gang\n'


def _node(name: str) -> NodeUpserted:
    return NodeUpserted(
        name=name,
        manifest={
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4"}},
        },
        at_ms=1000,
    )


async def test_writer_appends_then_folds_and_skips_duplicates() -> None:
    log = MemoryEventLog()
    folded: list[int] = []
    writer = Writer(log, lambda seq, ev: folded.append(seq), 0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        a = await writer.submit([_node("n1"), _node("n2")], idem_keys=["k1", "k2"])
        b = await writer.submit([_node("n1")], idem_keys=["k1"])  # duplicate: original seq, no fold
        c = await writer.submit([], checkpoint=("consumer", 2))
        results = await _concurrent(writer)
        await writer.close()
    assert a == [1, 2] and b == [1] and c == []
    assert await log.checkpoint("consumer") == 2
    assert folded == [1, 2, *sorted(s for r in results for s in r)]
    assert writer.folded_seq == await log.last_seq() == 2 + len(results)


async def _concurrent(writer: Writer) -> list[list[int]]:
    out: list[list[int]] = []

    async def one(i: int) -> None:
        out.append(await writer.submit([_node(f"c{i}")]))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(one, i)
    return out


async def test_failed_append_reaches_the_caller_and_writes_nothing() -> None:
    log = MemoryEventLog()
    writer = Writer(log, lambda seq, ev: None, 0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        with pytest.raises(ValueError):
            await writer.submit([_node("x")], idem_keys=["k", "extra"])
        await writer.close()
    assert await log.last_seq() == 0


async def test_conf_reload_records_good_and_rejects_bad(tmp_path: Path) -> None:
    f = tmp_path / "sched.yaml"
    f.write_text(GOOD)
    log = MemoryEventLog()
    projection = Projection()
    watcher = ConfWatcher(str(f))
    runner = CycleRunner(projection, watcher)
    writer = Writer(log, projection.fold, 0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await writer.submit([_node("n1")])
        await runner.run_cycle(writer)
        f.write_text(BAD)
        await runner.run_cycle(writer)
        await runner.run_cycle(writer)  # the same bad content is reported once
        f.write_text(OTHER)
        await runner.run_cycle(writer)
        await writer.close()
    rows = await log.read(1, 1000)
    recorded = [r.event for r in rows if isinstance(r.event, ConfigurationRecorded)]
    rejected = [r.event for r in rows if isinstance(r.event, ConfigurationRejected)]
    opened = [r.event for r in rows if isinstance(r.event, CycleOpened)]
    assert [e.conf_hash for e in recorded] == [conf_hash(GOOD), conf_hash(OTHER)]
    assert recorded[0].text == GOOD
    assert len(rejected) == 1 and "sched.yaml" in rejected[0].error and "nam" in rejected[0].error
    # The last good configuration stays in force until a good one replaces it.
    assert [o.conf_hash for o in opened] == [conf_hash(GOOD)] * 3 + [conf_hash(OTHER)]
    # Each configuration is recorded before the cycle that uses it (inside its watermark).
    for o in opened:
        rec_seq = max(
            r.seq
            for r in rows
            if isinstance(r.event, ConfigurationRecorded) and r.event.conf_hash == o.conf_hash
        )
        assert rec_seq <= o.watermark


TYPO = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gangg\n  - name: priority\n'


def test_strict_watcher_refuses_a_warned_configuration_at_start_and_on_reload(tmp_path: Path) -> None:
    f = tmp_path / "sched.yaml"
    f.write_text(TYPO)
    with pytest.raises(ConfError, match=r"tiers\[0\]\.plugins\[0\]\.name: unknown plugin 'gangg'"):
        ConfWatcher(str(f), strict=True)
    assert ConfWatcher(str(f)).active.conf.warnings  # lenient: accepted with the warning
    f.write_text(GOOD)
    watcher = ConfWatcher(str(f), strict=True)
    assert [type(e) for e in watcher.poll()] == [ConfigurationRecorded]
    f.write_text(TYPO)
    events = watcher.poll()
    assert [type(e) for e in events] == [ConfigurationRejected]
    rejected = events[0]
    assert isinstance(rejected, ConfigurationRejected)
    assert "did you mean 'gang'?" in rejected.error and "strict" in rejected.error
    assert watcher.active.text == GOOD  # the last good configuration stays in force
