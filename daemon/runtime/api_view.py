"""The daemon seen through api.view.DaemonView: StateReader (projection -> API types), LiveView, ReadOnlyView.

`StateReader` answers the API's questions about cluster state from a projection: it freezes the
projection into a ClusterSnapshot once per folded sequence (the same snapshot a cycle would
see) and builds jobs, queues and nodes from it, plus the explanations and queue figures the
projection folded, and a job's history up to the folded sequence (daemon/runtime/job_history.py).
`LiveView` is the running daemon (writes go through its single writer;
metrics are fed by the writer's event listeners).  `ReadOnlyView` is `fumarole serve`: a
read-only log and a projection that follows the log's tail as another process appends.
"""

from __future__ import annotations

import gc
import logging
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from fumarole.api.decision_json import DEFAULT_CACHE_BYTES, DecisionJsonCache, decision_page_json, page_json
from fumarole.api.metrics import SchedulerMetrics
from fumarole.api.types import (
    AheadRow,
    Explanation,
    GpuCard,
    HyperNodeList,
    HyperNodeRow,
    JobDetail,
    JobHistory,
    JobRow,
    NodeRow,
    QueueHistory,
    QueueRow,
    TaskRow,
)
from fumarole.daemon.cache import Projection, load_projection
from fumarole.daemon.manifests.redaction import redact_event
from fumarole.daemon.runtime.job_history import JobHistoryReader
from fumarole.daemon.runtime.queue_history import QueueHistoryReader
from fumarole.daemon.runtime.wait_clock import WaitClock
from fumarole.daemon.scheduler.model.hypernode import CLUSTER_TOP, build_topology
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.resources import finite_quantities
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskStatus
from fumarole.daemon.scheduler.plugins.deviceshare_gpushare import GpuSharePool
from fumarole.store.backend import open_log
from fumarole.store.events import Event, JobExplained, QueueFigures
from fumarole.store.index import IndexReader, decision_query, open_readonly
from fumarole.store.log import CorruptEventError, LogClosedError, LogError, StoredEvent
from fumarole.store.postgres import PostgresEventLog
from fumarole.store.sqlite import SqliteEventLog

if TYPE_CHECKING:
    from fumarole.daemon.runtime.writer import Writer


class Readiness(Protocol):
    """What the live view asks of the daemon that serves it: whether its cache caught up and,
    with leader election, whether it leads."""

    @property
    def ready(self) -> bool: ...

    def leadership(self) -> tuple[bool | None, str]: ...

    def config_warnings(self) -> list[str]: ...


__all__ = ["LiveView", "ReadOnlyView", "StateReader", "job_detail"]

log = logging.getLogger("fumarole.api")

_EMPTY_FIGURES = QueueFigures()


def _status_counts(job: JobInfo) -> dict[str, int]:
    c: Counter[str] = Counter(t.status.label for t in job.tasks.values())
    return dict(sorted(c.items()))


