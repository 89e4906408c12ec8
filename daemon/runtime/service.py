"""The daemon service: one anyio task group running writer, dispatcher, session loop and API.

Start-up: open the SQLite log (migrations applied), rebuild the projection from the newest
snapshot plus the tail, resume or start the adapter, then run cycles.  With the simulator the
session loop runs in lockstep with the virtual clock (advance → fold → cycle → dispatch →
repeat) until the workload drains, each step chosen by `fumarole.daemon.runtime.lockstep` from the log
(so a restart takes the lockstep up exactly where the log stops); `serve` keeps the API up
afterwards.  SIGTERM/SIGINT finish the running cycle, let the dispatcher forward its
decisions, flush and close the log (WAL checkpointed), and exit 0.

Signals are handled from the first moment `fumarole run` runs to its exit (`hold_signals`, then
the event loop's handlers for the whole of `Service.run`): a signal during the start-up phases
that wait on the outside world (loading credentials, waiting for the API server, listing the
cluster; marked `stoppable()`) stops them at once; later it asks the loops to stop after the
running cycle.  A second signal cancels the running work at once (cleanups still run).  Either
way the exit status is 0 and nothing prints a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from fumarole.daemon.adapters.base import LiveCluster
from fumarole.daemon.runtime import heap
from fumarole.daemon.runtime.conf_watch import ConfWatcher
from fumarole.daemon.runtime.dispatch import Dispatcher
from fumarole.daemon.runtime.fault_injection import CrashAfterCommits, FaultInjection
from fumarole.daemon.runtime.listen import ListenError, bind_listen
from fumarole.daemon.runtime.live_loop import run_live
from fumarole.daemon.runtime.lockstep import TRACKED_TYPES, LockstepTracker, Step
from fumarole.daemon.runtime.session_loop import CycleRunner, CycleSummary
from fumarole.daemon.runtime.settings import Settings, split_listen
from fumarole.daemon.runtime.shared_log import IGNORE_LEASE_LOSS, SharedLogLeader, refusal_in
from fumarole.daemon.runtime.systemd import Notifier
from fumarole.daemon.runtime.writer import Writer
from fumarole.store.disk import check_writable
from fumarole.store.events import DECISIONS, BindDecided, EvictDecided
from fumarole.store.lock import LogLockedError, WriterLock, check_unlocked
from fumarole.store.log import FencedError
from fumarole.store.postgres import PostgresEventLog, redact_dsn
from fumarole.store.sqlite import SqliteEventLog

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("fumarole.service")


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_HELD: list[int] = []  # signals received while no event loop handled them (see hold_signals)


def hold_signals() -> None:
    """Until `Service.run` handles them (and after it returned): a SIGTERM/SIGINT is remembered, not
    fatal (no KeyboardInterrupt, no death by signal); `Service.run` acts on one received before it."""

    def remember(signum: int, _frame: Any) -> None:
        _HELD.append(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, remember)


def held_signal() -> bool:
    """Whether a SIGTERM/SIGINT came while `hold_signals` held them."""
    return bool(_HELD)


class ServiceError(RuntimeError):
    """The service cannot start or continue (bad settings, adapter unavailable, horizon passed)."""


@dataclass(slots=True)
class RunStats:
    cycles: int = 0
    binds: int = 0
    evictions: int = 0
    evictions_by_action: Counter[str] = field(default_factory=Counter)
    pipelined: int = 0
    cycle_seconds: float = 0.0
    started_wall: float = field(default_factory=time.monotonic)
    last: CycleSummary | None = None


class Service:
    def __init__(
        self,
        settings: Settings,
        *,
        tracer_provider: TracerProvider | None = None,
        notifier: Notifier | None = None,
        out: TextIO | None = None,
    ) -> None:
        self.settings = settings
        self.tracer_provider = tracer_provider
        self.notifier = notifier or Notifier.from_env()
        self.out = out or sys.stdout
        self.stats = RunStats()
        self.stop_requested = False
        self.ready = False
        self.listen_address: tuple[str, int] | None = None
        self._last_progress = 0.0
        self._snapshot_seq = 0
        self._stop_ev = anyio.Event()
        self._stoppable: list[anyio.CancelScope] = []  # start-up waits a first signal cancels
        self._hard: list[anyio.CancelScope] = []  # what a second signal cancels (the outermost)
        self.faults = FaultInjection()
        self.adapter: Any = None
        self.shared: SharedLogLeader | None = None  # with --db postgresql://…: this replica's leadership
        self._conf: ConfWatcher | None = None  # the configuration in force, once checked
        self._runner: CycleRunner | None = None  # the cycles, once the log is open
        self._pg_log: PostgresEventLog | None = None  # the shared log (a second signal stops its retries)

    # ------------------------------------------------------------------ start-up
    def _make_adapter(self) -> Any:
        s = self.settings
        if s.adapter == "kubernetes":
            try:
                from fumarole.daemon.adapters.kubernetes import KubernetesCluster, LeaseSettings
            except ImportError as e:
                raise ServiceError(
                    "--adapter kubernetes needs the 'kubernetes' extra "
                    f"(pip install 'fumarole[kubernetes]'): {e}"
                ) from None
            lease = (
                LeaseSettings(
                    name=s.lease_name,
                    namespace=s.lease_namespace,
                    duration=s.lease_duration,
                    identity=s.lease_identity,
                    identity_dir=s.data_dir,
                )
                if s.leader_elect
                else None
            )
            from fumarole.daemon.adapters.kubernetes.metrics import MetricsConfError, metrics_settings

            try:
                metrics = (
                    metrics_settings(self._conf.active.conf.metrics, self._conf.source)
                    if self._conf is not None
                    else None
                )
            except MetricsConfError as e:
                raise ServiceError(str(e)) from None
            return KubernetesCluster(
                metrics=metrics,
                kubeconfig=s.kubeconfig,
                scheduler_names=s.scheduler_names,
                concurrency=s.kube_concurrency,
                concurrency_max=s.kube_concurrency_max,
                schedule_period=s.schedule_period,
                lease=lease,
            )
        from fumarole.daemon.adapters.simulator import Simulator

        period_ms = round(s.schedule_period * 1000)
        if not s.cluster and not s.workload:
            return Simulator.bundled(period_ms=period_ms)
        if not (s.cluster and s.workload):
            raise ServiceError(
                "the simulator needs both --cluster and --workload (or neither: the bundled sample)"
            )
        return Simulator.from_files(s.cluster, s.workload, period_ms=period_ms)

    async def run(self) -> int:
        """The daemon to its end (see the module notes); its exit status."""
        loop = asyncio.get_running_loop()
        with anyio.CancelScope() as outer:
            self._hard.append(outer)
            for sig in STOP_SIGNALS:
                loop.add_signal_handler(sig, self._on_signal, sig)
            try:
                if _HELD:
                    self._on_signal(_HELD[-1])
                return await self._run()
            finally:
                for sig in STOP_SIGNALS:
                    loop.remove_signal_handler(sig)
                hold_signals()
        self.say("stopped at once (second signal)")
        return 0

    async def _run(self) -> int:
        s = self.settings
        # Every check comes before anything is created: bad input, a data directory another
        # daemon holds or a port in use change nothing on disk.
        conf = self._conf = ConfWatcher(s.scheduler_conf or None, strict=s.strict)
        adapter = self.adapter = self._make_adapter()
        if not isinstance(adapter, LiveCluster):
            return await self._run_checked(conf, adapter)
        try:
            with self.stoppable() as connecting:
                await self._connect(adapter)
            if connecting.cancelled_caught:
                self.say("stopped before the start-up checks were done")
                return 0
            return await self._run_checked(conf, adapter)
        finally:
            # (after a lost term of a shared log, the adapter is the one built for the next term)
            if isinstance(self.adapter, LiveCluster):
                with anyio.CancelScope(shield=True):
                    await self.adapter.close()

    async def _run_checked(self, conf: ConfWatcher, adapter: Any) -> int:
        s = self.settings
        try:
            self.faults = FaultInjection.from_env(os.environ)
        except ValueError as e:
            raise ServiceError(str(e)) from None
        if s.db:
            return await self._run_shared(conf, adapter)
        try:
            check_unlocked(s.db_path)
        except LogLockedError as e:
            raise ServiceError(_in_use(s.data_dir, e)) from None
        api_socket = self._bind_api() if s.api else None
        try:
            try:
                Path(s.data_dir).mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise ServiceError(
                    f"data directory {s.data_dir}: cannot create it: {e.strerror or e}"
                ) from None
            check_writable(s.db_path)  # a read-only disk or log, a full disk: exit 2 before any work
            try:
                lock = WriterLock.acquire(s.db_path)
            except LogLockedError as e:
                raise ServiceError(_in_use(s.data_dir, e)) from None
            with lock:
                event_log = await SqliteEventLog.open(str(s.db_path))
                try:
                    return await self._run_with_log(event_log, conf, adapter, api_socket)
                finally:
                    with anyio.CancelScope(shield=True):
                        await event_log.close()
                    self.notifier.stopping("stopped")
        finally:
            if api_socket is not None:
                api_socket.close()

    async def _run_shared(self, conf: ConfWatcher, adapter: Any) -> int:
        """On a shared PostgreSQL log: stand by (serving the API read-only from the followed log)
        until this replica holds the lease, then lead (daemon/runtime/shared_log.py); a leader
        that loses its term steps down, stands by again and may lead a later term."""
        s = self.settings
        api_socket = self._bind_api() if s.api else None
        try:
            # A lost database is waited out (retried until it answers; a second signal gives up).
            event_log = await PostgresEventLog.open(
                s.db,
                session_timeout=max(0.5, s.lease_duration / 2),
                retry_for=None,
                max_pause=min(1.0, s.lease_duration / 4),
            )
            self._pg_log = event_log
            try:
                self.shared = SharedLogLeader(
                    event_log, s.lease_duration, ignore_loss=os.environ.get(IGNORE_LEASE_LOSS) == "1"
                )
                while True:
                    rc = await self._lead_shared(event_log, conf, self.adapter, api_socket)
                    if rc is not None:
                        return rc
                    if not await self._fresh_adapter():  # stepped down: the next term starts afresh
                        return 0
            finally:
                with anyio.CancelScope(shield=True):
                    await event_log.close()
                self.notifier.stopping("stopped")
        finally:
            if api_socket is not None:
                api_socket.close()

    async def _lead_shared(
        self, event_log: PostgresEventLog, conf: ConfWatcher, adapter: Any, api_socket: socket.socket | None
    ) -> int | None:
        """Stand by, then lead one term: the exit status, or None once this replica stepped down
        (another replica took the lease over, or the database refused a write of this term)."""
        s = self.settings
        shared = self.shared
        assert shared is not None
        rc = 0
        leading = False
        refused: FencedError | None = None
        try:
            # Standing by, the takeover and leading: a second signal at any moment cancels this group.
            async with anyio.create_task_group() as tg, self._second_signal_cancels(tg.cancel_scope):
                async with anyio.create_task_group() as standing_by:
                    standby = (
                        await self._standby_api(standing_by, api_socket) if api_socket is not None else None
                    )
                    try:
                        leading = await shared.wait_for_lease(lambda: self.stop_requested, self._standby)
                    finally:
                        if standby is not None:
                            with anyio.CancelScope(shield=True):
                                await standby[0].cleanup()
                                await standby[1].close()
                        standing_by.cancel_scope.cancel()
                if leading:
                    self.say(f"leading the shared log {redact_dsn(s.db)} (epoch {shared.epoch})")
                    tg.start_soon(shared.keep_lease, tg.cancel_scope.cancel)
                    rc = await self._run_with_log(event_log, conf, adapter, api_socket)
                tg.cancel_scope.cancel()
        except (FencedError, BaseExceptionGroup) as e:
            refused = refusal_in(e)
            if refused is None:
                raise
        if not leading:
            return 0
        if shared.lost or refused is not None:
            with anyio.CancelScope(shield=True):
                await self._step_down(shared, refused)
            return None
        with anyio.CancelScope(shield=True):
            await shared.release()
        return rc

    async def _step_down(self, shared: SharedLogLeader, refused: FencedError | None) -> None:
        """After a lost term (its cycles, writer, dispatcher and API already stopped): one line
        saying so and who leads now; the next `_lead_shared` stands by."""
        self.ready = False
        self._runner = None
        holder, epoch = await shared.stepped_down()
        why = (
            f"the database refused this replica's write ({refused})"
            if refused is not None
            else "another replica took the lease over"
        )
        line = (
            f"stepped down from epoch {shared.epoch}: {why}; "
            f"{holder} leads the shared log now (epoch {epoch}); standing by"
        )
        log.warning(line)
        self.notifier.status(line)

    async def _fresh_adapter(self) -> bool:
        """A new adapter for the next term (nothing of the old term's adapter carries over; it is
        resumed from the log's facts when the term starts); False if a signal stopped its start."""
        old, self.adapter = self.adapter, None
        if isinstance(old, LiveCluster):
            with anyio.CancelScope(shield=True):
                await old.close()
        self.adapter = self._make_adapter()
        if isinstance(self.adapter, LiveCluster):
            with self.stoppable() as connecting:
                await self._connect(self.adapter)
            return not connecting.cancelled_caught
        return True

    async def _standby_api(self, tg: Any, sock: socket.socket) -> tuple[Any, Any]:
        """While standing by: the API read-only over a projection following the shared log (on a
        duplicate of the listening socket, so the leader's API takes the socket over afterwards)."""
        from aiohttp import web

        from fumarole.api.app import build_app
        from fumarole.daemon.runtime.api_view import ReadOnlyView

        view = await ReadOnlyView.open(self.settings.db, freeze_gc=False, retry_for=None)
        view.leadership_source = self.leadership
        tg.start_soon(view.follow)
        app = build_app(view, **self._api_options())
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.SockSite(runner, sock.dup()).start()
        bound = sock.getsockname()[:2]
        self.listen_address = (str(bound[0]), int(bound[1]))
        self.say(f"REST API on http://{bound[0]}:{bound[1]}")  # the first line, as when leading
        log.info("standing by: the REST API is read-only, following the shared log")
        return runner, view

    def _standby(self, line: str) -> None:
        self.notifier.status(line)
        self.say(line)

    def _may_write(self) -> bool:
        """False once this replica lost the lease of a shared log (its writes would be refused)."""
        return self.shared is None or not self.shared.lost

    def _db_label(self) -> str:
        s = self.settings
        return redact_dsn(s.db) if s.db else str(s.db_path)

    def config_warnings(self) -> list[str]:
        """What the configuration in force draws a warning for (skipped, as Volcano does), and
        the sessions' own warnings so far: `/readyz` (`config_warnings`) and the summary."""
        if self._runner is not None:
            return self._runner.warnings()
        return list(self._conf.active.conf.warnings) if self._conf is not None else []

    def leadership(self) -> tuple[bool | None, str]:
        """With leader election: (whether this replica leads, the lease holder); else (None, "")."""
        if self.shared is not None:
            return self.shared.leading, self.shared.leader
        adapter = self.adapter
        return adapter.leadership() if isinstance(adapter, LiveCluster) else (None, "")

    async def _connect(self, adapter: Any) -> None:
        """A live adapter's credentials and server checks, before anything is created on disk."""
        from fumarole.daemon.adapters.kubernetes import KubeSetupError

        try:
            await adapter.connect()
        except KubeSetupError as e:
            raise ServiceError(f"--adapter {self.settings.adapter}: {e}") from None

    def _api_options(self) -> dict[str, Any]:
        """build_app's keyword arguments from the settings: tokens, access rules, live-feed bounds."""
        from fumarole.api.access import Access
        from fumarole.daemon.runtime.settings import is_loopback, read_token

        s = self.settings
        host, _ = split_listen(s.listen)
        token = read_token(s)
        if not token and not is_loopback(host):
            log.warning(
                "the REST API listens on %s beyond loopback and every read is open to whoever reaches it: "
                "set read_token_file (--read-token FILE) or FUMAROLE_READ_TOKEN to require a token, "
                "and require_read_token to refuse to start without one",
                s.listen,
            )
        return {
            "token": s.api_token,
            "max_body_bytes": s.max_body_bytes,
            "jaeger_url": s.jaeger_url,
            "access": Access(listen_host=host, allowed_hosts=s.allowed_hosts, read_token=token),
            "live_idle_timeout": s.live_idle_timeout,
            "live_per_client": s.live_per_client,
        }

    def _bind_api(self) -> socket.socket:
        try:
            return bind_listen(*split_listen(self.settings.listen))
        except ListenError as e:
            raise ServiceError(str(e)) from None

    async def _run_with_log(
        self,
        event_log: SqliteEventLog | PostgresEventLog,
        conf: ConfWatcher,
        adapter: Any,
        api_socket: socket.socket | None,
    ) -> int:
        from fumarole.daemon.cache import load_projection

        t0 = time.monotonic()
        with heap.loading():
            projection = await load_projection(event_log)
        last = await event_log.last_seq()
        log.info(
            "log opened",
            extra={
                "db": self._db_label(),
                "last_seq": last,
                "rebuild_s": round(time.monotonic() - t0, 3),
            },
        )
        # Where the lockstep stands, and the adapter's state, both from the log; the adapter is
        # resumed before the dispatcher starts handing it decisions.
        lockstep = LockstepTracker()
        if last:
            facts: list[Any] = []
            async for row in event_log.read_range(1, last, types=TRACKED_TYPES):
                lockstep.fold(row.seq, row.event)
                if not isinstance(row.event, DECISIONS):
                    facts.append(row.event)
            adapter.resume(facts)
        writer = Writer(event_log, projection.fold, projection.seq)
        writer.event_listeners.append(lockstep.fold)
        if self.faults.crash_after_commits:
            writer.listeners.append(CrashAfterCommits(self.faults.crash_after_commits))
        dispatcher = Dispatcher(
            event_log,
            writer,
            adapter,
            batch=self.faults.dispatch_batch or 2000,
            concurrency=adapter.concurrency if isinstance(adapter, LiveCluster) else 1,
        )
        runner = self._runner = CycleRunner(projection, conf, tracer_provider=self.tracer_provider)
        runner.cycle = projection.last_cycle
        conf.mark_recorded(projection.conf_hash or None)

        rc = 0  # a second signal cancels the group below before anything returned
        async with anyio.create_task_group() as tg, self._second_signal_cancels(tg.cancel_scope):
            tg.start_soon(writer.run)
            tg.start_soon(dispatcher.run)
            if self.notifier.watchdog_interval:
                tg.start_soon(self._watchdog)
            api_runner = (
                await self._start_api(event_log, projection, writer, api_socket) if api_socket else None
            )
            try:
                if isinstance(adapter, LiveCluster):
                    rc = await run_live(self, adapter, writer, dispatcher, runner, event_log)
                    return rc
                if lockstep.position().step is Step.LIST:
                    await writer.submit(await adapter.initial_events())
                else:
                    # Decisions committed but not yet forwarded before the restart go out first.
                    await dispatcher.wait_until(await event_log.last_seq())
                self.ready = True
                self.notifier.ready("caught up with the log")
                rc = await self._simulate(adapter, writer, dispatcher, runner, lockstep, event_log)
                if rc == 0 and self.settings.serve and not self.stop_requested:
                    self.say("workload drained; serving the API until SIGTERM")
                    await self.wait_for_stop()
            finally:
                if api_runner is not None:
                    with anyio.CancelScope(shield=True):
                        await api_runner.cleanup()
                if self._may_write():
                    with anyio.CancelScope(shield=True), contextlib.suppress(FencedError):
                        # (refused: a lost term, which the step-down reports)
                        await self.save_snapshot(event_log, projection, force=True)
                tg.cancel_scope.cancel()
        return rc

    # ------------------------------------------------------------------ the lockstep loop
    async def _simulate(
        self,
        sim: Any,
        writer: Writer,
        dispatcher: Dispatcher,
        runner: CycleRunner,
        lockstep: LockstepTracker,
        event_log: SqliteEventLog | PostgresEventLog,
    ) -> int:
        """advance → cycle → dispatch → …, starting at the step the log says comes next."""
        while True:
            pos = lockstep.position()
            if pos.undispatched:
                await dispatcher.wait_until(pos.undispatched[-1])
                if lockstep.position().undispatched:
                    raise ServiceError(f"decisions {pos.undispatched} were dispatched but have no outcome")
                continue
            if pos.step is Step.ADVANCE:
                if self.stop_requested:
                    break
                if pos.exhausted or sim.drained():
                    await self._summary(sim, runner, event_log, drained=True)
                    return 0
                if self.stats.cycles >= self.settings.max_cycles:
                    await self._summary(sim, runner, event_log, drained=False)
                    log.error(
                        "stopped: max_cycles=%d reached before the workload drained", self.settings.max_cycles
                    )
                    return 1
                advanced = sim.advance(pos.idle)
                if advanced:
                    await writer.submit(advanced)
            # The cycle follows its advance, also one that moved nothing (the source is exhausted).
            summary = await runner.run_cycle(writer)
            self.account(summary)
            if summary.last_decision_seq:
                await dispatcher.wait_until(summary.last_decision_seq)
            await self.save_snapshot(event_log, runner.projection)
            self._progress(sim, runner, summary)
        await self._summary(sim, runner, event_log, drained=False, interrupted=True)
        return 0

    def account(self, s: CycleSummary) -> None:
        st = self.stats
        st.cycles += 1
        st.binds += s.binds
        st.evictions += s.evictions
        st.evictions_by_action.update(s.evictions_by_action)
        st.pipelined += s.pipelined
        st.cycle_seconds += s.seconds
        st.last = s

    async def save_snapshot(
        self, event_log: SqliteEventLog | PostgresEventLog, projection: Any, *, force: bool = False
    ) -> None:
        from fumarole.daemon.cache import save_projection

        seq = projection.seq
        due = force or seq - self._snapshot_seq >= self.settings.snapshot_every
        if due and seq > self._snapshot_seq:
            await save_projection(event_log, projection)
            self._snapshot_seq = seq

    # ------------------------------------------------------------------ output
    def say(self, line: str) -> None:
        """One line on stdout (progress, the summary, what the daemon did)."""
        print(line, file=self.out, flush=True)

    def _progress(self, sim: Any, runner: CycleRunner, s: CycleSummary) -> None:
        now = time.monotonic()
        if now - self._last_progress < self.settings.progress_every:
            return
        self._last_progress = now
        shares = " ".join(f"{q}={v:.2f}" for q, v in sorted(s.queue_shares.items()) if q != "root")
        line = (
            f"t={_clock(sim.now_ms)} cycle={runner.cycle} bound={s.bound} pending={s.pending} "
            f"binds+={self.stats.binds} evictions={self.stats.evictions} shares[{shares}]"
        )
        self.notifier.status(line)
        self.say(line)

    async def _summary(
        self, sim: Any, runner: CycleRunner, event_log: Any, *, drained: bool, interrupted: bool = False
    ) -> None:
        st = self.stats
        wall = time.monotonic() - st.started_wall
        state = "drained" if drained else ("interrupted (SIGTERM/SIGINT)" if interrupted else "not drained")
        totals = await _log_totals(event_log)
        lines = [
            "",
            f"== summary: workload {state}",
            f"   virtual time {_clock(sim.now_ms)}; {runner.cycle} cycles in the log, {st.cycles} this run "
            f"(wall {wall:.1f}s, of which scheduling {st.cycle_seconds:.1f}s)",
            f"   binds {totals.binds}, evictions {totals.evictions}"
            + (f" ({_by(totals.evictions_by_action)})" if totals.evictions else ""),
        ]
        for q in sorted(totals.binds_by_queue.keys() | totals.evicted_by_queue.keys()):
            lines.append(
                f"   queue {q}: {totals.binds_by_queue.get(q, 0)} binds, "
                f"{totals.evicted_by_queue.get(q, 0)} of its pods evicted"
            )
        stuck = sim.stuck_pods() if hasattr(sim, "stuck_pods") else []
        if stuck:
            lines.append(f"   {len(stuck)} pod(s) can never be placed: {', '.join(stuck[:5])}")
        if st.cycles == 0 and drained and self.settings.db:
            lines.append(f"   (the shared log already holds this finished run; {self._db_label()})")
        elif st.cycles == 0 and drained:
            lines.append(
                f"   (the log in {self.settings.data_dir} already holds this finished run; "
                "remove it or pass --data-dir to start a new one)"
            )
        warnings = runner.warnings()
        if warnings:
            lines.append(
                f"   {len(warnings)} configuration warning(s): skipped, as Volcano skips them "
                "(--strict refuses such a configuration):"
            )
            lines.extend(f"     warning: {w}" for w in warnings)
        lines.append(f"   log: {self._db_label()}  (inspect: fumarole events / replay --db ...)")
        for line in lines:
            self.say(line)

    # ------------------------------------------------------------------ signals, watchdog, API
    def _on_signal(self, signum: int) -> None:
        """The event loop's handler of SIGTERM/SIGINT (see the module notes)."""
        name = signal.Signals(signum).name
        if self.stop_requested:
            log.warning("second signal (%s): stopping now", name)
            if self._pg_log is not None:
                self._pg_log.interrupt()  # a write waiting for a lost database gives up
            # the outermost group of the running daemon, else (still starting) the whole run
            (self._hard[1] if len(self._hard) > 1 else self._hard[0]).cancel()
            return
        if self._stoppable:
            log.info("signal %s: stopping (still starting: nothing to finish)", name)
        else:
            log.info("signal %s: finishing the running cycle, then stopping", name)
        self.stop_requested = True
        self.notifier.stopping("finishing the running cycle")
        self._stop_ev.set()
        for scope in self._stoppable:
            scope.cancel()

    @contextlib.contextmanager
    def stoppable(self) -> Iterator[anyio.CancelScope]:
        """A start-up wait a SIGTERM/SIGINT cancels (already cancelled once a stop was asked for);
        the caller checks `scope.cancelled_caught` (or `stop_requested`) afterwards."""
        with anyio.CancelScope() as scope:
            if self.stop_requested:
                scope.cancel()
            self._stoppable.append(scope)
            try:
                yield scope
            finally:
                self._stoppable.remove(scope)

    @contextlib.asynccontextmanager
    async def _second_signal_cancels(self, scope: anyio.CancelScope) -> AsyncIterator[None]:
        self._hard.append(scope)
        try:
            yield
        finally:
            self._hard.remove(scope)

    async def wait_for_stop(self) -> None:
        await self._stop_ev.wait()

    async def _watchdog(self) -> None:
        interval = self.notifier.watchdog_interval or 1.0
        while True:
            self.notifier.watchdog()
            await anyio.sleep(interval)

    async def _start_api(
        self,
        event_log: SqliteEventLog | PostgresEventLog,
        projection: Any,
        writer: Writer,
        sock: socket.socket,
    ) -> Any:
        from aiohttp import web

        from fumarole.api.app import build_app
        from fumarole.daemon.runtime.api_view import LiveView

        view = LiveView(self, event_log, projection, writer)
        app = build_app(view, **self._api_options())
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        # The socket was bound during the start-up checks (daemon/runtime/listen.py); the site gets
        # a duplicate, so a leader that steps down serves its standby API on the same socket.
        site = web.SockSite(runner, sock.dup())
        await site.start()
        bound = sock.getsockname()[:2]
        self.listen_address = (str(bound[0]), int(bound[1]))
        log.info("REST API listening on http://%s:%d", *self.listen_address)
        self.say(f"REST API on http://{self.listen_address[0]}:{self.listen_address[1]}")
        return runner


@dataclass(slots=True)
class _Totals:
    binds: int = 0
    evictions: int = 0
    evictions_by_action: Counter[str] = field(default_factory=Counter)
    binds_by_queue: Counter[str] = field(default_factory=Counter)
    evicted_by_queue: Counter[str] = field(default_factory=Counter)


async def _log_totals(event_log: Any) -> _Totals:
    t = _Totals()
    last = await event_log.last_seq()
    async for row in event_log.read_range(1, last, types=("decision.bind", "decision.evict")):
        ev = row.event
        if isinstance(ev, BindDecided):
            t.binds += 1
            t.binds_by_queue[ev.queue] += 1
        elif isinstance(ev, EvictDecided):
            t.evictions += 1
            t.evictions_by_action[ev.action] += 1
            t.evicted_by_queue[ev.queue] += 1
    return t


def _in_use(data_dir: str, e: LogLockedError) -> str:
    who = f"process {e.pid}" if e.pid is not None else "another process"
    return (
        f"data directory {data_dir}: in use by {who} (a running fumarole daemon holds {e.lock}); "
        "stop it first, or pass another --data-dir"
    )


def _by(c: Counter[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(c.items()))


def _clock(ms: int) -> str:
    s = ms // 1000
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
