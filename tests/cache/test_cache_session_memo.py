"""Reused sessions (daemon/runtime/session_memo.py): the daemon's cycles, some of which reuse the
last session's result on an unchanged snapshot, record exactly the decisions `fumarole replay`
recomputes by running every session afresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cache_incremental_freeze import _cluster, _pod
from test_cache_property import _all_events, any_op

from fumarole.daemon.cache import Projection
from fumarole.daemon.runtime.conf_watch import ConfWatcher
from fumarole.daemon.runtime.replay import replay
from fumarole.daemon.runtime.session_loop import CycleRunner, CycleSummary
from fumarole.daemon.runtime.writer import Writer
from fumarole.store.events import ClockAdvanced, CycleOpened, EvictDecided, PipelineDecided
from fumarole.store.memory import MemoryEventLog

SLA = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: sla
    arguments:
      sla-waiting-time: 3s
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


async def _run(
    chunks: list[list[Any]], cycles_after: list[int], conf: str | None
) -> tuple[MemoryEventLog, CycleRunner, list[CycleSummary]]:
    log = MemoryEventLog()
    projection = Projection()
    runner = CycleRunner(projection, ConfWatcher(conf))
    writer = Writer(log, projection.fold, 0)
    summaries: list[CycleSummary] = []
    clock = 1_000_000
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        for chunk, cycles in zip(chunks, cycles_after, strict=True):
            if chunk:
                await writer.submit(chunk)
            for _ in range(cycles):
                summaries.append(await runner.run_cycle(writer))
                clock += 1000  # virtual time passes between cycles (a neutral event)
                await writer.submit([ClockAdvanced(at_ms=clock)])
        await writer.close()
    return log, runner, summaries


async def _verified(chunks: list[list[Any]], cycles_after: list[int], conf: str | None) -> CycleRunner:
    log, runner, _ = await _run(chunks, cycles_after, conf)
    report = await replay(log)
    assert report.cycles and not report.different, report.different[0].difference
    return runner


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_op, min_size=1, max_size=30), st.data())
def test_cache_reused_sessions_record_what_fresh_sessions_decide(ops: list[Any], data: st.DataObject) -> None:
    events = [*_cluster(pods=4), *_all_events(ops)]
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(events)), min_size=1, max_size=4))))
    chunks = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True)]
    cycles_after = [data.draw(st.integers(1, 3)) for _ in chunks]
    anyio.run(_verified, chunks, cycles_after, None)


def test_cache_idle_cycles_reuse_the_last_session() -> None:
    events = [*_cluster(pods=6), _pod("w", "a", cpu="100")]  # w never fits: it stays pending
    runner = anyio.run(_verified, [events], [5], None)
    # Cycle 1 writes PodGroup statuses (folded: a new generation), cycle 2 runs on that; 3-5 reuse.
    assert runner.memo.reused == 3


def test_cache_a_new_pod_ends_reuse_and_is_placed() -> None:
    events = _cluster(pods=2)
    log, runner, summaries = anyio.run(_run, [events, [_pod("late", "a")]], [3, 2], None)
    assert runner.memo.reused == 1  # cycle 3 only: the new pod's generation runs afresh
    assert [s.binds for s in summaries] == [0, 0, 0, 1, 0]
    report = anyio.run(replay, log)
    assert len(report.cycles) == 5 and not report.different


def test_cache_a_session_that_reads_now_is_never_reused(tmp_path: Path) -> None:
    conf = tmp_path / "sla.yaml"
    conf.write_text(SLA)
    events = [*_cluster(pods=4), _pod("w", "a", cpu="100")]
    runner = anyio.run(_verified, [events], [4], str(conf))
    assert runner.memo.reused == 0


def test_cache_a_reused_result_repeats_its_pipelines() -> None:
    # "big" is being evicted (Releasing) from full n0, n1 is full: "next" fits only in n0's future
    # idle, so every session pipelines it again (PipelineDecided is neutral: the snapshot stays).
    events = [*_cluster(pods=0), _pod("big", "a", node="n0", cpu="8"), _pod("big1", "b", node="n1", cpu="8")]
    events.append(
        EvictDecided(
            cycle=0,
            namespace="ns",
            name="big",
            uid="u-big",
            node="n0",
            job="ns/a",
            queue="q",
            action="preempt",
            reason="x",
        )
    )
    events.append(_pod("next", "a", cpu="4"))
    log, runner, _ = anyio.run(_run, [events], [4], None)
    rows = anyio.run(log.read, 1, 10_000)
    per_cycle: dict[int, int] = {}
    cycle = 0
    for r in rows:
        if isinstance(r.event, CycleOpened):
            cycle = r.event.cycle
        elif isinstance(r.event, PipelineDecided):
            per_cycle[cycle] = per_cycle.get(cycle, 0) + 1
    assert per_cycle == {1: 1, 2: 1, 3: 1, 4: 1}
    assert runner.memo.reused >= 2
    report = anyio.run(replay, log)
    assert len(report.cycles) == 4 and not report.different
