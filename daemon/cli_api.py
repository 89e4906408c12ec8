"""`fumarole serve` (the REST API, read-only, over a log file) and `fumarole explain` (why a job waits).

serve: opens the log read-only, rebuilds the projection (newest snapshot + tail), serves the API
on --listen and follows the log's tail as another process appends; POST /v1/events answers 403.
Listening beyond loopback needs --allow-remote.  Stops on SIGTERM/SIGINT (exit 0).

explain: the same explanation as GET /v1/jobs/{namespace}/{name}, from the log, for humans
(--format json prints the API's JSON).  Exit 0 when the job is known, 1 when it is not, 2 on bad
input (missing or foreign file, a name that is not <namespace>/<job>).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from api.types import JobDetail

EXIT_OK = 0
EXIT_UNKNOWN = 1
EXIT_BAD_INPUT = 2

__all__ = ["add_parsers", "cmd_explain", "cmd_serve", "render_explanation"]


def add_parsers(sub: Any) -> None:
    """Register `serve` and `explain` on the `fumarole` parser's subparsers."""
    s = sub.add_parser(
        "serve",
        help="serve the REST API read-only over an event log file (follows the log as it grows)",
        description=(
            "Serve the REST API (cycles, decisions, jobs, queues, nodes, events, metrics, OpenAPI) over an "
            "existing event log opened read-only; POST /v1/events is refused (403)."
        ),
    )
    s.add_argument("--db", required=True, help="the SQLite event log file")
    s.add_argument(
        "--listen", default="127.0.0.1:8321", help="HOST:PORT (default 127.0.0.1:8321; port 0 = any)"
    )
    s.add_argument("--allow-remote", action="store_true", help="allow --listen beyond loopback")
    s.set_defaults(func=cmd_serve)

    e = sub.add_parser(
        "explain",
        help="why a job is pending, from an event log file",
        description="Print the job's phase, tasks by status and, when it waits, its ranked reasons.",
    )
    e.add_argument("--db", required=True, help="the SQLite event log file")
    e.add_argument("job", metavar="NAMESPACE/JOB", help="the job (PodGroup) as <namespace>/<name>")
    e.add_argument("--format", choices=("text", "json"), default="text")
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
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- serve


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
    if not Path(args.db).is_file():
        return _error(f"{args.db}: no such file")
    try:
        anyio.run(_serve, args.db, host, port)
    except LogError as e:
        return _error(str(e))
    except OSError as e:
        print(f"fumarole: error: {e}", file=sys.stderr)
        return 1
    return EXIT_OK


async def _serve(db: str, host: str, port: int) -> None:
    import signal

    import anyio
    from aiohttp import web

    from api.app import build_app
    from daemon.runtime.api_view import ReadOnlyView

    view = await ReadOnlyView.open(db)
    runner = web.AppRunner(build_app(view), access_log=None)
    try:
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        bound = sockets[0].getsockname()[:2] if sockets else (host, port)
        print(f"REST API on http://{bound[0]}:{bound[1]} (read-only, {db})", flush=True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(view.follow)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    break
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()
            await view.close()