class StateReader:
    """Jobs, queues and nodes of a projection as API types (snapshot cached per folded sequence);
    a job's history is read from the log's decision index through `history`."""

    def __init__(self, projection: Projection, history: JobHistoryReader) -> None:
        self.projection = projection
        self.history = history
        self.wait = WaitClock(history)
        self._seq = -1
        self._snap: ClusterSnapshot | None = None
        self._jobs: dict[str, JobInfo] = {}
        self._nodes: list[NodeRow] | None = None
        self._queues: list[QueueRow] | None = None
        self._hypernodes: HyperNodeList | None = None

    def snapshot(self) -> ClusterSnapshot:
        p = self.projection
        if self._snap is None or self._seq != p.seq:
            self._snap = p.freeze()
            self._seq = p.seq
            self._jobs = {uid: self._snap.jobs[uid] for uid in sorted(self._snap.jobs)}
            self._nodes = None
            self._queues = None
            self._hypernodes = None
        return self._snap

    def jobs(self, *, queue: str | None = None, phase: str | None = None) -> list[JobRow]:
        self.snapshot()
        out: list[JobRow] = []
        explained = self.projection.explained
        last = self.projection.last_cycle
        self.wait.advance(self._seq)
        queues = self._snap.queues if self._snap is not None else {}
        for uid, j in self._jobs.items():
            if queue is not None and j.queue != queue:
                continue
            if phase is not None and j.status.phase != phase:
                continue
            by_status = _status_counts(j)
            out.append(
                JobRow(
                    namespace=j.namespace,
                    name=j.name,
                    queue=j.queue,
                    phase=j.status.phase,
                    min_member=j.min_available,
                    tasks=len(j.tasks),
                    tasks_by_status=by_status,
                    pending=uid in explained or "Pending" in by_status,
                    waited_ms=self.wait.waited_ms(uid, last),
                    wait_reason=_top_reason(explained.get(uid)),
                    queue_exists=j.queue in queues,
                )
            )
        return out

    def ahead(self, uid: str, queue: str, limit: int = 50) -> tuple[list[AheadRow], int]:
        """The waiting jobs of `queue` recorded before job `uid` (by their recorded queue position,
        then name), at most `limit`, and how many there are."""
        mine = self.projection.explained.get(uid)
        if mine is None or not mine.queue_position:
            return [], 0
        rows = sorted(
            (e.queue_position, k, e)
            for k, e in self.projection.explained.items()
            if k != uid and e.queue == queue and 0 < e.queue_position < mine.queue_position
        )
        out = []
        for pos, k, e in rows[:limit]:
            j = self._jobs.get(k)
            out.append(
                AheadRow(
                    namespace=e.namespace,
                    name=e.name,
                    position=pos,
                    phase=j.status.phase if j is not None else "",
                    wait_reason=_top_reason(e),
                )
            )
        return out, len(rows)

    def job(self, namespace: str, name: str) -> JobDetail | None:
        self.snapshot()
        uid = f"{namespace}/{name}"
        j = self._jobs.get(uid)
        if j is None:
            return None
        p = self.projection
        history = self.history.history(uid, upto_seq=p.seq, last_cycle=p.last_cycle)
        d = job_detail(j, p, p.seq, history)
        self.wait.advance(self._seq)
        d.waited_ms = self.wait.waited_ms(uid, p.last_cycle)
        d.queue_exists = self._snap is not None and j.queue in self._snap.queues
        d.ahead, d.ahead_total = self.ahead(uid, j.queue)
        return d

    def queues(self) -> list[QueueRow]:
        snap = self.snapshot()
        if self._queues is None:
            figures = self.projection.queue_figures
            rows: list[QueueRow] = []
            for name in sorted(snap.queues):
                q = snap.queues[name]
                f = figures.get(name, _EMPTY_FIGURES)
                rows.append(
                    QueueRow(
                        name=name,
                        weight=q.weight,
                        state=q.state,
                        parent=q.parent or f.parent,
                        reclaimable=q.is_reclaimable(),
                        capability=finite_quantities(q.capability),
                        guarantee=finite_quantities(q.guarantee) or dict(f.guarantee),
                        deserved=dict(f.deserved) or finite_quantities(q.deserved),
                        allocated=dict(f.allocated),
                        inqueue=dict(f.inqueue),
                        request=dict(f.request),
                        real_capability=dict(f.capability),
                        share=f.share,
                    )
                )
            self._queues = rows
        return self._queues

    def nodes(self) -> list[NodeRow]:
        snap = self.snapshot()
        if self._nodes is None:
            self._nodes = [
                NodeRow(
                    name=n.name,
                    allocatable=finite_quantities(n.allocatable),
                    idle=finite_quantities(n.idle),
                    used=finite_quantities(n.used),
                    releasing=finite_quantities(n.releasing),
                    pods=sorted(f"{t.namespace}/{t.name}" for t in n.tasks.values()),
                    gpus=gpu_cards(n),
                    labels=dict(sorted(n.facts.labels.items())),
                    pod_jobs=dict(
                        sorted((f"{t.namespace}/{t.name}", t.job) for t in n.tasks.values() if t.job)
                    ),
                )
                for n in snap.nodes
            ]
        return self._nodes

    def hypernodes(self) -> HyperNodeList:
        """The HyperNodes resolved against the snapshot's nodes, as a session resolves them (the
        virtual cluster-top HyperNode left out: it holds every node)."""
        snap = self.snapshot()
        if self._hypernodes is None:
            topo = build_topology(snap.hypernodes, [(n.name, n.facts.labels) for n in snap.nodes])
            rows = [
                HyperNodeRow(
                    name=name,
                    tier=hn.tier,
                    tier_name=hn.tier_name,
                    parent="" if hn.parent == CLUSTER_TOP else hn.parent,
                    children=list(hn.children),
                    nodes=list(topo.real_nodes.get(name, ())),
                )
                for name, hn in sorted(topo.hypernodes.items())
                if name != CLUSTER_TOP
            ]
            self._hypernodes = HyperNodeList(
                items=rows,
                tiers=sorted({r.tier for r in rows}),
                ready=topo.ready,
                problem=topo.problem,
                folded_seq=self._seq,
            )
        return self._hypernodes


