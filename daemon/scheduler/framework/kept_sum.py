"""A sum of per-job resource figures kept from one session to the next, exactly.

Plugins that add up a figure of every job at session open (overcommit's inqueue reservations)
keep the sum and each job's part: a job's part is re-derived only when the snapshot holds another
JobInfo object for it (the freeze builds a new one for a changed job; `Session.kept_jobs`) or its
`tag` (what else the part depends on, such as the phase) differs; the old part is subtracted and
the new one added, and the parts of jobs that left are subtracted.

Exactly the sum a cold open adds job by job, or not used (`usable`):

* every part is non-negative and integer-valued on every dimension (`exact`), and every total
  below 2**53, so additions and subtractions are exact and their order does not matter (every
  request and minResources quantity a manifest gives is such an integer: milli-units and bytes,
  rounded up at decode);
* a cold sum holds a scalar name (even at 0) when some part holds it: the sum counts, per name,
  the parts that hold it and drops the name when none is left;
* a cold sum lists its scalar names in the order the jobs (in uid order) brought them, a kept
  one possibly in another: it is usable only while it holds at most one scalar name.

When it is not usable, the owner sums cold and drops it.  plugins/proportion_sums.py applies the
same rules to proportion's four per-queue sums.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from fumarole.daemon.scheduler.model.resources import Resource

__all__ = ["EXACT_LIMIT", "KeptSum", "add_counted", "below_limit", "exact"]

EXACT_LIMIT = float(2**53)


def exact(r: Resource) -> bool:
    """Every dimension a non-negative integer-valued number (sums of such are exact below 2**53)."""
    if not (r.cpu >= 0 and float(r.cpu).is_integer() and r.memory >= 0 and float(r.memory).is_integer()):
        return False
    return all(v >= 0 and float(v).is_integer() for v in r.scalars.values())


def below_limit(r: Resource) -> bool:
    """Every dimension of a sum of exact figures still below 2**53 (so each addition was exact)."""
    return r.cpu < EXACT_LIMIT and r.memory < EXACT_LIMIT and all(v < EXACT_LIMIT for v in r.scalars.values())


@dataclass(slots=True, frozen=True)
class _Part:
    origin: object
    tag: object
    value: Resource | None


@dataclass(slots=True)
class KeptSum:
    """The sum of the parts, per scalar name the number of parts holding it, and the parts by key."""

    total: Resource = field(default_factory=Resource)
    names: dict[str, int] = field(default_factory=dict)
    parts: dict[str, _Part] = field(default_factory=dict)

    def holds(self, key: str, origin: object, tag: object) -> bool:
        """Whether the part of `key` was derived from `origin` (the same object) with `tag`."""
        part = self.parts.get(key)
        return part is not None and part.origin is origin and part.tag == tag

    def put(self, key: str, origin: object, tag: object, value: Resource | None) -> None:
        """Make `value` (a copy is kept; None: nothing) the part of `key`."""
        old = self.parts.get(key)
        if old is not None and old.value is not None:
            self._change(old.value, -1)
        if value is not None:
            value = value.clone()
            self._change(value, 1)
        self.parts[key] = _Part(origin, tag, value)

    def keep_only(self, keys: Iterable[str]) -> None:
        """Subtract the parts of every key not in `keys` (the jobs that left)."""
        keep = set(keys)
        if len(keep) == len(self.parts) and keep.issuperset(self.parts):
            return
        for key in sorted(self.parts.keys() - keep):
            old = self.parts.pop(key)
            if old.value is not None:
                self._change(old.value, -1)

    def usable(self) -> bool:
        """Exact (below 2**53) and at most one scalar name (see the module notes)."""
        return len(self.names) <= 1 and below_limit(self.total)

    def _change(self, r: Resource, sign: int) -> None:
        add_counted(self.total, self.names, r, sign)


def add_counted(total: Resource, names: dict[str, int], r: Resource, sign: int) -> None:
    """Add (`sign` 1) or subtract (-1) `r` to `total`, counting in `names` per scalar name the
    parts holding it: a name leaves the total with the last part that held it."""
    total.cpu += sign * r.cpu
    total.memory += sign * r.memory
    if r.scalars:
        s = total.scalars
        for n, v in r.scalars.items():
            left = names.get(n, 0) + sign
            if left:
                names[n] = left
                s[n] = s.get(n, 0) + sign * v
            else:
                del names[n]
                del s[n]
