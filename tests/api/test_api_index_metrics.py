"""The decision index (written with the append, backfilled once, bound parameters) and the metrics fold."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest

from fumarole.api.metrics import SchedulerMetrics, exponential_buckets_range
from fumarole.store.events import (
    BindDecided,
    CycleClosed,
    CycleOpened,
    EvictDecided,
    JobExplained,
    NodeUpserted,
    PendingReason,
    PodGroupStatusChanged,
    QueueFigures,
    QueueFiguresRecorded,
)
from fumarole.store.index import backfill_index, decision_query, explained_codes, index_fields
from fumarole.store.sqlite import SqliteEventLog


def _bind(i: int, cycle: int = 1, job: str = "ns/j", queue: str = "q") -> BindDecided:
    return BindDecided(
        cycle=cycle, namespace="ns", name=f"p{i}", uid=f"u{i}", node=f"n{i % 2}", job=job, queue=queue
    )


def _rows(db: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT * FROM decision_index ORDER BY seq").fetchall()
    finally:
        conn.close()


async def test_index_rows_are_written_with_the_events(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    log = await SqliteEventLog.open(db)
    try:
        seqs = await log.append(
            [
                NodeUpserted(name="n0", manifest={}),
                CycleOpened(cycle=1, watermark=1, now_ms=0, conf_hash="h"),
                _bind(0),
                _bind(1, job="ns/k"),
                CycleClosed(cycle=1),
            ],
            idem_keys=["node", None, None, None, None],
        )
        assert await log.append([NodeUpserted(name="n0", manifest={})], idem_keys=["node"]) == [1]
        rows = _rows(db)
        assert [r[0] for r in rows] == seqs[1:]  # the node (an observed event) is not indexed
        assert rows[1] == (3, 1, "decision.bind", "ns/j", "ns", "p0", "q", "n0", None)
        assert rows[0][3:] == (None, None, None, None, None, None)
        by_job = await log.read_decisions(job="ns/k")
        assert [r.seq for r in by_job] == [4]
        by_pod = await log.read_decisions(namespace="ns", pod="p0")
        assert [r.event for r in by_pod] == [_bind(0)]
        assert [r.seq for r in await log.read_decisions(cycle=1, types=("cycle.closed",))] == [5]
        assert [r.seq for r in await log.read_decisions(cycle=1, since=4, limit=1)] == [4]
        # values are bound parameters: a quote is just a character
        assert await log.read_decisions(job="x' OR '1'='1") == []
    finally:
        await log.close()


async def test_backfill_indexes_decisions_written_before_the_index(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    log = await SqliteEventLog.open(db)
    await log.append(
        [CycleOpened(cycle=1, watermark=0, now_ms=0, conf_hash="h"), _bind(0), _bind(1), CycleClosed(cycle=1)]
    )
    await log.close()
    expected = _rows(db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DELETE FROM decision_index")
    conn.execute("UPDATE decision_index_state SET backfilled = 0")
    assert backfill_index(conn) == 4
    assert backfill_index(conn) == 0  # once
    conn.close()
    assert _rows(db) == expected
    # opening the log (migrate) runs the backfill too
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DELETE FROM decision_index")
    conn.execute("UPDATE decision_index_state SET backfilled = 0")
    conn.close()
    log = await SqliteEventLog.open(db)
    await log.close()
    assert _rows(db) == expected


def test_index_fields_and_query_shapes() -> None:
    assert index_fields(NodeUpserted(name="n", manifest={})) is None
    ex = JobExplained(cycle=3, namespace="a", name="b", queue="q", message="m")
    assert index_fields(ex) == (3, "decision.job_explained", "a/b", "a", None, "q", None, "+")
    reasons = (
        PendingReason(code="gang-unsatisfied", message="x"),
        PendingReason(code="pipelined", message="y"),
    )
    waits = msgspec.structs.replace(ex, reasons=reasons)
    assert index_fields(waits)[-1] == "+gang-unsatisfied,pipelined"  # type: ignore[index]
    assert explained_codes("+gang-unsatisfied,pipelined") == ("gang-unsatisfied", "pipelined")
    gone = msgspec.structs.replace(ex, message="")
    assert index_fields(gone)[-1] == "-" and explained_codes("-") is None  # type: ignore[index]
    assert explained_codes("+") == ()  # waiting, no reason classified
    status = PodGroupStatusChanged(cycle=3, namespace="a", name="b", phase="Running")
    assert index_fields(status) == (3, "decision.podgroup_status", "a/b", "a", None, None, None, "Running")
    sql, params = decision_query(job="a/b", node="n1", since=5, limit=10, types=("decision.bind",))
    assert "?" in sql and "a/b" not in sql and params == [5, "a/b", "n1", "decision.bind", 10]
    with pytest.raises(ValueError):
        decision_query(bogus="x")


def _text(m: SchedulerMetrics) -> str:
    return m.render()[0].decode()


def test_metrics_fold_cycles_explanations_evictions_and_queues() -> None:
    m = SchedulerMetrics()
    ev = EvictDecided(
        cycle=1,
        namespace="ns",
        name="v",
        uid="u",
        node="n",
        job="ns/j",
        queue="q",
        action="preempt",
        reason="r",
    )
    m.observe(1, ev)
    m.observe(2, EvictDecided(**{**{f: getattr(ev, f) for f in ev.__struct_fields__}, "name": "w"}))
    m.observe(
        3,
        JobExplained(
            cycle=1, namespace="ns", name="j", queue="q", message="m", pods={"ns/a": "x", "ns/b": "y"}
        ),
    )
    figures = QueueFigures(
        weight=2,
        deserved={"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "2"},
        allocated={"cpu": "2"},
        share=1.25,
    )
    m.observe(4, QueueFiguresRecorded(cycle=1, queues={"q": figures}))
    m.observe(
        5, CycleClosed(cycle=1, binds=3, pending_tasks=2, duration_s=0.25, action_seconds={"allocate": 0.1})
    )
    t = _text(m)
    assert "volcano_pod_preemption_victims 2.0" in t
    assert "volcano_total_preemption_attempts_total 1.0" in t
    assert 'volcano_eviction_transactions_total{action="preempt"} 1.0' in t
    assert 'volcano_unschedule_task_count{job_id="j"} 2.0' in t and "volcano_unschedule_job_count 1.0" in t
    assert 'volcano_queue_deserved_milli_cpu{queue_name="q"} 1500.0' in t
    assert 'volcano_queue_deserved_memory_bytes{queue_name="q"} 1.073741824e+09' in t
    assert 'volcano_queue_deserved_scalar_resources{queue_name="q",resource="nvidia.com/gpu"} 2000.0' in t
    assert (
        'volcano_queue_share{queue_name="q"} 1.25' in t and 'volcano_queue_overused{queue_name="q"} 1.0' in t
    )
    assert 'volcano_action_scheduling_latency_milliseconds_count{action="allocate"} 1.0' in t
    assert "volcano_e2e_scheduling_latency_milliseconds_sum 250.0" in t
    # the next cycle: no victims, the job no longer waits, the queue is gone
    m.observe(6, JobExplained(cycle=2, namespace="ns", name="j", queue="q", message=""))
    m.observe(7, QueueFiguresRecorded(cycle=2, queues={}))
    m.observe(8, CycleClosed(cycle=2))
    t = _text(m)
    assert "volcano_pod_preemption_victims 0.0" in t and "volcano_unschedule_job_count 0.0" in t
    assert 'job_id="j"' not in t and 'queue_name="q"' not in t
    assert m.observed == 8


def test_bucket_layout_matches_prometheus_exponential_buckets_range() -> None:
    b = exponential_buckets_range(1, 5000, 20)
    assert len(b) == 20 and b[0] == 1 and abs(b[-1] - 5000) < 1e-6
    assert all(abs(b[i + 1] / b[i] - b[1] / b[0]) < 1e-9 for i in range(19))