def _top_reason(ev: JobExplained | None) -> str:
    """The most important reason code of an explanation ("" for none)."""
    if ev is None or not ev.reasons:
        return ""
    return min(ev.reasons, key=lambda r: r.rank).code


def gpu_cards(node: NodeInfo) -> list[GpuCard]:
    """The node's gpushare cards (none for a node without volcano.sh/gpu-memory and gpu-number) with the
    pods that name them in their volcano.sh/gpu-index annotation, as deviceshare accounts for them."""
    pool = GpuSharePool.from_node(node, sharing=True, number=True)
    if pool is None:
        return []
    names = {}
    for t in node.tasks.values():
        pool.add_resource(t, {**t.pod.annotations, **t.bind_annotations})
        names[t.uid] = f"{t.namespace}/{t.name}"
    return [
        GpuCard(
            index=card.index,
            memory=card.memory,
            used_memory=card.used_memory(),
            pods=sorted(names.get(uid, uid) for uid in card.pods),
        )
        for card in pool.cards.values()
    ]


def job_detail(j: JobInfo, projection: Projection, folded_seq: int, history: JobHistory) -> JobDetail:
    """One job as the API shows it: tasks by status, its explanation when it waits, its history."""
    uid = f"{j.namespace}/{j.name}"
    ev = projection.explained.get(uid)
    explanation = None
    if ev is not None and (ev.message or ev.reasons):
        explanation = Explanation(
            cycle=ev.cycle,
            message=ev.message,
            reasons=list(ev.reasons),
            queue_position=ev.queue_position,
            pods=dict(ev.pods),
        )
    by_status = _status_counts(j)
    tasks = [
        TaskRow(name=t.name, status=t.status.label, node=t.node_name or "")
        for t in sorted(j.tasks.values(), key=lambda t: t.name)
    ]
    return JobDetail(
        namespace=j.namespace,
        name=j.name,
        queue=j.queue,
        phase=j.status.phase,
        min_member=j.min_available,
        priority=j.priority,
        tasks_by_status=by_status,
        tasks=tasks,
        conditions=[c.as_dict() for c in j.status.conditions],
        pending=explanation is not None or TaskStatus.PENDING.label in by_status,
        explanation=explanation,
        folded_seq=folded_seq,
        history=history,
    )


