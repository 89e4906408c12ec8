"""Leadership terms on a shared PostgreSQL log: a lease row with an epoch, the fencing token of appends.

One row (`leadership`) holds the current epoch, its holder and the lease's expiry, all judged by
the database's clock (replicas' clocks never matter).  `acquire` takes the lease when it is free or
expired, incrementing the epoch and recording the term in `leader_terms` (epoch, holder, start,
the first seq of the term) in the same transaction, and sets the log's epoch: from then on every
write of that log carries it, and the database refuses it once another replica has taken over
(store/postgres.py, migration 0001).  `renew` extends the lease while the epoch is still ours;
`release` lets a replica stopping cleanly hand over at once.

A lost connection: `renew` and `release` are run again by the log (they are idempotent); `acquire`
is not (a try whose answer was lost may have taken the lease), so it fails and the caller reads the
lease state, whose holder tells whether that try took it (`Leadership.adopt`).
"""

from __future__ import annotations

from dataclasses import dataclass

from fumarole.store.log import LogError
from fumarole.store.postgres import PostgresEventLog

__all__ = ["Leadership", "LeaseState", "Term", "leader_terms", "lease_state"]

_ACQUIRE = """
WITH taken AS (
    UPDATE leadership
       SET epoch = epoch + 1, holder = $1,
           expires_at = clock_timestamp() + make_interval(secs => $2)
     WHERE id = 1 AND expires_at <= clock_timestamp()
 RETURNING epoch, holder
)
INSERT INTO leader_terms (epoch, holder, started_at, first_seq)
SELECT epoch, holder, clock_timestamp(), (SELECT last_seq + 1 FROM log_head WHERE id = 1) FROM taken
RETURNING epoch
"""
_LOCK_NOT_AVAILABLE = "55P03"
_RENEW = (
    "UPDATE leadership SET expires_at = clock_timestamp() + make_interval(secs => $2) "
    "WHERE id = 1 AND epoch = $1 RETURNING epoch"
)
_RELEASE = (
    "UPDATE leadership SET expires_at = '1970-01-01 00:00:00+00' WHERE id = 1 AND epoch = $1 RETURNING epoch"
)
_STATE = (
    "SELECT epoch, holder, extract(epoch FROM expires_at - clock_timestamp())::float8 "
    "FROM leadership WHERE id = 1"
)


@dataclass(frozen=True)
class LeaseState:
    epoch: int
    holder: str
    expires_in: float  # seconds until the lease expires (negative: expired)


@dataclass(frozen=True)
class Term:
    epoch: int
    holder: str
    first_seq: int


class Leadership:
    """This replica's side of the lease on `log` (its holder name is unique per process)."""

    def __init__(self, log: PostgresEventLog, holder: str, lease_seconds: float) -> None:
        if lease_seconds <= 0:
            raise ValueError("lease_seconds: must be positive")
        self.log = log
        self.holder = holder
        self.lease_seconds = float(lease_seconds)

    @property
    def epoch(self) -> int:
        return self.log.epoch

    async def acquire(self) -> int | None:
        """Take the lease if it is free or expired; the new epoch (the log now writes in it), or None."""
        try:  # not retried: a try whose answer was lost is seen in the lease state (holder = us)
            rows = await self.log.execute_write(_ACQUIRE, self.holder, self.lease_seconds, retry=False)
        except LogError as e:
            if getattr(e.__cause__, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
                return None  # the leader is inside an append (its session ends if it is paused there)
            raise
        if not rows:
            return None
        self.log.epoch = int(rows[0][0])
        return self.log.epoch

    def adopt(self, state: LeaseState) -> bool:
        """Whether `state` says this replica holds a live lease (an acquire whose answer was lost
        took it); if so the log writes in that epoch from now on."""
        if state.holder == self.holder and state.expires_in > 0:
            self.log.epoch = state.epoch
            return True
        return False

    async def renew(self) -> bool:
        """Extend the lease; False when another replica has taken over (our writes are refused now)."""
        if not self.log.epoch:
            return False
        rows = await self.log.execute_write(_RENEW, self.log.epoch, self.lease_seconds)
        return bool(rows)

    async def release(self) -> None:
        """Let the lease expire now (a clean stop): a standby takes over without waiting."""
        if self.log.epoch:
            await self.log.execute_write(_RELEASE, self.log.epoch)


async def lease_state(log: PostgresEventLog, *, retry: bool = True) -> LeaseState:
    """The lease as the database sees it now (`retry=False`: a lost database fails at once)."""
    rows = await log.fetch(_STATE, retry=retry)
    epoch, holder, left = rows[0]
    return LeaseState(int(epoch), str(holder), float(left))


async def leader_terms(log: PostgresEventLog) -> list[Term]:
    """Every leadership term so far, oldest first."""
    rows = await log.fetch("SELECT epoch, holder, first_seq FROM leader_terms ORDER BY epoch")
    return [Term(int(e), str(h), int(s)) for e, h, s in rows]
