"""`fumarole explain`: why a job waits (or waited), from an event log file.

The same explanation as GET /v1/jobs/{namespace}/{name}, from the log, for humans (--format json
prints the API's JSON): the job now, why it waits, and its history (when and why it waited, in
spans of cycles with the same reasons, binds, evictions, phase changes, with cycle ids and
virtual times) as one timeline.  Exit 0 when the job is known, 1 when it is not, 2 on bad input
(missing or foreign file, a name that is not <namespace>/<job>).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from fumarole.daemon.cli.exits import EXIT_OK, InputError, bad_input

if TYPE_CHECKING:  # annotations only: `fumarole schedule` need not import the API's types
    from fumarole.api.types import JobDetail, JobHistory

EXIT_UNKNOWN = 1

__all__ = ["add_parser", "cmd_explain", "render_explanation", "render_history"]


def add_parser(sub: Any) -> None:
    """Register `explain` on the `fumarole` parser's subparsers."""
    e = sub.add_parser(
        "explain",
        help="why a job is pending (or was), from an event log file",
        description=(
            "Print the job's phase, tasks by status, when it waits its ranked reasons, and its history: "
            "when and why it waited, when it was bound, evictions, phase changes (cycle ids, virtual times)."
        ),
    )
    e.add_argument(
        "--db",
        metavar="FILE|URL",
        help="the SQLite event log file, or a postgresql:// URL (default $FUMAROLE_DB)",
    )
    e.add_argument("job", metavar="NAMESPACE/JOB", help="the job (PodGroup) as <namespace>/<name>")
    e.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="output: text for humans (default) or the API's JSON (GET /v1/jobs/{namespace}/{name})",
    )
    e.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    import anyio
    import msgspec

    from fumarole.store.log import LogError

    ns, sep, name = args.job.partition("/")
    if not sep or not ns or not name or "/" in name:
        return bad_input(f"{args.job!r}: expected <namespace>/<job>")
    from fumarole.daemon.cli.eventlog import existing_db

    try:
        args.db = existing_db(args.db)
    except InputError as e:
        return bad_input(str(e))
    try:
        detail = anyio.run(_explain, args.db, ns, name)
    except LogError as e:
        return bad_input(str(e))
    if detail is None:
        from fumarole.store.backend import describe_db  # asyncpg and asyncio: not on other commands' start-up

        print(f"fumarole: job {ns}/{name} is not known in {describe_db(args.db)}", file=sys.stderr)
        return EXIT_UNKNOWN
    if args.format == "json":
        sys.stdout.write(msgspec.json.encode(detail).decode() + "\n")
    else:
        sys.stdout.write(render_explanation(detail))
    return EXIT_OK


async def _explain(db: str, ns: str, name: str) -> JobDetail | None:
    from fumarole.daemon.runtime.api_view import ReadOnlyView

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
    if not d.queue_exists:
        lines.append(f"queue {d.queue} does not exist: no session considers this job until it does")
    if ex is None:
        if not d.queue_exists:
            lines.append("pending: yes (its queue does not exist)" if d.pending else "pending: no")
        else:
            lines.append("pending: no" if not d.pending else "pending: yes (no explanation recorded yet)")
        lines.extend(render_history(d.history))
        return "\n".join(lines) + "\n"
    lines.append(f"pending: {ex.message}")
    lines.append(f"position in queue {d.queue}: {ex.queue_position}  (as of cycle {ex.cycle})")
    if d.waited_ms is not None:
        lines.append(f"waiting for {_duration(d.waited_ms)} (virtual time, to the log's last cycle)")
    if d.ahead_total:
        names = ", ".join(f"{a.namespace}/{a.name}" for a in d.ahead[:5])
        more = f" and {d.ahead_total - 5} more" if d.ahead_total > 5 else ""
        lines.append(f"ahead in its queue: {names}{more}")
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