class RawDecisionReader:
    """The stored rows (seq, type, v, idem_key, body) of a decision page, undecoded, on a synchronous
    read-only connection with a memory map (like store/index.py IndexReader, whose query it runs)."""

    def __init__(self, path: str, *, mmap_bytes: int = 1 << 30, busy_timeout_ms: int = 5000) -> None:
        self._conn = open_readonly(path, mmap_bytes=mmap_bytes, busy_timeout_ms=busy_timeout_ms)
        self.path = path

    def rows(
        self, *, since: int = 1, limit: int = 100, types: tuple[str, ...] = (), **filters: str | int | None
    ) -> list[tuple[Any, ...]]:
        sql, params = decision_query(since=since, limit=limit, types=types, **filters)
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise LogError(f"{self.path}: decision lookup failed: {e}") from e

    def seqs(
        self, *, since: int = 1, limit: int = 100, types: tuple[str, ...] = (), **filters: str | int | None
    ) -> list[int]:
        """Only the seqs of the same page (no event bodies read)."""
        sql, params = decision_query(since=since, limit=limit, types=types, **filters)
        try:
            return [int(r[0]) for r in self._conn.execute(f"SELECT seq FROM ({sql}) AS page", params)]
        except sqlite3.Error as e:
            raise LogError(f"{self.path}: decision lookup failed: {e}") from e

    def bodies(self, seqs: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        """The stored rows (seq, type, v, idem_key, body) of the given seqs, by seq."""
        sql = f"SELECT seq, type, v, idem_key, body FROM events WHERE seq IN ({','.join('?' * len(seqs))})"
        try:
            return {int(r[0]): r for r in self._conn.execute(sql, list(seqs))}
        except sqlite3.Error as e:
            raise LogError(f"{self.path}: event read failed: {e}") from e

    def close(self) -> None:
        self._conn.close()


class _ViewBase:
    def __init__(
        self,
        event_log: SqliteEventLog | PostgresEventLog,
        projection: Projection,
        *,
        decision_cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self._log = event_log
        self._projection = projection
        source = event_log.dsn if isinstance(event_log, PostgresEventLog) else event_log.path
        self._history = JobHistoryReader(source)
        self._queue_history = QueueHistoryReader(source)
        self.state = StateReader(projection, self._history)
        self.metrics = SchedulerMetrics()
        self.metrics.seed(projection.explanations(), projection.queue_figures)
        self._index = IndexReader(source)
        self._raw = RawDecisionReader(source)
        self.decision_cache = DecisionJsonCache(decision_cache_bytes)

    @property
    def event_log(self) -> SqliteEventLog | PostgresEventLog:
        return self._log

    @property
    def projection(self) -> Projection:
        return self._projection

    def last_cycle(self) -> int:
        return int(self._projection.last_cycle)

    def jobs(self, *, queue: str | None = None, phase: str | None = None) -> list[JobRow]:
        return self.state.jobs(queue=queue, phase=phase)

    def job(self, namespace: str, name: str) -> JobDetail | None:
        return self.state.job(namespace, name)

    def queues(self) -> list[QueueRow]:
        return self.state.queues()

    def nodes(self) -> list[NodeRow]:
        return self.state.nodes()

    def hypernodes(self) -> HyperNodeList:
        return self.state.hypernodes()

    def queue_history(self, *, from_cycle: int | None, to_cycle: int | None, points: int) -> QueueHistory:
        return self._queue_history.history(
            from_cycle=from_cycle, to_cycle=to_cycle, points=points, last_cycle=self.last_cycle()
        )

    def decisions(
        self, *, since: int = 1, limit: int = 100, types: tuple[str, ...] = (), **filters: str | int | None
    ) -> list[StoredEvent]:
        rows = self._index.decisions(since=since, limit=limit, types=types, **filters)
        return [StoredEvent(seq=seq, type=tag, event=ev, idem_key=key) for seq, tag, ev, key in rows]

    def decision_page(
        self, *, since: int = 1, limit: int = 100, types: tuple[str, ...] = (), **filters: str | int | None
    ) -> bytes:
        cache = self.decision_cache
        before = cache.seen((since, limit, types, *sorted(filters.items())))
        if before < 2:  # new (encoded as a page), or asked once before (rows encoded and kept)
            stored = self._raw.rows(since=since, limit=limit, types=types, **filters)
            if not before:
                return page_json(stored, limit)
            nxt = int(stored[-1][0]) + 1 if stored and len(stored) >= limit else None
            return decision_page_json(cache.rows(stored), nxt)
        # asked twice before: its rows are likely cached; read the seqs only, bodies of the missing ones
        seqs = self._raw.seqs(since=since, limit=limit, types=types, **filters)
        found = cache.lookup(seqs)
        missing = [s for s, data in zip(seqs, found, strict=True) if data is None]
        if missing:
            bodies = self._raw.bodies(missing)
            if len(bodies) != len(missing):
                lost = next(s for s in missing if s not in bodies)
                raise CorruptEventError(lost, "indexed decision without its event row")
            fresh = iter(cache.rows([bodies[s] for s in missing]))
            found = [data if data is not None else next(fresh) for data in found]
        rows = [data for data in found if data is not None]
        return decision_page_json(rows, seqs[-1] + 1 if seqs and len(seqs) >= limit else None)

    def _who_leads(self) -> tuple[bool | None, str]:
        """(whether this replica leads, the lease holder), or (None, "") without leader election."""
        return None, ""

    def leadership(self) -> tuple[bool | None, str]:
        """`_who_leads()`, also kept in the metrics (`fumarole_leader`, `fumarole_lease_holder`)."""
        leading, leader = self._who_leads()
        if leading is not None:
            self.metrics.set_leading(bool(leading), leader)
        return leading, leader

    def metrics_text(self) -> tuple[bytes, str]:
        self.leadership()
        return self.metrics.render()

    def close_index(self) -> None:
        self._index.close()
        self._raw.close()
        self._history.close()
        self._queue_history.close()


class LiveView(_ViewBase):
    """The running daemon: reads of its log and projection, writes through its writer."""

    def __init__(
        self,
        service: Readiness,
        event_log: SqliteEventLog | PostgresEventLog,
        projection: Any,
        writer: Writer,
        *,
        decision_cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        super().__init__(event_log, projection, decision_cache_bytes=decision_cache_bytes)
        self._service = service
        self._writer = writer
        writer.event_listeners.append(self.metrics.observe)

    def is_ready(self) -> bool:
        return bool(self._service.ready)

    def config_warnings(self) -> list[str]:
        return self._service.config_warnings()

    def _who_leads(self) -> tuple[bool | None, str]:
        return self._service.leadership()

    def folded_seq(self) -> int:
        return self._writer.folded_seq

    @property
    def writable(self) -> bool:
        return True

    async def ingest(self, events: Sequence[Event], idem_keys: Sequence[str | None]) -> list[int]:
        # POST /v1/events: a pod pushed by a workload is logged without its secrets, as observed ones are
        return await self._writer.submit([redact_event(e) for e in events], idem_keys=idem_keys)


class ReadOnlyView(_ViewBase):
    """`fumarole serve`: a read-only log; `follow()` folds what another process appends."""

    def __init__(
        self,
        event_log: SqliteEventLog | PostgresEventLog,
        projection: Projection,
        *,
        decision_cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        super().__init__(event_log, projection, decision_cache_bytes=decision_cache_bytes)
        self._caught_up = False
        self._failing = ""  # the follower's last failure while it lasts ("" once it reads again)
        # A standby replica sets this: (whether this replica leads, the lease holder).
        self.leadership_source: Callable[[], tuple[bool | None, str]] | None = None

    @classmethod
    async def open(
        cls,
        path: str,
        *,
        decision_cache_bytes: int = DEFAULT_CACHE_BYTES,
        freeze_gc: bool = True,
        warm: bool = False,
        retry_for: float | None = 30.0,
    ) -> ReadOnlyView:
        """Open `path` read-only and fold it; `freeze_gc` moves everything alive then (the projection)
        out of the cyclic GC's reach (gc.freeze; `fumarole serve` is a process of its own); `warm`
        freezes the cluster state once before returning, so that the first request (a dashboard's
        first page over 10,000 jobs) does not wait for it, nor for the first read of the jobs' wait times
        (`fumarole serve` listens only then);
        `retry_for`: how long reads wait out a lost PostgreSQL database (None: for ever)."""
        event_log = await open_log(path, readonly=True, retry_for=retry_for)
        try:
            projection = await load_projection(event_log)
        except BaseException:
            await event_log.close()
            raise
        view = cls(event_log, projection, decision_cache_bytes=decision_cache_bytes)
        view._caught_up = projection.seq >= await event_log.last_seq()
        if warm:
            view.state.snapshot()
            view.state.wait.advance(projection.seq)  # the jobs' wait times: one read of the index
        if freeze_gc:
            # The projection just folded is long-lived: keep the cyclic GC from traversing it on
            # every full collection (~0.2 s over a 1M-event log, a pause every request waits out).
            gc.collect()
            gc.freeze()
        return view

    def is_ready(self) -> bool:
        """Ready once the projection first caught up with the log, and for as long as following it
        works (a leader appending meanwhile does not make it unready; a lost database does)."""
        return self._caught_up and not self._failing

    def _who_leads(self) -> tuple[bool | None, str]:
        """On a standby replica: (False, the lease holder); else (None, "")."""
        return (None, "") if self.leadership_source is None else self.leadership_source()

    def config_warnings(self) -> list[str]:
        """None: `fumarole serve` runs no configuration (the log's `config.recorded` holds the texts)."""
        return []

    def folded_seq(self) -> int:
        return self._projection.seq

    @property
    def writable(self) -> bool:
        return False

    async def ingest(self, events: Sequence[Event], idem_keys: Sequence[str | None]) -> list[int]:
        raise LogError("this server is read-only")

    async def catch_up(self, *, wait: float = 0.0, batch: int = 10000) -> int:
        """Fold what the log holds beyond the projection (waiting up to `wait` seconds for news when
        there is none); returns the number of events folded."""
        p = self._projection
        if wait > 0:
            rows = await self._log.tail(p.seq + 1, limit=batch, timeout=wait)
        else:
            rows = await self._log.read(p.seq + 1, batch)
        for row in rows:
            p.fold(row.seq, row.event)
            self.metrics.observe(row.seq, row.event)
        if len(rows) < batch and not self._caught_up:
            self._caught_up = p.seq >= await self._log.last_seq()
        return len(rows)

    async def follow(self, *, poll: float = 0.5) -> None:
        """Follow the log's tail forever (cancel to stop); a failure is logged once while it lasts
        (the log itself says when its database is lost and when it answers again)."""
        while True:
            try:
                await self.catch_up(wait=poll)
            except LogClosedError:
                return  # the view is closing
            except LogError as e:
                if str(e) != self._failing:
                    log.warning("following the log: %s", e)
                self._failing = str(e)
                await anyio.sleep(poll)
                continue
            self._failing = ""

    async def close(self) -> None:
        self.close_index()
        await self._log.close()
