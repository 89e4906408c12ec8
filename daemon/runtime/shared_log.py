"""Leading on a shared PostgreSQL log: stand by until the lease is ours, keep it, hand it over.

Several replicas (`fumarole run --db postgresql://…`) share one log.  Each holds a `Leadership`
(store/pg_leadership.py) on it: a standby tries the lease every `lease/4` seconds (at most 0.5 s,
and at the moment the current lease expires, by the database's clock) and takes it once the
leader has not renewed it for `lease_duration` seconds (a crash, kill -9,
a pause, a lost network); it then starts exactly as a restarted daemon does, from the log (newest
snapshot plus the tail, the lockstep's position, the adapter resumed from the recorded facts),
so cycle numbering and the simulation continue where the old leader stopped.

The leader renews every `lease/3` seconds; a renewal that finds another epoch means it was taken
over (it could not reach the database, or was paused, for longer than the lease while a standby
could): the leader steps down at once.  That is good manners only: should a stale leader write
before it notices (a process paused past its lease and resumed), the database refuses the write
(its rows carry the old epoch; FencedError), which also makes it step down.  Stepping down stops
the leading section (cycles, writer, dispatcher, the adapter's work, the leader's API; nothing
more is written under the old epoch, and whatever was still in flight is refused), logs one
warning naming the new leader, and goes back to standing by: the read-only API follows the log
again and the replica may win a later term, which starts from the log exactly as a takeover does
(a fresh projection, the lockstep's position, a new adapter resumed from the recorded facts).
The process never exits for a lost term.  A clean stop releases the lease so a standby takes
over without waiting.

Riding out the database: the log retries a lost connection until the database answers again
(store/postgres.py), so a leader's appends and renewals wait through an outage and it keeps its
lease if nobody took it meanwhile (the fence is the epoch, not the expiry).  A standby that could
not reach the database gives the leader one lease of grace after it answers again before trying
to take over, so that after an outage longer than the lease the leader, renewing at once, keeps
its term instead of losing it to whichever replica reconnects first.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable

import anyio

from fumarole.store.log import FencedError, LogError
from fumarole.store.pg_leadership import Leadership, lease_state
from fumarole.store.postgres import PostgresEventLog

__all__ = ["IGNORE_LEASE_LOSS", "SharedLogLeader", "holder_name", "log_error_in", "refusal_in"]

log = logging.getLogger("fumarole.leader")

# Test-only: a leader that does not notice it lost the lease (to prove the database refuses it).
IGNORE_LEASE_LOSS = "FUMAROLE_TEST_IGNORE_LEASE_LOSS"


def holder_name() -> str:
    """This process's name in the lease: host, PID and a random suffix (unique per process)."""
    return f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(3)}"


def log_error_in(exc: BaseException) -> LogError | None:
    """The LogError in `exc` (itself or inside exception groups; a FencedError first), or None."""
    found = [e for e in _leaves(exc) if isinstance(e, LogError)]
    return next((e for e in found if isinstance(e, FencedError)), found[0] if found else None)


def refusal_in(exc: BaseException) -> FencedError | None:
    """The FencedError that stopped a leading section, when that is all that stopped it (every
    leaf of `exc` a LogError, one a FencedError: the other writes in flight failed with it); else
    None (something else failed too, which must not be mistaken for a lost term)."""
    leaves = _leaves(exc)
    if not all(isinstance(e, LogError) for e in leaves):
        return None
    return next((e for e in leaves if isinstance(e, FencedError)), None)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


class SharedLogLeader:
    """This replica's leadership of the shared log `event_log`."""

    def __init__(
        self, event_log: PostgresEventLog, lease_seconds: float, *, ignore_loss: bool = False
    ) -> None:
        self.leadership = Leadership(event_log, holder_name(), lease_seconds)
        self.leading = False
        self.lost = False
        self.ignore_loss = ignore_loss
        self.leader = ""  # the holder this replica last saw leading

    @property
    def epoch(self) -> int:
        return self.leadership.epoch

    async def wait_for_lease(self, stopping: Callable[[], bool], on_standby: Callable[[str], None]) -> bool:
        """Try the lease until it is ours (True) or `stopping()` (False)."""
        lease = self.leadership.lease_seconds
        pause = min(lease / 4, 0.5)
        announced = ""
        failing = ""  # the last failure while the database cannot be reached
        grace_until = 0.0  # after an outage: monotonic time before which the lease is not tried
        while not stopping():
            try:
                epoch = None
                if not failing and time.monotonic() >= grace_until:  # (after an outage: state first)
                    try:
                        epoch = await self.leadership.acquire()
                    except LogError:
                        epoch = None  # its answer may be lost: the state below tells
                state = await lease_state(self.leadership.log, retry=False)
            except LogError as e:  # the database is unreachable for now: keep trying
                if str(e) != failing and not self.leadership.log.outage.since:
                    log.warning("standing by: the shared log cannot be reached: %s", e)
                failing = str(e)
                await anyio.sleep(pause)
                continue
            if failing:
                failing = ""
                grace_until = time.monotonic() + lease
                log.info("standing by: the shared log answers again; the leader has one lease to renew")
            if epoch is None and self.leadership.adopt(state):
                epoch = state.epoch
            if epoch is not None:
                self.leading = True
                self.leader = self.leadership.holder
                log.info("leading the shared log", extra={"epoch": epoch, "holder": self.leader})
                return True
            self.leader = state.holder
            if state.holder != announced:
                announced = state.holder
                on_standby(f"standing by: {state.holder} leads the shared log (epoch {state.epoch})")
            # Try again when the lease would expire if it is not renewed (at most `pause` from now),
            # so a lost leader is replaced within one lease of its last renewal.
            wake = max(0.005, state.expires_in + 0.005, grace_until - time.monotonic())
            await anyio.sleep(min(pause, wake))
        return False

    async def keep_lease(self, on_lost: Callable[[], Awaitable[None] | None]) -> None:
        """Renew every lease/3 seconds; on losing the lease call `on_lost` (unless told to ignore it)."""
        interval = self.leadership.lease_seconds / 3
        while True:
            await anyio.sleep(interval)
            try:
                if await self.leadership.renew():
                    continue
                state = await lease_state(self.leadership.log)
            except LogError as e:  # not an outage (the log waits those out): say so, try again
                log.warning("cannot renew the lease of the shared log: %s", e)
                continue
            if self.ignore_loss:  # (test-only: carry on; the database refuses the next write)
                return
            self.leading = False
            self.leader = state.holder
            self.lost = True
            res = on_lost()
            if res is not None:
                await res
            return

    async def stepped_down(self) -> tuple[str, int]:
        """After a lost term: standing by again (`leading`, `lost` reset); who leads now and in
        which epoch (waiting for the database if it cannot be reached)."""
        self.leading = False
        self.lost = False
        try:
            state = await lease_state(self.leadership.log)
        except LogError:  # (a second signal gave up on a lost database)
            return self.leader or "another replica", self.epoch + 1
        self.leader = state.holder
        return state.holder, state.epoch

    async def release(self) -> None:
        """Hand the lease over now (a clean stop)."""
        if self.leading:
            self.leading = False
            await self.leadership.release()
