"""A job's history from the decision index: when and why it waited, binds, evictions, phase changes.

`JobHistoryReader.history(job, upto_seq=…, last_cycle=…)` reads the job's decisions (bind, evict,
PodGroup status, explanation) from the decision index alone, in keyset pages over its (job, seq)
index, never scanning the log: a bind's pod and node, an explanation's reason codes and a
status's phase are in the index row (`detail`, migration 0004; the event is read for a row
indexed before it).  `fold_decisions` (pure) folds them into a timeline of cycle ids:

* wait spans: a cycle's `decision.job_explained` is written only when the job's explanation
  changes, so consecutive explanations with the same set of reason codes form one span, from the
  cycle of its first explanation until the cycle whose explanation has other reasons or none;
  a span still open at the end lasts through the log's last cycle;
* binds grouped per cycle, evictions one by one, PodGroup phase changes.

The cycles' virtual times (`CycleOpened.now_ms`) and the number of cycles each span covers are
then read in one batched statement (decision_cycles: one row per cycle), and the events of what
is listed (each span's first explanation, for its message; evictions, for action and reason)
by primary key.  Only the most recent `listed` entries of each kind are returned (the totals
count all), so the answer stays small for a job with a long history.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fumarole.api.types import BindStep, EvictionStep, JobHistory, PhaseStep, WaitSpan
from fumarole.store.codec import CodecError, decode
from fumarole.store.events import CycleOpened, EvictDecided, JobExplained, PodGroupStatusChanged
from fumarole.store.index import decision_query, explained_codes, explained_detail, open_readonly
from fumarole.store.log import CorruptEventError, LogError

__all__ = [
    "Bound",
    "Evicted",
    "Explained",
    "JobHistoryReader",
    "Phase",
    "Timeline",
    "fold_decisions",
]

LISTED = 100  # the most recent entries of each kind a history lists
PAGE = 2000  # decision rows read per keyset page
_CHUNK = 400  # cycle ranges per batched lookup

# A page of the job's decisions, from the decision index alone (its (job, seq) index, then the rows).
_JOB_PAGE = (
    "SELECT seq, cycle, type, namespace, pod, node, detail FROM decision_index "
    "WHERE job = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
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


@dataclass(frozen=True, slots=True)
class Bound:
    cycle: int
    pod: str
    node: str


@dataclass(frozen=True, slots=True)
class Evicted:
    cycle: int
    seq: int  # the decision.evict event (its action and reason are read when listed)


@dataclass(frozen=True, slots=True)
class Phase:
    cycle: int
    phase: str


@dataclass(frozen=True, slots=True)
class Explained:
    cycle: int
    seq: int  # the decision.job_explained event (its message is read when it starts a listed span)
    codes: tuple[str, ...] | None  # ranked reason codes; None: the job no longer waits


Decision = Bound | Evicted | Phase | Explained


@dataclass(slots=True)
class Span:
    first_cycle: int
    seq: int  # the span's first explanation
    codes: tuple[str, ...]
    until_cycle: int | None = None


@dataclass(slots=True)
class Timeline:
    """A job's decisions folded, in cycle ids (no times yet)."""

    spans: list[Span] = field(default_factory=list)
    binds: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    evictions: list[Evicted] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)


def fold_decisions(timeline: Timeline, decisions: Iterable[Decision]) -> Timeline:
    """Fold a job's decisions, in log order, into `timeline` (see the module docstring)."""
    t = timeline
    for d in decisions:
        if isinstance(d, Explained):
            _explained(t, d)
        elif isinstance(d, Bound):
            if t.binds and t.binds[-1][0] == d.cycle:
                t.binds[-1][1][d.pod] = d.node
            else:
                t.binds.append((d.cycle, {d.pod: d.node}))
        elif isinstance(d, Evicted):
            t.evictions.append(d)
        elif not t.phases or t.phases[-1].phase != d.phase:
            t.phases.append(d)
    return t


def _explained(t: Timeline, d: Explained) -> None:
    open_span = t.spans[-1] if t.spans and t.spans[-1].until_cycle is None else None
    if d.codes is None:  # no longer waiting
        if open_span is not None:
            open_span.until_cycle = d.cycle
        return
    if open_span is not None:
        if open_span.codes == d.codes or set(open_span.codes) == set(d.codes):
            return
        open_span.until_cycle = d.cycle
    t.spans.append(Span(first_cycle=d.cycle, seq=d.seq, codes=d.codes))


