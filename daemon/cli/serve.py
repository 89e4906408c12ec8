"""`fumarole serve`: the REST API, read-only, over an event log file.

Opens the log read-only, rebuilds the projection (newest snapshot + tail), serves the API on
--listen and follows the log's tail as another process appends; POST /v1/events answers 403.
Listening beyond loopback needs --allow-remote.  Stops on SIGTERM/SIGINT (exit 0).  With
--workers N > 1 the process is a supervisor: it reserves the port, starts N worker processes
(`fumarole serve ... --worker-of PID`, each a whole read-only server of its own) that listen on it
with SO_REUSEPORT (the kernel spreads connections among them), forwards SIGTERM/SIGINT to them,
and stops them all and exits 1 when one dies on its own.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from fumarole.daemon.cli.exits import EXIT_BAD_INPUT, EXIT_OK, InputError, bad_input

if TYPE_CHECKING:  # socket and the listener are imported where used: other commands need neither
    import socket

__all__ = ["add_parser", "cmd_serve"]


def add_parser(sub: Any) -> None:
    """Register `serve` on the `fumarole` parser's subparsers."""
    s = sub.add_parser(
        "serve",
        help="serve the REST API read-only over an event log file (follows the log as it grows)",
        description=(
            "Serve the REST API (cycles, decisions, jobs, queues, nodes, events, metrics, OpenAPI) over an "
            "existing event log opened read-only, following it as a running daemon appends; POST /v1/events "
            "is refused (403). Stops on SIGTERM/SIGINT."
        ),
    )
    s.add_argument(
        "--db",
        metavar="FILE|URL",
        help="the SQLite event log file, or a postgresql:// URL (default $FUMAROLE_DB)",
    )
    s.add_argument(
        "--listen",
        default="127.0.0.1:8321",
        metavar="HOST:PORT",
        help="address to serve on (default 127.0.0.1:8321; port 0 = any free port)",
    )
    s.add_argument("--allow-remote", action="store_true", help="allow --listen beyond loopback")
    s.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        metavar="NAME[:PORT]",
        help="a Host name to answer to besides localhost, loopback and the listen address (repeatable; "
        "default $FUMAROLE_ALLOWED_HOSTS, comma-separated; '*' = any, no DNS-rebinding protection)",
    )
    s.add_argument(
        "--read-token",
        dest="read_token_file",
        metavar="FILE",
        help="require the token in FILE's first line for every read (default $FUMAROLE_READ_TOKEN_FILE, "
        "or the token itself in $FUMAROLE_READ_TOKEN)",
    )
    s.add_argument("--require-read-token", action="store_true", help="refuse to start without a read token")
    s.add_argument(
        "--live-idle-timeout",
        type=float,
        metavar="SECONDS",
        help="end a dashboard's live stream after this long without a cycle (default 300; 0 = never)",
    )
    s.add_argument(
        "--live-per-client",
        type=int,
        metavar="N",
        help="live streams one remote address may hold (default 8)",
    )
    s.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes sharing the port with SO_REUSEPORT, each with its own projection (default 1)",
    )
    s.add_argument(
        "--jaeger-url",
        metavar="URL",
        help="the Jaeger UI the dashboard's cycle pages link to (default $FUMAROLE_JAEGER_URL, "
        "else http://localhost:16686)",
    )
    s.add_argument("--worker-of", type=int, default=0, help=argparse.SUPPRESS)  # internal: supervisor pid
    s.set_defaults(func=cmd_serve)


# ----------------------------------------------------------------------------- serve


WORKER_READY = b"fumarole-serve-worker-ready"
STOP_GRACE_S = 30.0


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    import anyio

    from fumarole.daemon.runtime.settings import SettingsError, check_jaeger_url, is_loopback, split_listen
    from fumarole.store.log import LogError

    try:
        options = _access_options(args, os.environ)
        host, port = split_listen(args.listen)
        if args.jaeger_url is not None:
            jaeger_url = check_jaeger_url(args.jaeger_url, "--jaeger-url")
        else:
            jaeger_url = check_jaeger_url(
                os.environ.get("FUMAROLE_JAEGER_URL", "http://localhost:16686"), "FUMAROLE_JAEGER_URL"
            )
    except SettingsError as e:
        return bad_input(str(e))
    if not is_loopback(host) and not args.allow_remote:
        return bad_input(
            f"--listen {args.listen} is beyond loopback; pass --allow-remote to ask for it explicitly"
        )
    if args.workers < 1:
        return bad_input(f"--workers must be at least 1, got {args.workers}")
    if not options["read_token"] and not is_loopback(host) and not args.worker_of:
        print(
            f"fumarole: warning: --listen {args.listen} is beyond loopback and every read is open to "
            "whoever reaches it; pass --read-token FILE (or set FUMAROLE_READ_TOKEN) to require a token",
            file=sys.stderr,
            flush=True,
        )
    from fumarole.daemon.cli.eventlog import existing_db

    try:
        args.db = existing_db(args.db)
    except InputError as e:
        return bad_input(str(e))
    if args.workers > 1 and not args.worker_of:
        return _supervise(args.db, host, port, args.workers, jaeger_url, _worker_args(args, options))
    from fumarole.daemon.runtime.listen import ListenError, bind_listen

    sock = None
    if not args.worker_of:  # a worker listens with SO_REUSEPORT on the supervisor's port instead
        try:
            sock = bind_listen(host, port)
        except ListenError as e:
            return bad_input(str(e))
    try:
        anyio.run(_serve, args.db, host, port, args.worker_of, sock, jaeger_url, options)
    except LogError as e:
        return bad_input(str(e))
    except OSError as e:
        print(f"fumarole: error: {e}", file=sys.stderr)
        return 1
    finally:
        if sock is not None:
            sock.close()
    return EXIT_OK


