"""Replay: rebuild the projection from the log and re-run every recorded cycle at its watermark.

`replay(log, ...)` reads the log twice: a typed pass collects the recorded cycles
(`CycleOpened`) and configuration texts (`ConfigurationRecorded`), then one pass in order folds
every event into a fresh projection; just before the event after a cycle's watermark is folded
it freezes the snapshot and calls `runtime.cycle.decide` with the configuration the cycle
recorded (by hash) and the explanations in force, exactly as the session loop does.  The
recorded decision events of the cycle (its CycleOpened … CycleClosed) are compared with the
recomputed ones, timings and trace ids aside (`cycle.comparable`); the first differing
decision is named.

With `alternative` (another configuration), every cycle is also run with it over the same
history — the state at each watermark is the recorded one (the recorded decisions were what
the cluster acted on; the alternative's are not carried forward) — and the report lists, per
cycle, the jobs whose bind count would differ, the pods bound elsewhere, the evictions added or
dropped and the queue shares that would move.

Callouts: a cycle whose session asked an outside service (the extender plugin) has its answers
in the log (`CalloutsRecorded`, right after its CycleOpened).  The first pass collects them, and
the re-run session is answered from them through a ReplayPort (framework/callout.py), keyed by
verb and request digest in call order; nothing calls out.  A session that asks a question the
log does not hold makes that cycle DIFFERENT, naming the verb and request; the alternative
configuration (what-if) is answered from the same record, and a question it alone asks is a
ReplayError (its answers cannot be known offline).

Errors: a corrupt row raises the log's CorruptEventError (naming the seq and the file, and how
far the replay got: the cycles verified before it, the first that cannot be); a cycle whose
configuration text is not in the log raises ReplayError.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fumarole.daemon.cache import Projection, fold_log, load
from fumarole.daemon.runtime.conf_watch import parse_scheduler_conf
from fumarole.daemon.runtime.cycle import CycleDecisions, call_records, decide, first_difference
from fumarole.daemon.scheduler.framework.callout import CalloutUnavailable, ReplayPort
from fumarole.daemon.scheduler.framework.conf import SchedulerConf
from fumarole.store.events import (
    BindDecided,
    CalloutsRecorded,
    ConfigurationRecorded,
    CycleClosed,
    CycleOpened,
    EvictDecided,
    JobExplained,
    PipelineDecided,
    PodGroupStatusChanged,
    QueueFiguresRecorded,
)
from fumarole.store.log import CorruptEventError, EventLog

__all__ = ["CycleVerdict", "ReplayError", "ReplayReport", "WhatIf", "replay"]

_CYCLE_TYPES = (
    CalloutsRecorded,
    BindDecided,
    EvictDecided,
    PipelineDecided,
    PodGroupStatusChanged,
    JobExplained,
    QueueFiguresRecorded,
)


class ReplayError(Exception):
    """The log cannot be replayed (e.g. a cycle's configuration text is missing)."""


@dataclass(slots=True)
class WhatIf:
    """What the alternative configuration would have decided differently in one cycle."""

    binds_by_job: dict[str, tuple[int, int]] = field(default_factory=dict)  # job -> (recorded, alternative)
    moved: dict[str, tuple[str, str]] = field(default_factory=dict)  # pod -> (recorded node, alternative)
    evictions_added: list[str] = field(default_factory=list)
    evictions_dropped: list[str] = field(default_factory=list)
    queue_shares: dict[str, tuple[float, float]] = field(default_factory=dict)  # queue -> (recorded, alt)

    @property
    def empty(self) -> bool:
        return not (
            self.binds_by_job
            or self.moved
            or self.evictions_added
            or self.evictions_dropped
            or self.queue_shares
        )


@dataclass(slots=True)
class CycleVerdict:
    cycle: int
    seq: int  # where its CycleOpened is
    watermark: int
    conf_hash: str
    identical: bool = False
    difference: str = ""
    recorded_events: int = 0
    whatif: WhatIf | None = None


@dataclass(slots=True)
class ReplayReport:
    cycles: list[CycleVerdict] = field(default_factory=list)
    events_folded: int = 0
    last_seq: int = 0
    seconds: float = 0.0
    alternative_hash: str = ""

    @property
    def different(self) -> list[CycleVerdict]:
        return [c for c in self.cycles if not c.identical]


@dataclass(slots=True)
class _Pending:
    verdict: CycleVerdict
    opened: CycleOpened
    recomputed: CycleDecisions | None = None
    alternative: CycleDecisions | None = None
    recorded: list[Any] = field(default_factory=list)
    collecting: bool = False
    closed: bool = False


async def _recorded_cycles(
    log: EventLog, from_seq: int, to_seq: int
) -> tuple[list[tuple[int, CycleOpened]], dict[str, str], dict[int, CalloutsRecorded]]:
    """The cycles (CycleOpened seq, event), the configuration texts by hash, and each cycle's
    recorded callouts by its CycleOpened seq (the CalloutsRecorded of the same cycle after it)."""
    cycles: list[tuple[int, CycleOpened]] = []
    texts: dict[str, str] = {}
    callouts: dict[int, CalloutsRecorded] = {}
    opened_at: dict[int, int] = {}  # cycle -> seq of its latest CycleOpened
    types = ("cycle.opened", "config.recorded", "cycle.callouts")
    async for row in log.read_range(1, to_seq, types=types):
        ev = row.event
        if isinstance(ev, ConfigurationRecorded):
            texts.setdefault(ev.conf_hash, ev.text)
        elif isinstance(ev, CycleOpened):
            opened_at[ev.cycle] = row.seq
            if row.seq >= from_seq:
                cycles.append((row.seq, ev))
        elif isinstance(ev, CalloutsRecorded):
            at = opened_at.get(ev.cycle)
            if at is not None:
                callouts.setdefault(at, ev)
    return cycles, texts, callouts


def _conf_for(h: str, texts: dict[str, str], parsed: dict[str, SchedulerConf], cycle: int) -> SchedulerConf:
    conf = parsed.get(h)
    if conf is None:
        text = texts.get(h)
        if text is None:
            raise ReplayError(f"cycle {cycle}: configuration {h[:16]} is not recorded in the log")
        conf = parse_scheduler_conf(text, f"configuration {h[:16]} (recorded in the log)")
        parsed[h] = conf
    return conf


def _whatif(rec: CycleDecisions, recorded: list[Any], alt: CycleDecisions) -> WhatIf:
    out = WhatIf()
    rb: dict[str, int] = {}
    ab: dict[str, int] = {}
    rnode: dict[str, str] = {}
    anode: dict[str, str] = {}
    for ev in recorded:
        if isinstance(ev, BindDecided):
            rb[ev.job] = rb.get(ev.job, 0) + 1
            rnode[f"{ev.namespace}/{ev.name}"] = ev.node
    for ev in alt.events:
        if isinstance(ev, BindDecided):
            ab[ev.job] = ab.get(ev.job, 0) + 1
            anode[f"{ev.namespace}/{ev.name}"] = ev.node
    for job in sorted(set(rb) | set(ab)):
        if rb.get(job, 0) != ab.get(job, 0):
            out.binds_by_job[job] = (rb.get(job, 0), ab.get(job, 0))
    for pod in sorted(set(rnode) | set(anode)):
        if rnode.get(pod, "") != anode.get(pod, ""):
            out.moved[pod] = (rnode.get(pod, ""), anode.get(pod, ""))
    rev = {f"{e.namespace}/{e.name}" for e in recorded if isinstance(e, EvictDecided)}
    aev = {f"{e.namespace}/{e.name}" for e in alt.events if isinstance(e, EvictDecided)}
    out.evictions_added = sorted(aev - rev)
    out.evictions_dropped = sorted(rev - aev)
    rq = rec.result.queues
    aq = alt.result.queues
    for q in sorted(set(rq) | set(aq)):
        a = float(rq.get(q, {}).get("share", 0.0))
        b = float(aq.get(q, {}).get("share", 0.0))
        if round(a, 6) != round(b, 6):
            out.queue_shares[q] = (round(a, 6), round(b, 6))
    return out


async def replay(
    log: EventLog,
    *,
    alternative: SchedulerConf | None = None,
    alternative_hash: str = "",
    from_seq: int = 1,
    to_seq: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Verify the recorded cycles whose CycleOpened seq is in [from_seq, to_seq] (see the module notes).

    `progress(done, total)` is called after each verified cycle.
    """
    t0 = time.perf_counter()
    last = await log.last_seq()
    end = last if to_seq is None else min(to_seq, last)
    report = ReplayReport(last_seq=last, alternative_hash=alternative_hash)
    cycles, texts, callouts = await _recorded_cycles(log, max(1, from_seq), end)
    if not cycles:
        report.seconds = time.perf_counter() - t0
        return report
    parsed: dict[str, SchedulerConf] = {}
    for _seq, co in cycles:  # fail early on a missing configuration
        _conf_for(co.conf_hash, texts, parsed, co.cycle)
    by_watermark = sorted(cycles, key=lambda c: (c[1].watermark, c[0]))
    first_mark = by_watermark[0][1].watermark
    # From the start for a full replay; from the newest snapshot before the first watermark otherwise.
    p: Projection
    if from_seq > 1:
        p = await load(log, to_seq=first_mark)
    else:
        p = Projection()
        if first_mark > 0:
            await fold_log(log, p, to_seq=first_mark)
    folded_before = p.seq
    pending: dict[int, _Pending] = {}
    by_cycle: dict[int, _Pending] = {}
    order: list[_Pending] = []
    next_i = 0
    total = len(cycles)
    done = 0

    def run_due(upto: int) -> None:
        nonlocal next_i
        while next_i < len(by_watermark) and by_watermark[next_i][1].watermark <= upto:
            seq, co = by_watermark[next_i]
            next_i += 1
            verdict = CycleVerdict(cycle=co.cycle, seq=seq, watermark=co.watermark, conf_hash=co.conf_hash)
            item = _Pending(verdict=verdict, opened=co)
            if p.seq != co.watermark:
                verdict.difference = (
                    f"cannot rebuild the state at watermark {co.watermark} (projection is at {p.seq})"
                )
                item.closed = True
            else:
                snap = p.freeze(cycle=co.cycle)
                previous = p.explanations()
                previous_queues = p.queue_figures_in_force()
                conf = _conf_for(co.conf_hash, texts, parsed, co.cycle)
                recorded_calls = callouts.get(seq)
                answers = call_records(recorded_calls) if recorded_calls is not None else []
                try:
                    item.recomputed = decide(
                        snap,
                        conf,
                        cycle=co.cycle,
                        watermark=co.watermark,
                        conf_hash=co.conf_hash,
                        previous=previous,
                        previous_queues=previous_queues,
                        callouts=ReplayPort(answers, cycle=co.cycle),
                    )
                except CalloutUnavailable as e:
                    verdict.difference = str(e)
                if alternative is not None:
                    try:
                        item.alternative = decide(
                            snap,
                            alternative,
                            cycle=co.cycle,
                            watermark=co.watermark,
                            conf_hash=alternative_hash,
                            previous=previous,
                            previous_queues=previous_queues,
                            callouts=ReplayPort(answers, cycle=co.cycle),
                        )
                    except CalloutUnavailable as e:
                        raise ReplayError(
                            f"the alternative configuration: {e} (its answers are not in the log)"
                        ) from None
            pending[seq] = item
            by_cycle[co.cycle] = item
            order.append(item)

    def finish(item: _Pending) -> None:
        nonlocal done
        v = item.verdict
        v.recorded_events = len(item.recorded)
        if item.recomputed is not None:
            if not item.closed:
                v.difference = "the recorded cycle has no CycleClosed"
            else:
                diff = first_difference(item.recorded, item.recomputed.events)
                v.identical = diff is None
                v.difference = diff or ""
            if item.alternative is not None:
                v.whatif = _whatif(item.recomputed, item.recorded, item.alternative)
        done += 1
        if progress is not None:
            progress(done, total)

    run_due(p.seq)
    last_cycle_seq = max(s for s, _ in cycles)
    collecting: _Pending | None = None
    fold = p.fold
    rows = log.read_range(p.seq + 1, last)
    try:
        async for row in rows:
            seq, ev = row.seq, row.event
            if next_i < len(by_watermark) and by_watermark[next_i][1].watermark < seq:
                run_due(seq - 1)
            if isinstance(ev, CycleOpened):
                collecting = pending.get(seq)
                if collecting is not None:
                    collecting.recorded.append(ev)
            elif (
                collecting is not None
                and isinstance(ev, _CYCLE_TYPES)
                and ev.cycle == collecting.opened.cycle
            ):
                collecting.recorded.append(ev)
            elif (
                collecting is not None and isinstance(ev, CycleClosed) and ev.cycle == collecting.opened.cycle
            ):
                collecting.recorded.append(ev)
                collecting.closed = True
                finish(collecting)
                collecting = None
            fold(seq, ev)
            report.events_folded += 1
            if seq >= last_cycle_seq and collecting is None and done == total:
                break
    except CorruptEventError as e:  # the state after a damaged row is unknown: stop, saying how far
        waiting = [i.opened.cycle for i in order if not i.closed] + [
            c.cycle for _, c in by_watermark[next_i:]
        ]
        first = min(waiting, default=None)
        same = sum(1 for i in order if i.verdict.identical)
        rest = f"; cycle {first} and later cannot be verified" if first is not None else ""
        how_far = f"replay stopped: {done} of {total} cycle(s) verified before it ({same} identical){rest}"
        raise CorruptEventError(e.seq, f"{e.detail}; {how_far}", e.where) from e
    aclose = getattr(rows, "aclose", None)
    if aclose is not None:
        await aclose()
    if collecting is not None:
        finish(collecting)
    for item in order:
        if item.verdict.recorded_events == 0 and not item.recorded:
            finish(item)
    report.events_folded += folded_before
    report.cycles = sorted((i.verdict for i in order), key=lambda v: v.seq)
    report.seconds = time.perf_counter() - t0
    return report
