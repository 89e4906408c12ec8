"""`fumarole serve` (the REST API, read-only, over a log file) and `fumarole explain` (why a job waits).

serve: opens the log read-only, rebuilds the projection (newest snapshot + tail), serves the API
on --listen and follows the log's tail as another process appends; POST /v1/events answers 403.
Listening beyond loopback needs --allow-remote.  Stops on SIGTERM/SIGINT (exit 0).  With
--workers N > 1 the process is a supervisor: it reserves the port, starts N worker processes
(`fumarole serve ... --worker-of PID`, each a whole read-only server of its own) that listen on it
with SO_REUSEPORT (the kernel spreads connections among them), forwards SIGTERM/SIGINT to them,
and stops them all and exits 1 when one dies on its own.

explain: the same explanation as GET /v1/jobs/{namespace}/{name}, from the log, for humans
(--format json prints the API's JSON): the job now, why it waits, and its history (when and why
it waited, in spans of cycles with the same reasons, binds, evictions, phase changes, with
cycle ids and virtual times) as one timeline.  Exit 0 when the job is known, 1 when it is not, 2 on bad
input (missing or foreign file, a name that is not <namespace>/<job>).
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from typing import Any

from api.types import JobDetail, JobHistory
from daemon.runtime.listen import ListenError, bind_error, bind_listen

EXIT_OK = 0
EXIT_UNKNOWN = 1
EXIT_BAD_INPUT = 2

__all__ = ["add_parsers", "cmd_explain", "cmd_serve", "render_explanation", "render_history"]


def add_parsers(sub: Any) -> None:
    """Register `serve` and `explain` on the `fumarole` parser's subparsers."""
    s = sub.add_parser(
        "serve",
        help="serve the REST API read-only over an event log file (follows the log as it grows)",
        description=(
            "Serve the REST API (cycles, decisions, jobs, queues, nodes, events, metrics, OpenAPI) over an "
            "existing event log opened read-only, following it as a running daemon appends; POST /v1/events "
            "is refused (403). Stops on SIGTERM/SIGINT."
        ),
    )
    s.add_argument("--db", required=True, metavar="FILE", help="the SQLite event log file")
    s.add_argument(
        "--listen",
        default="127.0.0.1:8321",
        metavar="HOST:PORT",
        help="address to serve on (default 127.0.0.1:8321; port 0 = any free port)",
    )
    s.add_argument("--allow-remote", action="store_true", help="allow --listen beyond loopback")
    s.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes sharing the port with SO_REUSEPORT, each with its own projection (default 1)",
    )
    s.add_argument("--worker-of", type=int, default=0, help=argparse.SUPPRESS)  # internal: supervisor pid
    s.set_defaults(func=cmd_serve)

    e = sub.add_parser(
        "explain",
        help="why a job is pending (or was), from an event log file",
        description=(
            "Print the job's phase, tasks by status, when it waits its ranked reasons, and its history: "
            "when and why it waited, when it was bound, evictions, phase changes (cycle ids, virtual times)."
        ),
    )
    e.add_argument("--db", required=True, metavar="FILE", help="the SQLite event log file")
    e.add_argument("job", metavar="NAMESPACE/JOB", help="the job (PodGroup) as <namespace>/<name>")
    e.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="output: text for humans (default) or the API's JSON (GET /v1/jobs/{namespace}/{name})",
    )
    e.set_defaults(func=cmd_explain)


