"""A job's history from the decision index: when and why it waited, binds, evictions, phase changes.

`JobHistoryReader.history(job, upto_seq=…, last_cycle=…)` reads the job's decisions (bind, evict,
PodGroup status, explanation) through the decision index's (job, seq) index in keyset pages,
never scanning the log, and folds them (`fold_decisions`, pure) into a timeline of cycle ids:

* wait spans: a cycle's `decision.job_explained` is written only when the job's explanation
  changes, so consecutive explanations with the same set of reason codes form one span, from the
  cycle of its first explanation until the cycle whose explanation has other reasons or none;
  a span still open at the end lasts through the log's last cycle;
* binds grouped per cycle, evictions one by one, PodGroup phase changes.

The cycles' virtual times (`CycleOpened.now_ms`) and the number of cycles each span covers are
then read in a few batched queries (decision_cycles: one row per cycle).  Only the most recent
`listed` entries of each kind are returned (the totals count all), so the answer stays small
for a job with a long history.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from api.types import BindStep, EvictionStep, JobHistory, PhaseStep, WaitSpan
from store.codec import CodecError, current_version, decode
from store.events import BindDecided, CycleOpened, EvictDecided, JobExplained, PodGroupStatusChanged
from store.index import decision_query
from store.log import CorruptEventError, LogError

__all__ = ["HISTORY_TYPES", "JobHistoryReader", "Timeline", "fold_decisions"]

HISTORY_TYPES: tuple[str, ...] = (
    "decision.bind",
    "decision.evict",
    "decision.podgroup_status",
    "decision.job_explained",
)
LISTED = 100  # the most recent entries of each kind a history lists
PAGE = 2000  # decision rows read per keyset page
_CHUNK = 400  # cycle ranges per batched lookup

# A page of the job's decisions: the (job, seq) index of decision_index covers the search.
_JOB_PAGE = (
    "SELECT e.seq, e.type, e.v, e.body FROM decision_index d JOIN events e ON e.seq = d.seq "
    "WHERE d.job = ? AND d.seq > ? AND d.seq <= ? ORDER BY d.seq LIMIT ?"
)

# Per [a, b) range: how many cycles, the last one, and the first decision (the CycleOpened) of cycle a.
_CYCLE_FACTS = (
    "WITH r(a, b) AS (VALUES {values}), f(a, b, seq) AS ("
    "SELECT r.a, r.b, (SELECT first_seq FROM decision_cycles WHERE cycle = r.a) FROM r) "
    "SELECT f.a, f.b, "
    "(SELECT count(*) FROM decision_cycles WHERE cycle >= f.a AND cycle < f.b), "
    "(SELECT max(cycle) FROM decision_cycles WHERE cycle >= f.a AND cycle < f.b), "
    "f.seq, e.type, e.v, e.body FROM f LEFT JOIN events e ON e.seq = f.seq"
)


class _Reason(msgspec.Struct):
    code: str


class _ExplainedCodes(msgspec.Struct):
    """The part of a current-version `decision.job_explained` body a history needs (the rest is skipped)."""

    cycle: int
    message: str
    reasons: list[_Reason] = []


_EXPLAINED = msgspec.msgpack.Decoder(_ExplainedCodes)
_EXPLAINED_V = current_version("decision.job_explained")


@dataclass(slots=True)
class Span:
    first_cycle: int
    codes: tuple[str, ...]
    message: str
    until_cycle: int | None = None


@dataclass(slots=True)
class Timeline:
    """A job's decisions folded, in cycle ids (no times yet)."""

    spans: list[Span] = field(default_factory=list)
    binds: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    evictions: list[tuple[int, EvictDecided]] = field(default_factory=list)
    phases: list[tuple[int, str]] = field(default_factory=list)


