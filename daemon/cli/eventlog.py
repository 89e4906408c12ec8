"""`fumarole migrate` and `fumarole events`: the event log's schema and a read-only JSON-lines dump."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fumarole.daemon.cli.exits import EXIT_OK, InputError, bad_input


def db_arg(value: str | None) -> str | None:
    """`--db`, else $FUMAROLE_DB, else None."""
    import os

    return value or os.environ.get("FUMAROLE_DB") or None


def checked_url(db: str, what: str = "--db") -> None:
    """InputError (exit 2, one line, no password shown) for a URL that is not a usable postgresql://
    one (another scheme, a bad port, an unclosed `[`); a file path passes."""
    from fumarole.store.pg_url import DsnError, check_dsn, is_postgres_url, looks_like_url

    if is_postgres_url(db) or looks_like_url(db):
        try:
            check_dsn(db, what=what)
        except DsnError as e:
            raise InputError(str(e)) from None


def existing_db(value: str | None) -> str:
    """The log a reading command opens: `--db` or $FUMAROLE_DB, a PostgreSQL URL or an existing
    file; InputError (exit 2) otherwise."""
    from pathlib import Path

    from fumarole.store.backend import is_postgres_url

    db = db_arg(value)
    if db is None:
        raise InputError("--db: required (or set FUMAROLE_DB)")
    checked_url(db)
    if not is_postgres_url(db) and Path(db).is_dir():
        raise InputError(f"{db}: is a directory, not an event log (the log is DIR/fumarole.db)")
    if not is_postgres_url(db) and not Path(db).is_file():
        raise InputError(f"{db}: no such file")
    return db


def add_parsers(sub: Any) -> None:
    """Register the `migrate` and `events` subcommands on the `fumarole` parser's subparsers."""
    m = sub.add_parser(
        "migrate",
        help="create the event log or bring its schema up to date; copy an SQLite log into PostgreSQL",
        description=(
            "With --db: apply the schema migrations this Fumarole ships to an event log (an SQLite file, "
            "created if missing, or a postgresql:// database), in order. The daemon does the same when it "
            "opens the log; this runs it explicitly. A database migrated by a newer Fumarole, or one a "
            "running daemon holds, is refused (exit 2). With --from sqlite:///FILE --to postgresql://…: copy "
            "the log with its snapshots and checkpoints into an empty PostgreSQL log in one transaction, "
            "then verify both sides' counts and SHA-256 digest (exit 1 when they differ)."
        ),
    )
    m.add_argument(
        "--db",
        metavar="FILE|URL",
        help="the SQLite event log file (its directory must exist) or a postgresql:// URL",
    )
    m.add_argument("--from", dest="source", metavar="sqlite:///FILE", help="copy: the SQLite log to copy")
    m.add_argument("--to", dest="target", metavar="postgresql://…", help="copy: the empty PostgreSQL log")
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
    e.add_argument(
        "--db",
        metavar="FILE|URL",
        help="the SQLite event log file, or a postgresql:// URL (default $FUMAROLE_DB)",
    )
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

    from fumarole.store.backend import is_postgres_url

    if args.source or args.target:
        if args.db:
            return bad_input("migrate: give either --db, or --from and --to")
        return _cmd_copy(args.source, args.target)
    if not args.db:
        return bad_input("migrate: --db (or --from and --to) is required")
    try:
        checked_url(args.db)
    except InputError as e:
        return bad_input(str(e))
    if is_postgres_url(args.db):
        return _migrate_postgres(args.db)

    from fumarole.store.disk import check_writable
    from fumarole.store.lock import LogLockedError, check_unlocked
    from fumarole.store.log import LogError
    from fumarole.store.migrate import MigrationError, load_migrations, migrate

    parent = Path(args.db).parent
    if not parent.is_dir():
        what = f"{parent} is not a directory" if parent.exists() else f"the directory {parent} does not exist"
        return bad_input(f"{args.db}: {what} (migrate creates the file, not its directory)")
    try:
        check_unlocked(args.db)
        check_writable(args.db)  # a read-only disk or file, a full disk: named before anything
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


