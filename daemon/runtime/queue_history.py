"""Queue history over cycles from the decision index: allocated, deserved, share and waiting jobs.

`QueueHistoryReader.history(from_cycle, to_cycle, points, last_cycle)` answers GET
/v1/queue-history.  Two kinds of decision carry what it needs, both written only when they change:

* `decision.queue_figures` (QueueFiguresRecorded): every queue's figures as the queue-share plugin
  saw them in a cycle; the figures at cycle c are those of the last such event at or before c;
* `decision.job_explained` (JobExplained): the index row's `detail` says whether the job waits
  ('+codes') or no longer does ('-') and its `queue` column names the queue; the waiting jobs of a
  queue at cycle c are the jobs whose last explanation at or before c says they wait.

The reader keeps a summary of both, built from the index rows alone (no event body read): the
cycles and seqs of the figure events, and per queue the cycles at which its waiting count changed
with the new count.  Each call first folds the index rows appended since the last call (a cursor
on seq), so the first answer on a big log reads its index once and later answers read only what is
new.  A range of cycles is then downsampled to at most `points` sample cycles, evenly spaced,
each taking the state as of that cycle (the series are step functions, so a sample is exact, not an
average): a bisection per sample and queue, and one decode per distinct figure event sampled
(decoded figures are kept in a small cache).
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from fumarole.api.types import QueueHistory, QueueSeries
from fumarole.daemon.scheduler.model.quantity import parse_quantity
from fumarole.store.codec import CodecError, decode
from fumarole.store.events import QueueFigures, QueueFiguresRecorded
from fumarole.store.index import open_readonly
from fumarole.store.log import CorruptEventError, LogError

__all__ = ["QueueHistoryReader", "sample_cycles"]

_PAGE = 50_000
_CACHE = 4096  # decoded figure events kept
_FIGURES = "decision.queue_figures"
_EXPLAINED = "decision.job_explained"
_ROWS = (
    "SELECT seq, cycle, type, job, queue, detail FROM decision_index "
    "WHERE seq > ? AND type IN (?, ?) ORDER BY seq LIMIT ?"
)


def sample_cycles(first: int, last: int, points: int) -> list[int]:
    """At most `points` cycles from `first` to `last` (both included when points > 1), evenly spaced,
    increasing, without repeats; every cycle when the range holds no more than `points`."""
    if last < first or points < 1:
        return []
    span = last - first + 1
    if span <= points:
        return list(range(first, last + 1))
    if points == 1:
        return [last]
    out: list[int] = []
    for k in range(points):
        c = first + (k * (span - 1)) // (points - 1)
        if not out or c != out[-1]:
            out.append(c)
    return out


def _number(q: str) -> float | None:
    try:
        return float(parse_quantity(q))
    except (ValueError, ArithmeticError):
        return None


class _Waiting:
    """One queue's waiting-job count as change points (cycle, count), cycles increasing."""

    __slots__ = ("counts", "cycles", "now")

    def __init__(self) -> None:
        self.cycles: list[int] = []
        self.counts: list[int] = []
        self.now = 0

    def change(self, cycle: int, delta: int) -> None:
        self.now += delta
        if self.cycles and self.cycles[-1] == cycle:
            self.counts[-1] = self.now
        else:
            self.cycles.append(cycle)
            self.counts.append(self.now)

    def at(self, cycle: int) -> int:
        i = bisect_right(self.cycles, cycle) - 1
        return self.counts[i] if i >= 0 else 0