def fold_decisions(timeline: Timeline, decisions: Iterable[tuple[int, Any]]) -> Timeline:
    """Fold (cycle, decision) pairs, in log order, into `timeline` (see the module docstring).

    A decision is a BindDecided, an EvictDecided, a PodGroupStatusChanged, or an explanation
    given as (message, reason codes ranked)."""
    for cycle, d in decisions:
        if isinstance(d, tuple):
            message, codes = d
            _explained(timeline, cycle, message, codes)
        elif isinstance(d, BindDecided):
            pod = f"{d.namespace}/{d.name}"
            if timeline.binds and timeline.binds[-1][0] == cycle:
                timeline.binds[-1][1][pod] = d.node
            else:
                timeline.binds.append((cycle, {pod: d.node}))
        elif isinstance(d, EvictDecided):
            timeline.evictions.append((cycle, d))
        elif isinstance(d, PodGroupStatusChanged) and (
            not timeline.phases or timeline.phases[-1][1] != d.phase
        ):
            timeline.phases.append((cycle, d.phase))
    return timeline


def _explained(t: Timeline, cycle: int, message: str, codes: tuple[str, ...]) -> None:
    open_span = t.spans[-1] if t.spans and t.spans[-1].until_cycle is None else None
    if not message and not codes:  # no longer waiting
        if open_span is not None:
            open_span.until_cycle = cycle
        return
    if open_span is not None:
        if open_span.codes == codes or set(open_span.codes) == set(codes):
            return
        open_span.until_cycle = cycle
    t.spans.append(Span(first_cycle=cycle, codes=codes, message=message))


