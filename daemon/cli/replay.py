"""`fumarole replay`: verify every recorded cycle against the code, or ask "what if" of another configuration.

Exit codes: 0 every replayed cycle is identical; 1 at least one differs (the first difference
is named per cycle); 2 bad input (missing or foreign file, unreadable configuration, a corrupt
or unknown row — named by its seq — or a cycle whose configuration is not in the log).
With `--conf`, the alternative's differences are the answer, not a failure: the exit code
still reports whether the recorded cycles themselves verify.
Each cycle runs at the clock the log held at its watermark (the recorded now), never the wall clock.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from fumarole.daemon.cli.exits import EXIT_DIFFERENT, EXIT_OK, InputError, bad_input

__all__ = ["add_parser", "cmd_replay", "report_json", "report_table"]


def add_parser(sub: Any) -> None:
    """Register `replay` on the `fumarole` parser's subparsers."""
    r = sub.add_parser(
        "replay",
        help="re-run every recorded cycle from the event log and compare (or try another configuration)",
        description=(
            "Rebuild the projection from an event log (opened read-only) and re-run every recorded cycle "
            "at its watermark with its recorded configuration; report per cycle identical/different, "
            "naming the first differing decision. Exit 1 on any difference, 2 on bad input or a corrupt "
            "log. With --conf, also run that configuration over the same history and report what would "
            "have differed (binds per job, pods placed elsewhere, evictions, queue shares)."
        ),
    )
    r.add_argument(
        "--db",
        metavar="FILE|URL",
        help="the SQLite event log file, or a postgresql:// URL (default $FUMAROLE_DB)",
    )
    r.add_argument(
        "--conf",
        metavar="ALT.yaml",
        help="an alternative Volcano scheduler configuration: also report what it would have changed",
    )
    r.add_argument(
        "--strict",
        action="store_true",
        help="refuse an alternative configuration (--conf) that draws a warning (e.g. an unknown plugin)",
    )
    r.add_argument(
        "--from",
        dest="from_seq",
        type=int,
        default=1,
        metavar="SEQ",
        help=(
            "replay the cycles whose cycle.opened event has sequence number SEQ or later (an event seq, "
            "the SEQ column of the report, not a cycle number; default 1)"
        ),
    )
    r.add_argument(
        "--to",
        dest="to_seq",
        type=int,
        metavar="SEQ",
        help=(
            "replay the cycles whose cycle.opened event has sequence number SEQ or earlier (an event seq, "
            "not a cycle number; default: the end of the log)"
        ),
    )
    r.add_argument(
        "--format",
        choices=("json", "table"),
        default="table",
        help="output: a table per cycle (default) or one JSON object",
    )
    r.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    import anyio

    from fumarole.daemon.runtime.conf_watch import conf_hash
    from fumarole.daemon.runtime.replay import ReplayError
    from fumarole.daemon.scheduler.framework.conf import ConfError
    from fumarole.daemon.scheduler.framework.conf_check import parse_scheduler_conf
    from fumarole.store.log import LogError

    if args.from_seq < 1:
        return bad_input("--from: must be 1 or more")
    if args.to_seq is not None and args.to_seq < args.from_seq:
        return bad_input("--to: must not be below --from")
    from fumarole.daemon.cli.eventlog import existing_db
    from fumarole.store.backend import describe_db

    try:
        db = existing_db(args.db)
    except InputError as e:
        return bad_input(str(e))
    alternative = None
    alt_hash = ""
    if args.conf:
        try:
            text = Path(args.conf).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            return bad_input(f"{args.conf}: cannot read the scheduler configuration: {e}")
        try:
            alternative = parse_scheduler_conf(text, args.conf, strict=args.strict)
        except ConfError as e:
            return bad_input(str(e))
        for w in alternative.warnings:
            print(f"warning: {w}", file=sys.stderr)
        alt_hash = conf_hash(text)
    try:
        report = anyio.run(_run, db, alternative, alt_hash, args.from_seq, args.to_seq)
    except LogError as e:
        return bad_input(str(e))
    except (ReplayError, ConfError) as e:
        return bad_input(str(e))
    if args.format == "json":
        sys.stdout.write(json.dumps(report_json(report, describe_db(db)), separators=(",", ":")) + "\n")
    else:
        from fumarole.daemon.cli.tables import stdout_terminal_width

        sys.stdout.write(report_table(report, describe_db(db), terminal_width=stdout_terminal_width()))
    return EXIT_DIFFERENT if report.different else EXIT_OK