def _error(msg: str) -> int:
    print(f"fumarole: error: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


# ----------------------------------------------------------------------------- explain


def cmd_explain(args: argparse.Namespace) -> int:
    import anyio
    import msgspec

    from store.log import LogError

    ns, sep, name = args.job.partition("/")
    if not sep or not ns or not name or "/" in name:
        return _error(f"{args.job!r}: expected <namespace>/<job>")
    if not Path(args.db).is_file():
        return _error(f"{args.db}: no such file")
    try:
        detail = anyio.run(_explain, args.db, ns, name)
    except LogError as e:
        return _error(str(e))
    if detail is None:
        print(f"fumarole: job {ns}/{name} is not known in {args.db}", file=sys.stderr)
        return EXIT_UNKNOWN
    if args.format == "json":
        sys.stdout.write(msgspec.json.encode(detail).decode() + "\n")
    else:
        sys.stdout.write(render_explanation(detail))
    return EXIT_OK


async def _explain(db: str, ns: str, name: str) -> JobDetail | None:
    from daemon.runtime.api_view import ReadOnlyView

    view = await ReadOnlyView.open(db)
    try:
        return view.job(ns, name)
    finally:
        await view.close()


def render_explanation(d: JobDetail) -> str:
    """The human form of a job's explanation (what `fumarole explain` prints)."""
    lines = [f"job {d.namespace}/{d.name}: queue {d.queue}, phase {d.phase or '-'}, minMember {d.min_member}"]
    counts = ", ".join(f"{n} {s}" for s, n in d.tasks_by_status.items()) or "no pods"
    lines.append(f"tasks: {counts}")
    ex = d.explanation
    if ex is None:
        lines.append("pending: no" if not d.pending else "pending: yes (no explanation recorded yet)")
        lines.extend(render_history(d.history))
        return "\n".join(lines) + "\n"
    lines.append(f"pending: {ex.message}")
    lines.append(f"position in queue {d.queue}: {ex.queue_position}  (as of cycle {ex.cycle})")
    lines.append("reasons (most important first):")
    for r in ex.reasons:
        lines.append(f"  {r.rank + 1}. [{r.code}] {r.message}")
        facts = []
        if r.plugin:
            facts.append(f"plugin {r.plugin}")
        if r.resource:
            facts.append(f"resource {r.resource}" + (f" short by {r.shortfall}" if r.shortfall else ""))
        if r.min_member:
            facts.append(f"{r.placeable} of {r.min_member} tasks placeable")
        if r.total_nodes:
            hist = ", ".join(
                f"{n} {why}" for why, n in sorted(r.nodes.items(), key=lambda kv: (-kv[1], kv[0]))
            )
            facts.append(f"0/{r.total_nodes} nodes fit" + (f": {hist}" if hist else ""))
        if facts:
            lines.append("     " + "; ".join(facts))
    if ex.pods:
        lines.append("pods:")
        for pod, why in ex.pods.items():
            lines.append(f"  {pod}: {why}")
    lines.extend(render_history(d.history))
    return "\n".join(lines) + "\n"


def _at(ms: int) -> str:
    """A virtual time: seconds since the start of a simulated clock, or a UTC time for a real one."""
    if ms >= 10**11:  # epoch milliseconds (after 1973): a wall clock
        import datetime as dt

        t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
        return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{ms % 1000:03d}Z" if ms % 1000 else "Z")
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms / 1000:g}s"


def _duration(ms: int) -> str:
    if ms < 60_000:
        return _at(ms)
    s = ms // 1000
    d, h, m, s = s // 86400, s // 3600 % 24, s // 60 % 60, s % 60
    if d:
        return f"{d}d{h:02d}h{m:02d}m"
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def render_history(h: JobHistory) -> list[str]:
    """The history's lines: a summary, then binds, evictions, phase changes and wait spans as one
    timeline (oldest first; `t=` the cycle's virtual time, `[n]` its id)."""
    if not (h.waits_total or h.binds_total or h.evictions_total or h.phases_total):
        return ["history: no decision about this job in the log"]
    lines = ["history (t = virtual time, [n] = cycle id):"]
    if h.waits_total:
        until = (
            "and still waits at the end of the log"
            if h.waiting
            else f"to t={_at(h.waited_until_ms or 0)} [{h.waited_until_cycle}]"
        )
        lines.append(
            f"  waited {_duration(h.waited_ms)} in {_plural(h.wait_cycles, 'cycle')} "
            f"({_plural(h.waits_total, 'span')} of the same reasons), "
            f"from t={_at(h.waited_from_ms or 0)} [{h.waited_from_cycle}] {until}"
        )
    else:
        lines.append("  never waited for a reason the scheduler recorded")
    lines.append(
        f"  {_plural(h.binds_total, 'cycle')} bound pods of it; {_plural(h.evictions_total, 'eviction')}"
    )
    for kind, shown, total in (
        ("waits", len(h.waits), h.waits_total),
        ("binds", len(h.binds), h.binds_total),
        ("evictions", len(h.evictions), h.evictions_total),
        ("phase changes", len(h.phases), h.phases_total),
    ):
        if shown < total:
            lines.append(f"  (the {shown} most recent of {total} {kind} are listed)")
    steps: list[tuple[int, int, str, str]] = []
    for b in h.binds:
        pods = ", ".join(f"{pod} -> {node}" for pod, node in b.pods.items())
        steps.append((b.cycle, 0, f"[{b.cycle}]", f"bound {pods}"))
    for e in h.evictions:
        steps.append((e.cycle, 1, f"[{e.cycle}]", f"evicted {e.pod} from {e.node} ({e.action}): {e.reason}"))
    for p in h.phases:
        steps.append((p.cycle, 2, f"[{p.cycle}]", f"phase {p.phase}"))
    for w in h.waits:
        cycles = (
            f"[{w.first_cycle}]" if w.last_cycle == w.first_cycle else f"[{w.first_cycle}-{w.last_cycle}]"
        )
        until = (
            f", until t={_at(w.until_ms or 0)} [{w.until_cycle}]"
            if w.until_cycle is not None
            else ", still at the end of the log"
        )
        why = f"[{', '.join(w.reasons)}] " if w.reasons else ""
        steps.append(
            (w.first_cycle, 3, cycles, f"waiting {_plural(w.cycles, 'cycle')}{until}: {why}{w.message}")
        )
    at = {b.cycle: b.at_ms for b in h.binds}
    at.update({e.cycle: e.at_ms for e in h.evictions})
    at.update({p.cycle: p.at_ms for p in h.phases})
    at.update({w.first_cycle: w.from_ms for w in h.waits})
    steps.sort(key=lambda s: (s[0], s[1]))
    width = max(len(f"t={_at(at[c])} {ids}") for c, _, ids, _ in steps) if steps else 0
    for cycle, _, ids, text in steps:
        lines.append(f"  {f't={_at(at[cycle])} {ids}':<{width}}  {text}")
    return lines