class QueueHistoryReader:
    """A synchronous read-only connection and the folded summary of the log's queue decisions."""

    def __init__(self, path: str, *, mmap_bytes: int = 1 << 30, busy_timeout_ms: int = 5000) -> None:
        self._conn = open_readonly(path, mmap_bytes=mmap_bytes, busy_timeout_ms=busy_timeout_ms)
        self.path = path
        self._where = "" if path.startswith(("postgresql://", "postgres://")) else path  # no credentials
        self._cursor = 0
        self._fig_cycles: list[int] = []
        self._fig_seqs: list[int] = []
        self._waiting_job: dict[str, str] = {}  # job -> the queue it waits in
        self._waiting: dict[str, _Waiting] = {}
        self._decoded: OrderedDict[int, Mapping[str, QueueFigures]] = OrderedDict()

    def close(self) -> None:
        self._conn.close()

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise LogError(f"{self.path}: queue history lookup failed: {e}") from e

    # ------------------------------------------------------------------------- the summary

    def catch_up(self) -> int:
        """Fold the index rows appended since the last call; returns how many were read."""
        read = 0
        while True:
            rows = self._rows(_ROWS, (self._cursor, _FIGURES, _EXPLAINED, _PAGE))
            for seq, cycle, tag, job, queue, detail in rows:
                if tag == _FIGURES:
                    self._fig_cycles.append(int(cycle))
                    self._fig_seqs.append(int(seq))
                elif job is not None:
                    self._explained(int(cycle), job, queue or "", detail)
            read += len(rows)
            if rows:
                self._cursor = int(rows[-1][0])
            if len(rows) < _PAGE:
                return read

    def _explained(self, cycle: int, job: str, queue: str, detail: str | None) -> None:
        waits = detail is None or detail != "-"  # a row indexed before 0004 has no detail: it waits
        before = self._waiting_job.get(job)
        if before is not None and (not waits or before != queue):
            del self._waiting_job[job]
            self._waiting[before].change(cycle, -1)
        if waits and before != queue:
            self._waiting_job[job] = queue
            self._waiting.setdefault(queue, _Waiting()).change(cycle, +1)

    def _figures(self, seq: int) -> Mapping[str, QueueFigures]:
        got = self._decoded.get(seq)
        if got is not None:
            self._decoded.move_to_end(seq)
            return got
        rows = self._rows("SELECT type, v, body FROM events WHERE seq = ?", (seq,))
        if not rows:
            raise CorruptEventError(seq, "indexed decision without its event row")
        tag, v, body = rows[0]
        try:
            ev = decode(tag, v, body)
        except CodecError as e:
            raise CorruptEventError(seq, str(e), self._where) from e
        figures = ev.queues if isinstance(ev, QueueFiguresRecorded) else {}
        self._decoded[seq] = figures
        if len(self._decoded) > _CACHE:
            self._decoded.popitem(last=False)
        return figures

    # ------------------------------------------------------------------------- answering

    def history(
        self, *, from_cycle: int | None, to_cycle: int | None, points: int, last_cycle: int
    ) -> QueueHistory:
        """The series of every queue over [from_cycle, to_cycle] (defaults: the log's first and last
        cycle), at most `points` samples."""
        self.catch_up()
        first = 1 if from_cycle is None else max(1, from_cycle)
        last = last_cycle if to_cycle is None else min(to_cycle, last_cycle)
        cycles = sample_cycles(first, last, points)
        at = [bisect_right(self._fig_cycles, c) - 1 for c in cycles]
        samples = [self._figures(self._fig_seqs[i]) if i >= 0 else {} for i in at]
        names = sorted({q for s in samples for q in s} | set(self._waiting))
        queues: list[QueueSeries] = []
        for name in names:
            allocated: dict[str, list[float | None]] = {}
            deserved: dict[str, list[float | None]] = {}
            share: list[float | None] = []
            for k, s in enumerate(samples):
                f = s.get(name)
                share.append(f.share if f is not None and (f.deserved or f.allocated) else None)
                for out, field in ((allocated, "allocated"), (deserved, "deserved")):
                    values = getattr(f, field) if f is not None else {}
                    for r, q in values.items():
                        out.setdefault(r, [None] * len(samples))[k] = _number(q)
            w = self._waiting.get(name)
            waiting = [w.at(c) for c in cycles] if w is not None else [0] * len(cycles)
            queues.append(
                QueueSeries(
                    name=name,
                    allocated=dict(sorted(allocated.items())),
                    deserved=dict(sorted(deserved.items())),
                    share=share,
                    waiting=waiting,
                )
            )
        return QueueHistory(
            from_cycle=first,
            to_cycle=max(last, 0),
            last_cycle=last_cycle,
            cycles=cycles,
            recorded=max(0, bisect_right(self._fig_cycles, last) - bisect_right(self._fig_cycles, first - 1)),
            queues=queues,
        )