def _progress() -> tuple[AbstractContextManager[Any], Callable[[int, int], None] | None]:
    if not sys.stderr.isatty():
        return nullcontext(), None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn("replay"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("cycles"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task("replay", total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return bar, update


async def _run(db: str, alternative: Any, alt_hash: str, from_seq: int, to_seq: int | None) -> Any:
    from fumarole.daemon.runtime.replay import replay
    from fumarole.store.backend import open_log

    log = await open_log(db, readonly=True)
    try:
        ctx, update = _progress()
        with ctx:
            return await replay(
                log,
                alternative=alternative,
                alternative_hash=alt_hash,
                from_seq=from_seq,
                to_seq=to_seq,
                progress=update,
            )
    finally:
        await log.close()


# ---------------------------------------------------------------------------------------------
# output


def _whatif_json(w: Any) -> dict[str, Any]:
    return {
        "bindsByJob": {j: {"recorded": a, "alternative": b} for j, (a, b) in w.binds_by_job.items()},
        "placedElsewhere": {p: {"recorded": a, "alternative": b} for p, (a, b) in w.moved.items()},
        "evictionsAdded": list(w.evictions_added),
        "evictionsDropped": list(w.evictions_dropped),
        "queueShares": {q: {"recorded": a, "alternative": b} for q, (a, b) in w.queue_shares.items()},
    }


def report_json(report: Any, db: str) -> dict[str, Any]:
    cycles = []
    for v in report.cycles:
        item: dict[str, Any] = {
            "cycle": v.cycle,
            "seq": v.seq,
            "watermark": v.watermark,
            "confHash": v.conf_hash,
            "identical": v.identical,
            "firstDifference": v.difference or None,
        }
        if v.whatif is not None:
            item["whatIf"] = _whatif_json(v.whatif)
        cycles.append(item)
    out: dict[str, Any] = {
        "db": db,
        "lastSeq": report.last_seq,
        "cycles": cycles,
        "summary": {
            "cycles": len(report.cycles),
            "identical": len(report.cycles) - len(report.different),
            "different": len(report.different),
            "eventsFolded": report.events_folded,
            "seconds": round(report.seconds, 3),
        },
    }
    if report.alternative_hash:
        changed = [v for v in report.cycles if v.whatif is not None and not v.whatif.empty]
        out["summary"]["alternativeConfHash"] = report.alternative_hash
        out["summary"]["cyclesChangedByAlternative"] = len(changed)
    return out


def _whatif_text(w: Any) -> str:
    parts = []
    if w.binds_by_job:
        parts.append("binds " + ", ".join(f"{j} {a}->{b}" for j, (a, b) in w.binds_by_job.items()))
    if w.moved:
        parts.append(f"{len(w.moved)} pod(s) placed differently")
    if w.evictions_added or w.evictions_dropped:
        parts.append(f"evictions +{len(w.evictions_added)}/-{len(w.evictions_dropped)}")
    if w.queue_shares:
        parts.append("shares " + ", ".join(f"{q} {a:.3f}->{b:.3f}" for q, (a, b) in w.queue_shares.items()))
    return "; ".join(parts) or "no change"


def report_table(report: Any, db: str, *, terminal_width: int | None = None) -> str:
    from fumarole.daemon.cli.tables import text_table

    alt = bool(report.alternative_hash)
    headers = ["CYCLE", "SEQ", "WATERMARK", "RESULT", "FIRST DIFFERENCE"]
    if alt:
        headers.append("WITH --conf")
    rows = []
    for v in report.cycles:
        row = [str(v.cycle), str(v.seq), str(v.watermark), "identical" if v.identical else "DIFFERENT"]
        row.append(v.difference)
        if alt:
            row.append(_whatif_text(v.whatif) if v.whatif is not None else "-")
        rows.append(row)
    head = f"Fumarole replay: {db} (log up to seq {report.last_seq})\n\n"
    body = "no recorded cycles in range\n"
    if rows:
        body = text_table(headers, rows, terminal_width=terminal_width)
    n = len(report.cycles)
    diff = len(report.different)
    summary = (
        f"\n{n} cycle(s) replayed: {n - diff} identical, {diff} different; "
        f"{report.events_folded} events folded in {report.seconds:.2f} s"
    )
    if alt:
        changed = sum(1 for v in report.cycles if v.whatif is not None and not v.whatif.empty)
        summary += f"; the alternative configuration changes {changed} cycle(s)"
    return head + body + summary + "\n"