async def _serve(
    db: str,
    host: str,
    port: int,
    worker_of: int = 0,
    sock: socket.socket | None = None,
    jaeger_url: str = "http://localhost:16686",
    options: dict[str, Any] | None = None,
) -> None:
    """One server process: the whole API over its own projection of the log.  A worker
    (`worker_of` = the supervisor's pid) listens with SO_REUSEPORT, tells the supervisor it is
    ready on stdout, stops on SIGTERM only (the supervisor handles SIGINT) and stops by itself
    when the supervisor is gone."""
    import os
    import signal

    import anyio
    from aiohttp import web

    from fumarole.api.app import build_app
    from fumarole.daemon.runtime.api_view import ReadOnlyView
    from fumarole.store.backend import (
        describe_db,  # imported here: asyncpg is not on other commands' start-up
    )

    if worker_of:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C reaches the supervisor too
    from fumarole.api.access import Access

    o = options or {}
    access = Access(
        listen_host=host, allowed_hosts=o.get("allowed_hosts", ()), read_token=o.get("read_token", "")
    )
    view = await ReadOnlyView.open(db, warm=True, retry_for=None)  # a server waits a lost database out
    app = build_app(
        view,
        worker=str(os.getpid()),
        jaeger_url=jaeger_url,
        access=access,
        live_idle_timeout=o.get("live_idle_timeout", 300.0),
        live_per_client=o.get("live_per_client", 8),
    )
    runner = web.AppRunner(app, access_log=None)
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
            print(f"REST API on http://{bound[0]}:{bound[1]} (read-only, {describe_db(db)})", flush=True)
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


def _access_options(args: argparse.Namespace, env: Any) -> dict[str, Any]:
    """The allowed hosts, the read token and the live feed's bounds from the flags, else the
    FUMAROLE_* environment (as `fumarole run` names them); SettingsError names what is wrong."""
    from fumarole.daemon.runtime.settings import (
        Settings,
        SettingsError,
        check_allowed_hosts,
        check_live,
        read_token,
    )

    if args.allowed_hosts is not None:
        hosts = check_allowed_hosts(tuple(args.allowed_hosts), "--allowed-host")
    else:
        raw = env.get("FUMAROLE_ALLOWED_HOSTS", "")
        hosts = check_allowed_hosts(
            tuple(h.strip() for h in raw.split(",") if h.strip()), "FUMAROLE_ALLOWED_HOSTS"
        )
    token_file = args.read_token_file or env.get("FUMAROLE_READ_TOKEN_FILE", "")
    token_env = "" if args.read_token_file else env.get("FUMAROLE_READ_TOKEN", "")
    where = "--read-token" if args.read_token_file else "FUMAROLE_READ_TOKEN_FILE"
    token = read_token(Settings(read_token=token_env, read_token_file=token_file), where)
    if args.require_read_token and not token:
        raise SettingsError(
            "--require-read-token: no read token is configured (--read-token FILE or FUMAROLE_READ_TOKEN)"
        )
    idle = args.live_idle_timeout if args.live_idle_timeout is not None else 300.0
    per_client = args.live_per_client if args.live_per_client is not None else 8
    check_live(idle, per_client, "--")
    return {
        "allowed_hosts": hosts,
        "read_token": token,
        "read_token_file": token_file,
        "live_idle_timeout": idle,
        "live_per_client": per_client,
    }


def _worker_args(args: argparse.Namespace, options: dict[str, Any]) -> list[str]:
    """The same options for a worker's command line (the token file's name, never the token)."""
    out: list[str] = []
    for h in options["allowed_hosts"]:
        out += ["--allowed-host", h]
    if options["read_token_file"]:
        out += ["--read-token", options["read_token_file"]]  # else FUMAROLE_READ_TOKEN is inherited
    if args.require_read_token:
        out.append("--require-read-token")
    out += ["--live-idle-timeout", str(options["live_idle_timeout"])]
    out += ["--live-per-client", str(options["live_per_client"])]
    return out


# ----------------------------------------------------------------------------- serve --workers N


def _reserve_port(host: str, port: int) -> Any:
    """A bound (not listening) SO_REUSEPORT socket on host:port: it chooses the port when `port` is 0
    and keeps it ours until the workers listen on it with SO_REUSEPORT as well."""
    import socket

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


def _supervise(db: str, host: str, port: int, workers: int, jaeger_url: str, extra: list[str]) -> int:
    """`fumarole serve --workers N`: start N workers on one SO_REUSEPORT port, announce the address
    once all are ready, forward SIGTERM/SIGINT (exit 0 once they stopped); a worker that exits on its
    own stops the others (exit 1; 2 when a worker refused its input during start-up)."""
    import os
    import selectors
    import signal
    import subprocess
    import time

    from fumarole.daemon.runtime.listen import bind_error
    from fumarole.store.backend import describe_db

    try:
        reserved = _reserve_port(host, port)
    except OSError as e:
        return bad_input(str(bind_error(host, port, e)))
    port = int(reserved.getsockname()[1])
    listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    cmd = [sys.executable, "-m", "fumarole.daemon.cli", "serve", "--db", db, "--listen", listen]
    cmd += ["--allow-remote", "--worker-of", str(os.getpid())]  # the supervisor checked --listen
    cmd += ["--jaeger-url", jaeger_url, *extra]
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
                        f"REST API on http://{host}:{port} (read-only, {describe_db(db)}, {workers} workers: "
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