class JobHistoryReader:
    """A synchronous read-only connection answering job histories (like store/index.py IndexReader)."""

    def __init__(self, path: str, *, mmap_bytes: int = 1 << 30, busy_timeout_ms: int = 5000) -> None:
        self._conn = open_readonly(path, mmap_bytes=mmap_bytes, busy_timeout_ms=busy_timeout_ms)
        self.path = path
        self._where = "" if path.startswith(("postgresql://", "postgres://")) else path  # no credentials

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
        since = 0
        while True:
            rows = self._rows(_JOB_PAGE, (job, since, upto_seq, PAGE))
            fold_decisions(t, self._decisions(rows))
            if len(rows) < PAGE:
                return t
            since = int(rows[-1][0])

    def _decisions(self, rows: list[tuple[Any, ...]]) -> list[Decision]:
        """The history's decisions of index rows (seq, cycle, type, namespace, pod, node, detail);
        the events of rows without a detail (indexed before migration 0004) are read."""
        missing = [r[0] for r in rows if r[6] is None and r[2] in _DETAILED]
        details = {seq: _detail(seq, ev) for seq, ev in self.events(missing).items()} if missing else {}
        out: list[Decision] = []
        for seq, cycle, tag, ns, pod, node, detail in rows:
            if tag == "decision.bind":
                out.append(Bound(cycle, f"{ns or ''}/{pod or ''}", node or ""))
            elif tag == "decision.evict":
                out.append(Evicted(cycle, seq))
            elif tag in _DETAILED:
                detail = detail if detail is not None else details[seq]
                if tag == "decision.podgroup_status":
                    out.append(Phase(cycle, detail))
                else:
                    out.append(Explained(cycle, seq, explained_codes(detail)))
        return out

    def events(self, seqs: Sequence[int]) -> dict[int, Any]:
        """The decoded events of the given seqs, by seq; an indexed seq without its event is corrupt."""
        out: dict[int, Any] = {}
        wanted = sorted(set(seqs))
        for i in range(0, len(wanted), _CHUNK):
            chunk = wanted[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for seq, tag, v, body in self._rows(
                f"SELECT seq, type, v, body FROM events WHERE seq IN ({marks})", chunk
            ):
                out[int(seq)] = _decode(seq, tag, v, body, self._where)
        lost = next((s for s in wanted if s not in out), None)
        if lost is not None:
            raise CorruptEventError(lost, "indexed decision without its event row")
        return out

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
            values = ",".join("(CAST(? AS INTEGER), CAST(? AS INTEGER))" for _ in chunk)
            rows = self._rows(_CYCLE_FACTS.format(values=values), [x for r in chunk for x in r])
            for a, b, n, last, seq, tag, v, body in rows:
                now = None
                if tag == "cycle.opened":
                    ev = _decode(seq, tag, v, body, self._where)
                    now = ev.now_ms if isinstance(ev, CycleOpened) else None
                elif seq is not None:  # a cycle whose first decision is not its CycleOpened (never so)
                    now = self._opened_at(int(a))
                out[(int(a), int(b))] = (int(n), int(last) if last is not None else int(a), now)
        return out

    def rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of a read-only statement on the decision index (LogError when it fails)."""
        return self._rows(sql, params)

    def opened_at(self, cycle: int) -> int | None:
        """The virtual time (CycleOpened.now_ms) of `cycle`, None when the log does not hold it."""
        return self._opened_at(cycle)

    def _opened_at(self, cycle: int) -> int | None:
        sql, params = decision_query(cycle=cycle, types=("cycle.opened",), limit=1)
        for seq, tag, v, _key, body in self._rows(sql, params):
            ev = _decode(seq, tag, v, body, self._where)
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
        points |= {c for c, _ in binds} | {e.cycle for e in evictions} | {p.cycle for p in phases}
        events = self.events([s.seq for s in t.spans[-listed:]] + [e.seq for e in evictions])
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
                    message=_message(events.get(s.seq)),  # read for the listed spans only
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
            evictions=[_eviction(e, at.get(e.cycle, 0), events[e.seq]) for e in evictions],
            evictions_total=len(t.evictions),
            phases=[PhaseStep(cycle=p.cycle, at_ms=at.get(p.cycle, 0), phase=p.phase) for p in phases],
            phases_total=len(t.phases),
            listed=listed,
        )


def _decode(seq: int, tag: str, v: int, body: bytes, where: str) -> Any:
    try:
        return decode(tag, v, body)
    except CodecError as e:
        raise CorruptEventError(seq, str(e), where) from e


_DETAILED = ("decision.job_explained", "decision.podgroup_status")


def _detail(seq: int, ev: Any) -> str:
    """The index detail of an explanation or a status event (what migration 0004 indexes)."""
    if isinstance(ev, JobExplained):
        return explained_detail(ev.message, tuple(r.code for r in ev.reasons))
    if isinstance(ev, PodGroupStatusChanged):
        return ev.phase
    raise CorruptEventError(seq, f"expected an explanation or a PodGroup status, got {type(ev).__name__}")


def _message(ev: Any | None) -> str:
    return ev.message if isinstance(ev, JobExplained) else ""


def _eviction(e: Evicted, at_ms: int, ev: Any) -> EvictionStep:
    if not isinstance(ev, EvictDecided):
        raise CorruptEventError(e.seq, f"expected an eviction, got {type(ev).__name__}")
    return EvictionStep(
        cycle=e.cycle,
        at_ms=at_ms,
        pod=f"{ev.namespace}/{ev.name}",
        node=ev.node,
        action=ev.action,
        reason=ev.reason,
    )
