"""The session loop for a live cluster: a wall-clock timer, cycles over whatever the watches brought.

With a live adapter (`adapter.live`, the Kubernetes adapter) there is no lockstep: the adapter's
listing is appended first (reconciled with the log, see daemon/adapters/kubernetes/source.py),
its watches then append changes as they come, and every `schedule_period` wall seconds the loop
reads the wall clock once, appends it as `ClockAdvanced(at_ms)` (so the cycle's snapshot, its
`cycle.opened.now_ms` and `fumarole replay` all see the same "now"), and runs a cycle.  The
dispatcher forwards the cycle's decisions as soon as they are committed; the loop does not wait
for them (the projection's bind overlays keep the next cycle from binding a pod twice).

A cycle is skipped when nothing but the cycles' own events (clock advances, cycle markers,
decisions) was appended after the watermark of the previous cycle and that cycle decided
nothing (an idle cluster does not fill the log with empty cycles), but one runs at least every
`IDLE_REFRESH_S` so that time-dependent plugins see time pass.  A fact folded while a cycle ran
comes after its watermark, so the next tick runs a cycle for it.

With leader election (`adapter.leading`), a standby keeps listing and watching but runs no
cycle; on becoming the leader it relists (reconciled, so only what changed is logged) before its
first cycle.  The election starts before the listing (a restarted replica renews its own lease
while it lists, and the dispatcher's re-forwarded decisions, which wait for the lease, go out
sooner); before each cycle the adapter is told the first seq the cycle's decisions may take
(`adapter.deciding`), which stamps them with the lease epoch they are made in.

A SIGTERM/SIGINT during the listing stops it at once (exit 0, nothing appended); afterwards the
loop finishes its running cycle, lets the dispatcher forward what it decided, and returns.
"""

from __future__ import annotations

import contextlib
import logging
import time
import typing
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from fumarole.daemon.runtime.cycle import CycleEvent
from fumarole.store.events import ClockAdvanced, ConfigurationRecorded, ObservedEvent

if TYPE_CHECKING:
    from fumarole.daemon.adapters.base import LiveCluster
    from fumarole.daemon.runtime.dispatch import Dispatcher
    from fumarole.daemon.runtime.session_loop import CycleRunner, CycleSummary
    from fumarole.daemon.runtime.settings import Settings
    from fumarole.daemon.runtime.systemd import Notifier
    from fumarole.daemon.runtime.writer import Writer


class RunCounts(Protocol):
    """The run's tallies the loop reports when it stops."""

    cycles: int
    binds: int
    evictions: int


class LiveService(Protocol):
    """What the live loop asks of the daemon that runs it (daemon/runtime/service.py `Service`):
    its settings, its stop request and start-up waits, its readiness and systemd notifier, its
    output line, its tallies and snapshots."""

    settings: Settings
    stop_requested: bool
    ready: bool
    notifier: Notifier

    @property
    def stats(self) -> RunCounts: ...

    def stoppable(self) -> contextlib.AbstractContextManager[anyio.CancelScope]: ...

    async def wait_for_stop(self) -> None: ...

    def say(self, line: str) -> None: ...

    def account(self, s: CycleSummary) -> None: ...

    async def save_snapshot(self, event_log: Any, projection: Any) -> None: ...


log = logging.getLogger("fumarole.live")

IDLE_REFRESH_S = 60.0
OWN_EVENTS = (ClockAdvanced, ConfigurationRecorded, *typing.get_args(CycleEvent))


class CycleDue:
    """Whether the live loop's next tick runs a cycle (see the module notes).

    `note(seq, event)` is a writer listener: it remembers the last seq of an event the cycles did
    not write themselves (a fact, an outcome).  After a cycle, `ran(watermark, decided, at)`; a
    cycle is due unless the last one decided nothing and no such event came after its watermark,
    and at least every `IDLE_REFRESH_S` regardless.  (Comparing with the projection's seq after
    the cycle, as before, missed a fact folded while an idle cycle ran: it waited for the refresh.)
    """

    def __init__(self) -> None:
        self.changed = 0
        self.watermark = -1  # -1: no cycle yet (or a fresh listing): due
        self.idle = False
        self.at = 0.0

    def note(self, seq: int, event: Any) -> None:
        if not isinstance(event, OWN_EVENTS):
            self.changed = seq

    def ran(self, watermark: int, *, decided: bool, at: float) -> None:
        self.watermark, self.idle, self.at = watermark, not decided, at

    def reset(self) -> None:
        self.watermark = -1

    def due(self, now: float) -> bool:
        quiet = self.watermark >= 0 and self.idle and self.changed <= self.watermark
        return not quiet or now - self.at >= IDLE_REFRESH_S


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def run_live(
    service: LiveService,
    adapter: LiveCluster,
    writer: Writer,
    dispatcher: Dispatcher,
    runner: CycleRunner,
    event_log: Any,
) -> int:
    """List, watch and run cycles on a timer until SIGTERM/SIGINT; returns the exit code (0)."""
    period = service.settings.schedule_period

    async def submit(events: list[ObservedEvent], keys: list[str | None]) -> None:
        await writer.submit(events, idem_keys=keys)

    due = CycleDue()
    writer.event_listeners.append(due.note)

    async with anyio.create_task_group() as tg:
        tg.start_soon(adapter.run_election)
        with service.stoppable() as listing:
            listed = await adapter.list_all()
        stopped_listing = (
            listing.cancelled_caught or service.stop_requested
        )  # (no narrowing: a signal sets it)
        if stopped_listing:
            tg.cancel_scope.cancel()
            service.say("stopped before the cluster was listed")
            return 0
        events, keys = listed
        await submit(events, keys)
        log.info("cluster listed: %d change(s) appended", len(events))
        service.ready = True
        service.notifier.ready("listed the cluster; watching")
        tg.start_soon(adapter.watch, submit)
        next_tick = time.monotonic()
        was_leading = True  # the listing above is fresh
        while not service.stop_requested:
            delay = next_tick - time.monotonic()
            if delay > 0:
                with anyio.move_on_after(delay):
                    await service.wait_for_stop()
                continue
            next_tick = max(next_tick + period, time.monotonic())
            if not adapter.leading:
                was_leading = False
                continue
            if not was_leading:
                log.info("leading now: relisting before the first cycle")
                await submit(*await adapter.list_all())
                was_leading = True
                due.reset()
            if not due.due(time.monotonic()):
                continue
            await writer.submit([ClockAdvanced(at_ms=max(wall_ms(), runner.projection.now_ms))])
            adapter.deciding(runner.projection.seq + 1)
            summary = await runner.run_cycle(writer)
            service.account(summary)
            await service.save_snapshot(event_log, runner.projection)
            due.ran(summary.watermark, decided=summary.decided, at=time.monotonic())
            if summary.decided:
                service.say(
                    f"cycle={runner.cycle} binds+={summary.binds} evictions+={summary.evictions} "
                    f"bound={summary.bound} pending={summary.pending} forwarded={dispatcher.forwarded}"
                )
        # Let the dispatcher forward what the last cycle decided (the rest goes out after a restart).
        with anyio.move_on_after(10):
            await dispatcher.wait_until(runner.projection.seq)
        tg.cancel_scope.cancel()
    service.say(
        f"stopped: {service.stats.cycles} cycles this run, {service.stats.binds} binds, "
        f"{service.stats.evictions} evictions decided; {dispatcher.forwarded} forwarded"
    )
    return 0
