"""`fumarole migrate` and `fumarole events`: the event log's schema and a read-only JSON-lines dump."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from daemon.cli.exits import EXIT_OK, bad_input


def add_parsers(sub: Any) -> None:
    """Register the `migrate` and `events` subcommands on the `fumarole` parser's subparsers."""
    m = sub.add_parser(
        "migrate",
        help="create the event log or bring its schema up to date",
        description=(
            "Apply the schema migrations this Fumarole ships to an SQLite event log, in order, each in one "
            "transaction (the file is created if missing). The daemon does the same when it opens the log; "
            "this runs it explicitly. A database migrated by a newer Fumarole, or one a running daemon "
            "holds, is refused (exit 2)."
        ),
    )
    m.add_argument(
        "--db", required=True, metavar="FILE", help="the SQLite event log file (its directory must exist)"
    )
    m.set_defaults(func=cmd_migrate)

    e = sub.add_parser(
        "events",
        help="dump the event log as JSON lines (read-only)",
        description=(
            'Print the events of an SQLite event log, one JSON object a line: {"seq": N, "type": "...", '
            '"event": {...}}, in seq order. Opens the file read-only. Exit 2 when the file is missing, is '
            "not a Fumarole event log, has another schema version, or holds an undecodable row."
        ),
    )
    e.add_argument("--db", required=True, metavar="FILE", help="the SQLite event log file")
    e.add_argument(
        "--since", type=int, default=1, metavar="SEQ", help="first seq to print (inclusive; default 1)"
    )
    e.add_argument(
        "--type",
        dest="types",
        action="append",
        metavar="T",
        help="only events of this type (e.g. decision.bind); repeat or comma-separate for several",
    )
    e.add_argument("--limit", type=int, metavar="N", help="print at most N events")
    e.set_defaults(func=cmd_events)


def cmd_migrate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from store.lock import LogLockedError, check_unlocked
    from store.log import LogError
    from store.migrate import MigrationError, load_migrations, migrate

    parent = Path(args.db).parent
    if not parent.is_dir():
        what = f"{parent} is not a directory" if parent.exists() else f"the directory {parent} does not exist"
        return bad_input(f"{args.db}: {what} (migrate creates the file, not its directory)")
    try:
        check_unlocked(args.db)
    except LogLockedError as e:
        return bad_input(f"{e}; stop the daemon that writes it before migrating")
    except LogError as e:
        return bad_input(str(e))
    try:
        applied = migrate(args.db)
        version = load_migrations()[-1].version
    except MigrationError as e:
        return bad_input(str(e))
    if applied:
        print(f"{args.db}: applied migration(s) {', '.join(map(str, applied))}; schema version {version}")
    else:
        print(f"{args.db}: schema version {version}, up to date")
    return EXIT_OK


def cmd_events(args: argparse.Namespace) -> int:
    import anyio

    from store.events import EVENT_TYPES
    from store.log import LogError

    types: list[str] | None = None
    if args.types:
        types = sorted({t.strip() for arg in args.types for t in arg.split(",") if t.strip()})
        unknown = [t for t in types if t not in EVENT_TYPES]
        if unknown:
            known = ", ".join(sorted(EVENT_TYPES))
            return bad_input(f"--type: unknown event type(s) {', '.join(unknown)} (known: {known})")
    if args.limit is not None and args.limit < 0:
        return bad_input("--limit: must be 0 or more")
    try:
        anyio.run(_dump, args.db, args.since, types, args.limit)
    except LogError as e:
        return bad_input(str(e))
    return EXIT_OK


async def _dump(db: str, since: int, types: list[str] | None, limit: int | None) -> None:
    from contextlib import aclosing

    import msgspec

    from store.sqlite import SqliteEventLog

    log = await SqliteEventLog.open(db, readonly=True, readers=1)
    try:
        out = sys.stdout.buffer
        last = await log.last_seq()
        left = limit
        if left == 0:
            return
        async with aclosing(log.read_range(max(since, 1), last, types=types, batch=5000)) as rows:
            async for s in rows:
                out.write(msgspec.json.encode({"seq": s.seq, "type": s.type, "event": s.event}) + b"\n")
                if left is not None:
                    left -= 1
                    if left == 0:
                        break
        out.flush()
    finally:
        await log.close()