# ----------------------------------------------------------------------------- serve


WORKER_READY = b"fumarole-serve-worker-ready"
STOP_GRACE_S = 30.0


def cmd_serve(args: argparse.Namespace) -> int:
    import anyio

    from daemon.runtime.settings import SettingsError, is_loopback, split_listen
    from store.log import LogError

    try:
        host, port = split_listen(args.listen)
    except SettingsError as e:
        return _error(str(e))
    if not is_loopback(host) and not args.allow_remote:
        return _error(
            f"--listen {args.listen} is beyond loopback; pass --allow-remote to ask for it explicitly"
        )
    if args.workers < 1:
        return _error(f"--workers must be at least 1, got {args.workers}")
    if not Path(args.db).is_file():
        return _error(f"{args.db}: no such file")
    if args.workers > 1 and not args.worker_of:
        return _supervise(args.db, host, port, args.workers)
    sock = None
    if not args.worker_of:  # a worker listens with SO_REUSEPORT on the supervisor's port instead
        try:
            sock = bind_listen(host, port)
        except ListenError as e:
            return _error(str(e))
    try:
        anyio.run(_serve, args.db, host, port, args.worker_of, sock)
    except LogError as e:
        return _error(str(e))
    except OSError as e:
        print(f"fumarole: error: {e}", file=sys.stderr)
        return 1
    finally:
        if sock is not None:
            sock.close()
    return EXIT_OK