def _migrate_postgres(dsn: str) -> int:
    import anyio

    from fumarole.store.log import LogError
    from fumarole.store.pg_schema import pg_migrations
    from fumarole.store.postgres import redact_dsn

    async def go() -> list[int]:
        import asyncpg

        from fumarole.store.pg_schema import migrate_pg
        from fumarole.store.postgres import connect_error

        try:
            conn = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as e:
            raise LogError(f"{redact_dsn(dsn)}: cannot connect: {connect_error(e)}") from e
        try:
            return await migrate_pg(conn, redact_dsn(dsn))
        except asyncpg.PostgresError as e:  # e.g. no CREATE on the schema, a foreign schema_migrations
            raise LogError(f"{redact_dsn(dsn)}: cannot migrate the schema: {type(e).__name__}: {e}") from e
        finally:
            await conn.close()

    from fumarole.store.migrate import MigrationError
    from fumarole.store.postgres import CONNECT_TIMEOUT

    try:
        applied = anyio.run(go)
    except (LogError, MigrationError) as e:
        return bad_input(str(e))
    version = pg_migrations()[-1].version
    where = redact_dsn(dsn)
    if applied:
        print(f"{where}: applied migration(s) {', '.join(map(str, applied))}; schema version {version}")
    else:
        print(f"{where}: schema version {version}, up to date")
    return EXIT_OK


def _cmd_copy(source: str | None, target: str | None) -> int:
    import anyio

    from fumarole.daemon.cli.exits import EXIT_FAILED
    from fumarole.store.backend import is_postgres_url
    from fumarole.store.copy import CopyError, copy_sqlite_to_postgres, sqlite_path
    from fumarole.store.lock import LogLockedError, check_unlocked
    from fumarole.store.log import LogError
    from fumarole.store.postgres import redact_dsn

    if not source or not target:
        return bad_input("migrate: --from and --to go together")
    if not is_postgres_url(target):
        return bad_input(f"--to {redact_dsn(target)}: expected a postgresql:// URL")
    try:
        checked_url(target, "--to")
    except InputError as e:
        return bad_input(str(e))
    try:
        path = sqlite_path(source)
    except CopyError as e:
        return bad_input(f"--from: {e}")
    try:
        check_unlocked(path)
    except LogLockedError as e:
        return bad_input(f"{e}; stop the daemon that writes it before copying")
    except LogError as e:
        return bad_input(str(e))
    try:
        report = anyio.run(copy_sqlite_to_postgres, path, target)
    except CopyError as e:
        if str(e).startswith("verification failed"):
            print(f"fumarole: error: {e}", file=sys.stderr)
            return EXIT_FAILED
        return bad_input(str(e))
    except LogError as e:
        return bad_input(str(e))
    d = report.destination
    print(
        f"copied {path} -> {redact_dsn(target)}: {d.events} events, {d.snapshots} snapshots, "
        f"{d.checkpoints} checkpoints; verified (sha256 {d.sha256})"
    )
    return EXIT_OK


def cmd_events(args: argparse.Namespace) -> int:
    import anyio

    from fumarole.store.events import EVENT_TYPES
    from fumarole.store.log import LogError

    types: list[str] | None = None
    if args.types:
        types = sorted({t.strip() for arg in args.types for t in arg.split(",") if t.strip()})
        unknown = [t for t in types if t not in EVENT_TYPES]
        if unknown:
            known = ", ".join(sorted(EVENT_TYPES))
            return bad_input(f"--type: unknown event type(s) {', '.join(unknown)} (known: {known})")
    if args.limit is not None and args.limit < 0:
        return bad_input("--limit: must be 0 or more")
    args.db = db_arg(args.db)
    if args.db is None:
        return bad_input("--db: required (or set FUMAROLE_DB)")
    try:
        checked_url(args.db)
    except InputError as e:
        return bad_input(str(e))
    try:
        anyio.run(_dump, args.db, args.since, types, args.limit)
    except LogError as e:
        return bad_input(str(e))
    return EXIT_OK


async def _dump(db: str, since: int, types: list[str] | None, limit: int | None) -> None:
    from contextlib import aclosing

    import msgspec

    from fumarole.store.backend import open_log

    log = await open_log(db, readonly=True)
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