class JobHistoryReader:
    """A synchronous read-only connection answering job histories (like store/index.py IndexReader)."""

    def __init__(self, path: str, *, mmap_bytes: int = 1 << 30, busy_timeout_ms: int = 5000) -> None:
        from pathlib import Path

        uri = f"{Path(path).resolve().as_uri()}?mode=ro"
        self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        self._conn.execute(f"PRAGMA mmap_size = {int(mmap_bytes)}")
        self._conn.execute("PRAGMA query_only = 1")
        self.path = path

    def close(self) -> None:
        self._conn.close()

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise LogError(f"{self.path}: job history lookup failed: {e}") from e

    # ------------------------------------------------------------------------- reading

    def timeline(self, job: str, *, upto_seq: int) -> Timeline:
        """The job's decisions up to `upto_seq`, folded: keyset pages over the decision index's
        (job, seq) index alone (the rows' types are the events' own), bodies by primary key."""
        t = Timeline()
        since = 0
        while True:
            rows = self._rows(_JOB_PAGE, (job, since, upto_seq, PAGE))
            fold_decisions(t, (_decision(row) for row in rows if row[1] in HISTORY_TYPES))
            if len(rows) < PAGE:
                return t
            since = int(rows[-1][0])

    def cycle_facts(
        self, ranges: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], tuple[int, int, int | None]]:
        """For each [first, end) cycle range: the number of cycles the log holds in it, the last of
        them (`first` when none), and the virtual time (CycleOpened.now_ms) of `first` (None when the
        log has no such cycle); one statement per chunk of ranges (decision_cycles by primary key)."""
        out: dict[tuple[int, int], tuple[int, int, int | None]] = {}
        wanted = sorted(set(ranges))
        for i in range(0, len(wanted), _CHUNK):
            chunk = wanted[i : i + _CHUNK]
            values = ",".join("(?, ?)" for _ in chunk)
            rows = self._rows(_CYCLE_FACTS.format(values=values), [x for r in chunk for x in r])
            for a, b, n, last, seq, tag, v, body in rows:
                now = None
                if tag == "cycle.opened":
                    ev = _decode(seq, tag, v, body)
                    now = ev.now_ms if isinstance(ev, CycleOpened) else None
                elif seq is not None:  # a cycle whose first decision is not its CycleOpened (never so)
                    now = self._opened_at(int(a))
                out[(int(a), int(b))] = (int(n), int(last) if last is not None else int(a), now)
        return out

    def _opened_at(self, cycle: int) -> int | None:
        sql, params = decision_query(cycle=cycle, types=("cycle.opened",), limit=1)
        for seq, tag, v, _key, body in self._rows(sql, params):
            ev = _decode(seq, tag, v, body)
            if isinstance(ev, CycleOpened):
                return ev.now_ms
        return None

    def history(self, job: str, *, upto_seq: int, last_cycle: int, listed: int = LISTED) -> JobHistory:
        """The job's history as the API shows it, from the decisions up to `upto_seq` (the folded
        sequence) and through `last_cycle` (the log's last cycle there)."""
        return self.resolve(self.timeline(job, upto_seq=upto_seq), last_cycle=last_cycle, listed=listed)

    def resolve(self, t: Timeline, *, last_cycle: int, listed: int = LISTED) -> JobHistory:
        """A timeline with its cycles' virtual times and counts (the most recent `listed` of each kind)."""
        ends = [
            s.until_cycle if s.until_cycle is not None else max(last_cycle, s.first_cycle) + 1
            for s in t.spans
        ]
        span_ranges = [(s.first_cycle, end) for s, end in zip(t.spans, ends, strict=True)]
        binds, evictions, phases = t.binds[-listed:], t.evictions[-listed:], t.phases[-listed:]
        points = {s.until_cycle for s in t.spans if s.until_cycle is not None}
        points |= {c for c, _ in binds} | {c for c, _ in evictions} | {c for c, _ in phases}
        if t.spans and t.spans[-1].until_cycle is None:
            points.add(last_cycle)  # an open span: the time it has waited so far
        facts = self.cycle_facts(span_ranges + [(c, c + 1) for c in points])
        at = {a: now for (a, _), (_, _, now) in facts.items() if now is not None}
        spans: list[WaitSpan] = []
        waited_ms = wait_cycles = 0
        for s, r in zip(t.spans, span_ranges, strict=True):
            n, last, _ = facts[r]
            start = at.get(s.first_cycle, 0)
            until_ms = at.get(s.until_cycle, start) if s.until_cycle is not None else None
            waited_ms += (until_ms if until_ms is not None else at.get(last_cycle, start)) - start
            wait_cycles += n
            spans.append(
                WaitSpan(
                    first_cycle=s.first_cycle,
                    last_cycle=last,
                    cycles=n,
                    from_ms=start,
                    until_cycle=s.until_cycle,
                    until_ms=until_ms,
                    reasons=list(s.codes),
                    message=s.message,
                )
            )
        first, final = (spans[0], spans[-1]) if spans else (None, None)
        return JobHistory(
            waiting=final is not None and final.until_cycle is None,
            waited_ms=waited_ms,
            wait_cycles=wait_cycles,
            waited_from_cycle=first.first_cycle if first else None,
            waited_from_ms=first.from_ms if first else None,
            waited_until_cycle=final.until_cycle if final else None,
            waited_until_ms=final.until_ms if final else None,
            waits=spans[-listed:],
            waits_total=len(spans),
            binds=[BindStep(cycle=c, at_ms=at.get(c, 0), pods=pods) for c, pods in binds],
            binds_total=len(t.binds),
            evictions=[
                EvictionStep(
                    cycle=c,
                    at_ms=at.get(c, 0),
                    pod=f"{e.namespace}/{e.name}",
                    node=e.node,
                    action=e.action,
                    reason=e.reason,
                )
                for c, e in evictions
            ],
            evictions_total=len(t.evictions),
            phases=[PhaseStep(cycle=c, at_ms=at.get(c, 0), phase=p) for c, p in phases],
            phases_total=len(t.phases),
            listed=listed,
        )


def _decode(seq: int, tag: str, v: int, body: bytes) -> Any:
    try:
        return decode(tag, v, body)
    except CodecError as e:
        raise CorruptEventError(seq, str(e)) from e


def _decision(row: tuple[Any, ...]) -> tuple[int, Any]:
    """(cycle, decision) of a stored row (seq, type, v, body); an explanation is decoded to
    (message, reason codes) only, skipping its pods and node histograms."""
    seq, tag, v, body = row
    if tag == "decision.job_explained":
        if v == _EXPLAINED_V:
            try:
                lite = _EXPLAINED.decode(body)
            except msgspec.DecodeError as e:
                raise CorruptEventError(seq, f"{tag} v{v}: {e}") from e
            return lite.cycle, (lite.message, tuple(r.code for r in lite.reasons))
        ev = _decode(seq, tag, v, body)
        assert isinstance(ev, JobExplained)
        return ev.cycle, (ev.message, tuple(r.code for r in ev.reasons))
    ev = _decode(seq, tag, v, body)
    return int(ev.cycle), ev