async def _serve(
    db: str, host: str, port: int, worker_of: int = 0, sock: socket.socket | None = None
) -> None:
    """One server process: the whole API over its own projection of the log.  A worker
    (`worker_of` = the supervisor's pid) listens with SO_REUSEPORT, tells the supervisor it is
    ready on stdout, stops on SIGTERM only (the supervisor handles SIGINT) and stops by itself
    when the supervisor is gone."""
    import os
    import signal

    import anyio
    from aiohttp import web

    from api.app import build_app
    from daemon.runtime.api_view import ReadOnlyView

    if worker_of:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C reaches the supervisor too
    view = await ReadOnlyView.open(db)
    runner = web.AppRunner(build_app(view, worker=str(os.getpid())), access_log=None)
    try:
        await runner.setup()
        site: web.BaseSite
        if sock is not None:
            site = web.SockSite(runner, sock)
        else:
            site = web.TCPSite(runner, host, port, reuse_port=bool(worker_of))
        await site.start()
        if worker_of:
            sys.stdout.buffer.write(WORKER_READY + b"\n")
            sys.stdout.buffer.flush()
        else:
            bound = sock.getsockname()[:2] if sock is not None else (host, port)
            print(f"REST API on http://{bound[0]}:{bound[1]} (read-only, {db})", flush=True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(view.follow)
            if worker_of:
                tg.start_soon(_watch_parent, worker_of, tg.cancel_scope)
            stop_on = (signal.SIGTERM,) if worker_of else (signal.SIGTERM, signal.SIGINT)
            with anyio.open_signal_receiver(*stop_on) as signals:
                async for _ in signals:
                    break
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()
            await view.close()


async def _watch_parent(parent: int, scope: Any, poll: float = 1.0) -> None:
    """Cancel `scope` once the supervisor `parent` is no longer this process's parent (it died)."""
    import os

    import anyio

    while os.getppid() == parent:
        await anyio.sleep(poll)
    print(f"fumarole: serve worker {os.getpid()}: the supervisor {parent} is gone; stopping", file=sys.stderr)
    scope.cancel()


# ----------------------------------------------------------------------------- serve --workers N


def _reserve_port(host: str, port: int) -> Any:
    """A bound (not listening) SO_REUSEPORT socket on host:port: it chooses the port when `port` is 0
    and keeps it ours until the workers listen on it with SO_REUSEPORT as well."""
    family, kind, proto, _, addr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(addr)
    except BaseException:
        sock.close()
        raise
    return sock


def _describe_exit(rc: int) -> str:
    import signal

    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with code {rc}"


def _supervise(db: str, host: str, port: int, workers: int) -> int:
    """`fumarole serve --workers N`: start N workers on one SO_REUSEPORT port, announce the address
    once all are ready, forward SIGTERM/SIGINT (exit 0 once they stopped); a worker that exits on its
    own stops the others (exit 1; 2 when a worker refused its input during start-up)."""
    import os
    import selectors
    import signal
    import subprocess
    import time

    try:
        reserved = _reserve_port(host, port)
    except OSError as e:
        return _error(str(bind_error(host, port, e)))
    port = int(reserved.getsockname()[1])
    listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    cmd = [sys.executable, "-m", "daemon.cli", "serve", "--db", db, "--listen", listen]
    cmd += ["--allow-remote", "--worker-of", str(os.getpid())]  # the supervisor checked --listen
    procs: list[subprocess.Popen[bytes]] = []
    sel = selectors.DefaultSelector()
    try:
        for _ in range(workers):
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
            procs.append(p)
            assert p.stdout is not None
            sel.register(p.stdout, selectors.EVENT_READ, p)
        pending = {p.pid: b"" for p in procs}
        announced = False
        while True:
            if received:
                return _stop_workers(procs, signal.SIGTERM, graceful=True)
            for i, p in enumerate(procs):
                rc = p.poll()
                if rc is not None:
                    when = "after start-up" if announced else "during start-up"
                    print(
                        f"fumarole: error: serve worker {i + 1}/{workers} (pid {p.pid}) {_describe_exit(rc)} "
                        f"{when}; stopping the other workers",
                        file=sys.stderr,
                        flush=True,
                    )
                    _stop_workers(procs, signal.SIGTERM, graceful=False)
                    return EXIT_BAD_INPUT if rc == EXIT_BAD_INPUT and not announced else 1
            if not pending:
                if not announced:
                    reserved.close()  # the workers hold the port now
                    print(
                        f"REST API on http://{host}:{port} (read-only, {db}, {workers} workers: "
                        f"{' '.join(str(p.pid) for p in procs)})",
                        flush=True,
                    )
                    announced = True
                time.sleep(0.2)
                continue
            for key, _ in sel.select(timeout=0.2):
                p = key.data
                chunk = os.read(key.fd, 4096)
                if not chunk:  # its stdout closed: it is exiting; poll() tells how
                    sel.unregister(key.fileobj)
                    continue
                pending[p.pid] += chunk
                if WORKER_READY in pending[p.pid]:
                    del pending[p.pid]
                    sel.unregister(key.fileobj)
    finally:
        sel.close()
        reserved.close()
        _stop_workers(procs, signal.SIGTERM, graceful=False)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_workers(procs: list[Any], sig: int, *, graceful: bool) -> int:
    """Send `sig` to the workers still running and wait for them (SIGKILL after STOP_GRACE_S);
    EXIT_OK when every worker stopped cleanly (exit 0, or killed by `sig` before it could handle it)."""
    import subprocess
    import time

    for p in procs:
        if p.poll() is None:
            p.send_signal(sig)
    deadline = time.monotonic() + STOP_GRACE_S
    clean = True
    for p in procs:
        try:
            rc = p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            clean = False
        if rc not in (0, -sig):
            clean = False
        if p.stdout is not None:
            p.stdout.close()
    if graceful and not clean:
        print("fumarole: error: a serve worker did not stop cleanly", file=sys.stderr, flush=True)
    return EXIT_OK if clean or not graceful else 1
