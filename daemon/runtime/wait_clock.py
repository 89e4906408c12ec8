"""How long each waiting job has waited, in the log's virtual time (never the wall clock).

A job waits from the cycle of its first explanation (`decision.job_explained` with reasons) until
the cycle of an empty one (it no longer waits).  `WaitClock` folds the decision index's
explanation rows incrementally (only the rows after the last sequence it read, keyset by seq),
keeping each waiting job's first cycle; `waited_ms(job, last_cycle)` is then the virtual time
(CycleOpened.now_ms) of the log's last cycle minus that of the first cycle of the current wait:
0 for a job that started waiting in the last cycle, None for a job that does not wait.  The
cycles' times are read once each (decision_cycles -> CycleOpened) and kept.

The first call reads every explanation row of the index once (a keyset scan by seq, in pages);
later calls only the rows appended since.  A row indexed before migration 0004 has no detail: it
is taken as waiting (such logs predate the dashboard's wait column; its figure may then start
early for a job that stopped and started waiting again).
"""

from __future__ import annotations

from typing import Protocol

from fumarole.store.index import explained_codes

__all__ = ["WaitClock"]

_EXPLAINED = (
    "SELECT seq, cycle, job, detail FROM decision_index "
    "WHERE seq > ? AND seq <= ? AND type = 'decision.job_explained' ORDER BY seq LIMIT ?"
)
_PAGE = 20000


class IndexRows(Protocol):
    """What the clock asks of the decision index (daemon/runtime/job_history.py JobHistoryReader)."""

    def rows(self, sql: str, params: list[int]) -> list[tuple[int, int, str, str | None]]: ...

    def opened_at(self, cycle: int) -> int | None: ...


class WaitClock:
    def __init__(self, index: IndexRows) -> None:
        self._index = index
        self._read = 0  # the last seq folded
        self._since: dict[str, int] = {}  # job -> first cycle of its current wait
        self._times: dict[int, int] = {}  # cycle -> CycleOpened.now_ms

    def advance(self, upto_seq: int) -> None:
        """Fold the explanations indexed after the last read through `upto_seq`."""
        while self._read < upto_seq:
            rows = self._index.rows(_EXPLAINED, [self._read, upto_seq, _PAGE])
            for _seq, cycle, job, detail in rows:
                waiting = detail is None or explained_codes(detail) is not None
                if not waiting:
                    self._since.pop(job, None)
                elif job not in self._since:
                    self._since[job] = int(cycle)
            if len(rows) < _PAGE:
                self._read = upto_seq
            else:
                self._read = int(rows[-1][0])

    def cycle_ms(self, cycle: int) -> int | None:
        """The virtual time of `cycle` (None when the log does not hold it)."""
        at = self._times.get(cycle)
        if at is None:
            at = self._index.opened_at(cycle)
            if at is not None:
                self._times[cycle] = at
        return at

    def first_cycle(self, job: str) -> int | None:
        """The cycle the job's current wait began in (None when it does not wait)."""
        return self._since.get(job)

    def waited_ms(self, job: str, last_cycle: int) -> int | None:
        """Virtual milliseconds from the start of the job's current wait to the log's last cycle."""
        first = self._since.get(job)
        if first is None:
            return None
        start, end = self.cycle_ms(first), self.cycle_ms(last_cycle)
        if start is None or end is None:
            return None
        return max(0, end - start)
