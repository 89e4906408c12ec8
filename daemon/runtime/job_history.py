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
_CHUNK = 400  # cycles (or spans) per batched lookup


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
        if set(open_span.codes) == set(codes):
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
        """The job's decisions up to `upto_seq`, folded (keyset pages over the decision index)."""
        t = Timeline()
        since = 1
        while True:
            sql, params = decision_query(since=since, limit=PAGE, types=HISTORY_TYPES, job=job)
            rows = self._rows(sql, params)
            fold_decisions(t, (_decision(row) for row in rows if row[0] <= upto_seq))
            if len(rows) < PAGE or rows[-1][0] >= upto_seq:
                return t
            since = int(rows[-1][0]) + 1

    def now_ms(self, cycles: Iterable[int]) -> dict[int, int]:
        """The virtual time (CycleOpened.now_ms) of each cycle found (its span's first row)."""
        out: dict[int, int] = {}
        wanted = sorted(set(cycles))
        for i in range(0, len(wanted), _CHUNK):
            chunk = wanted[i : i + _CHUNK]
            rows = self._rows(
                "SELECT c.cycle, e.seq, e.type, e.v, e.body FROM decision_cycles c "
                f"JOIN events e ON e.seq = c.first_seq WHERE c.cycle IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            for cycle, seq, tag, v, body in rows:
                ev = _decode(seq, tag, v, body)
                if isinstance(ev, CycleOpened):
                    out[int(cycle)] = ev.now_ms
        for cycle in wanted:  # a span not opened by its CycleOpened (never written so): look it up
            if cycle not in out:
                sql, params = decision_query(cycle=cycle, types=("cycle.opened",), limit=1)
                for seq, tag, v, _key, body in self._rows(sql, params):
                    ev = _decode(seq, tag, v, body)
                    if isinstance(ev, CycleOpened):
                        out[cycle] = ev.now_ms
        return out

    def cycle_counts(self, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """For each [first, end) cycle range: (the number of cycles in the log, the last of them)."""
        out: list[tuple[int, int]] = []
        for i in range(0, len(ranges), _CHUNK):
            chunk = ranges[i : i + _CHUNK]
            values = ",".join("(?, ?, ?)" for _ in chunk)
            params = [x for n, (a, b) in enumerate(chunk) for x in (n, a, b)]
            rows = self._rows(
                f"WITH r(n, a, b) AS (VALUES {values}) SELECT r.a, "
                "(SELECT count(*) FROM decision_cycles WHERE cycle >= r.a AND cycle < r.b), "
                "(SELECT max(cycle) FROM decision_cycles WHERE cycle >= r.a AND cycle < r.b) "
                "FROM r ORDER BY r.n",
                params,
            )
            out.extend((int(n), int(last) if last is not None else a) for a, n, last in rows)
        return out

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
        counts = self.cycle_counts([(s.first_cycle, end) for s, end in zip(t.spans, ends, strict=True)])
        binds, evictions, phases = t.binds[-listed:], t.evictions[-listed:], t.phases[-listed:]
        wanted = {s.first_cycle for s in t.spans} | {
            s.until_cycle for s in t.spans if s.until_cycle is not None
        }
        wanted |= {last for _, last in counts[-1:]}
        wanted |= {c for c, _ in binds} | {c for c, _ in evictions} | {c for c, _ in phases}
        at = self.now_ms(wanted)
        spans: list[WaitSpan] = []
        waited_ms = 0
        for s, (n, last) in zip(t.spans, counts, strict=True):
            start = at.get(s.first_cycle, 0)
            until_ms = at.get(s.until_cycle, start) if s.until_cycle is not None else None
            waited_ms += (until_ms if until_ms is not None else at.get(last, start)) - start
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
            wait_cycles=sum(n for n, _ in counts),
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
    """(cycle, decision) of a stored row (seq, type, v, idem_key, body); an explanation is decoded
    to (message, reason codes) only, skipping its pods and node histograms."""
    seq, tag, v, _key, body = row
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
