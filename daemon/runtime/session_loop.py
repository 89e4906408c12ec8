"""The session loop's unit of work: freeze the projection, run one cycle off the event loop,
append its decision events in one transaction.

`CycleRunner.run_cycle(writer)` records a changed scheduler configuration first (its own
transaction, so the cycle's watermark covers it), freezes the projection at its current
sequence (the watermark), settles the heap (`heap.HeapSettler`), runs
`fumarole.daemon.runtime.cycle.decide` in a worker thread inside a `cycle` span (the session's spans
are its children), and appends CycleOpened … CycleClosed as one batch.  The cycle's trace id
is stamped on every decision event.  The session asks outside services (the extender plugin)
through a RecordingPort over the live HTTP port (daemon/callouts_http.py): the answers are
appended in the same batch, as CalloutsRecorded right after CycleOpened, before the decisions
they led to; a session that called out is never reused by the SessionMemo (the next cycle asks
again, as Volcano does every session).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from opentelemetry import trace

from fumarole.daemon.callouts_http import HttpCalloutPort
from fumarole.daemon.runtime.conf_watch import ConfWatcher
from fumarole.daemon.runtime.cycle import CycleDecisions, decide, session_id
from fumarole.daemon.runtime.heap import HeapSettler
from fumarole.daemon.runtime.job_tally import JobTally
from fumarole.daemon.runtime.session_memo import SessionMemo
from fumarole.daemon.runtime.telemetry import trace_id_hex
from fumarole.daemon.scheduler.framework.callout import CalloutPort, RecordingPort
from fumarole.daemon.scheduler.model.node_derived import NodeDerived
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.store.events import BindDecided, EvictDecided, PodGroupStatusChanged

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from fumarole.daemon.runtime.writer import Writer

log = logging.getLogger("fumarole.cycle")

TRACER_NAME = "fumarole.daemon"


@dataclass(slots=True)
class CycleSummary:
    cycle: int
    watermark: int
    binds: int = 0
    evictions: int = 0
    evictions_by_action: Counter[str] = field(default_factory=Counter)
    pipelined: int = 0
    status_changes: int = 0
    bound: int = 0
    pending: int = 0
    seconds: float = 0.0
    trace_id: str = ""
    last_decision_seq: int = 0
    queue_shares: dict[str, float] = field(default_factory=dict)
    # Wall seconds of the cycle's steps (observability only, see `timings`).
    freeze_s: float = 0.0
    gc_s: float = 0.0
    decide_s: float = 0.0
    # CPU seconds of the thread that ran the step (observability only): the freeze and the heap
    # settling on the event loop's thread, the session and its events on the worker thread.
    freeze_cpu_s: float = 0.0
    gc_cpu_s: float = 0.0
    decide_cpu_s: float = 0.0
    append_s: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)

    def timings(self) -> dict[str, float]:
        """freeze / gc (HeapSettler) / session phases (open, actions, close, result) / decide
        (session + events) / append."""
        out = {"freeze_s": round(self.freeze_s, 6), "gc_s": round(self.gc_s, 6)}
        out["freeze_cpu_s"] = round(self.freeze_cpu_s, 6)
        out["gc_cpu_s"] = round(self.gc_cpu_s, 6)
        out["decide_cpu_s"] = round(self.decide_cpu_s, 6)
        out.update({f"{k}_s": v for k, v in self.phase_seconds.items()})
        out["session_s"] = round(self.seconds, 6)
        out["decide_s"] = round(self.decide_s, 6)
        out["append_s"] = round(self.append_s, 6)
        return out

    @property
    def decided(self) -> bool:
        """Whether the cycle changed anything (binds, evictions or PodGroup statuses)."""
        return bool(self.binds or self.evictions or self.status_changes)


class CycleRunner:
    def __init__(
        self,
        projection: Any,
        conf: ConfWatcher,
        *,
        tracer_provider: TracerProvider | None = None,
        callouts: CalloutPort | None = None,
    ) -> None:
        self.projection = projection
        # The live port sessions call out through (each cycle records over it).
        self.callouts: CalloutPort = callouts if callouts is not None else HttpCalloutPort()
        self.conf = conf
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(TRACER_NAME)
        self.tracer_provider = tracer_provider
        self.cycle = 0
        self._warned: dict[str, None] = {}  # every warning the sessions gave, once, in order
        self.heap = HeapSettler()
        self.memo = SessionMemo()
        # What sessions derive from each node, handed from one cycle's snapshot to the next
        # (the freeze shares unchanged NodeInfo and JobInfo objects and builds new ones for
        # changed nodes and jobs): daemon/scheduler/model/node_derived.py.
        self.derived = NodeDerived(keep_jobs=True)
        # The snapshot's task figures, kept job by job across cycles (job_tally.py).
        self.tally = JobTally()

    def warnings(self) -> list[str]:
        """The warnings of the configuration in force (an unknown plugin name, an unsupported
        flag: skipped, as Volcano skips them), then those the sessions of this run gave (a
        plugin's word on its arguments), each once: the run's summary and `/readyz` repeat them."""
        seen = dict.fromkeys(self.conf.active.conf.warnings)
        seen.update(self._warned)
        return list(seen)

    async def run_cycle(self, writer: Writer) -> CycleSummary:
        conf_events = self.conf.poll()
        if conf_events:
            await writer.submit(conf_events)
        active = self.conf.active
        watermark = self.projection.seq
        t_freeze, c_freeze = time.perf_counter(), time.thread_time()
        with self.heap.paused():
            snapshot: ClusterSnapshot = self.projection.freeze(cycle=self.cycle + 1)
        snapshot.derived = self.derived
        generation: int = self.projection.generation
        t_gc, c_gc = time.perf_counter(), time.thread_time()
        freeze_s, freeze_cpu_s = t_gc - t_freeze, c_gc - c_freeze
        self.heap.settle()
        gc_s, gc_cpu_s = time.perf_counter() - t_gc, time.thread_time() - c_gc
        previous = self.projection.explanations()
        previous_queues = self.projection.queue_figures_in_force()
        self.cycle += 1
        cycle = self.cycle
        recalled = self.memo.recall(generation, active.conf, active.hash, session_id(cycle))
        port = RecordingPort(self.callouts)

        def work() -> tuple[CycleDecisions, str, tuple[int, int], float]:
            c_work = time.thread_time()
            with self.tracer.start_as_current_span("cycle") as span:
                tid = trace_id_hex(span)
                span.set_attribute("cycle.id", cycle)
                span.set_attribute("cycle.watermark", watermark)
                span.set_attribute("conf.hash", active.hash)
                span.set_attribute("cycle.reused", recalled is not None)
                with self.heap.paused():
                    self.tally.update(snapshot, generation)
                    out = decide(
                        snapshot,
                        active.conf,
                        cycle=cycle,
                        watermark=watermark,
                        conf_hash=active.hash,
                        trace_id=tid,
                        previous=previous,
                        previous_queues=previous_queues,
                        tracer_provider=self.tracer_provider,
                        reuse=recalled[0] if recalled is not None else None,
                        tally=self.tally,
                        callouts=port,
                    )
                counts = self.tally.bound, self.tally.pending
                if recalled is None:
                    self.memo.remember(
                        generation,
                        active.conf,
                        active.hash,
                        snapshot,
                        out.result,
                        counts,
                        called_out=bool(port.records),
                    )
                closed = out.closed
                span.set_attribute("cycle.jobs", closed.jobs)
                span.set_attribute("cycle.tasks", closed.tasks)
                span.set_attribute("cycle.binds", closed.binds)
                span.set_attribute("cycle.evictions", closed.evictions)
                span.set_attribute("cycle.pipelined", closed.pipelined)
                return out, tid, counts, time.thread_time() - c_work

        t_decide = time.perf_counter()
        decisions, tid, (bound, pending), decide_cpu_s = await anyio.to_thread.run_sync(work)
        t_append = time.perf_counter()
        seqs = await writer.submit(decisions.events)
        summary = CycleSummary(cycle=cycle, watermark=watermark, seconds=decisions.duration_s, trace_id=tid)
        summary.freeze_s = freeze_s
        summary.gc_s = gc_s
        summary.freeze_cpu_s = freeze_cpu_s
        summary.gc_cpu_s = gc_cpu_s
        summary.decide_cpu_s = decide_cpu_s
        summary.decide_s = t_append - t_decide
        summary.append_s = time.perf_counter() - t_append
        summary.phase_seconds = dict(decisions.result.phase_seconds)
        for seq, ev in zip(seqs, decisions.events, strict=True):
            if isinstance(ev, BindDecided):
                summary.binds += 1
                summary.last_decision_seq = seq
            elif isinstance(ev, EvictDecided):
                summary.evictions += 1
                summary.evictions_by_action[ev.action] += 1
                summary.last_decision_seq = seq
            elif isinstance(ev, PodGroupStatusChanged):
                summary.status_changes += 1
        summary.pipelined = decisions.closed.pipelined
        summary.bound = bound + summary.binds
        summary.pending = max(0, pending - summary.binds)
        for q, figures in decisions.result.queues.items():
            share = figures.get("share") if isinstance(figures, dict) else None
            if isinstance(share, int | float):
                summary.queue_shares[q] = float(share)
        for w in decisions.result.warnings:
            if w not in self._warned:
                self._warned[w] = None
                log.warning("scheduler: %s", w)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "cycle timings",
                extra={
                    "cycle": cycle,
                    "now_ms": round(snapshot.now * 1000),
                    "events": len(seqs),
                    "binds": summary.binds,
                    "jobs": decisions.closed.jobs,
                    "tasks": decisions.closed.tasks,
                    "reused": recalled is not None,
                    **summary.timings(),
                },
            )
        return summary
