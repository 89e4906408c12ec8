"""`fumarole report --db RUN.db --out DIR [--compare B.db ...]`: figures, CSV numbers, a page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from daemon.cli.exits import EXIT_OK, bad_input


def add_parser(sub: Any) -> None:
    r = sub.add_parser(
        "report",
        help="an HTML page with PNG figures and CSV numbers from one or more run logs",
        description="Read run logs (daemon or study runs) and write DIR/index.html, DIR/*.png, DIR/*.csv.",
    )
    r.add_argument("--db", required=True, metavar="RUN.db", help="the run's event log")
    r.add_argument("--compare", nargs="*", default=[], metavar="B.db", help="more runs to overlay")
    r.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")
    r.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from daemon.study.report import write_report

    dbs = [Path(args.db), *[Path(p) for p in args.compare]]
    for db in dbs:
        if db.is_dir():
            return bad_input(f"{db}: is a directory, not an event log (the log is DIR/fumarole.db)")
        if not db.is_file():
            return bad_input(f"{db}: no such file")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        return bad_input(f"--out: {out} is not a directory")

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    from store.log import LogError

    try:
        files = write_report(dbs, out, progress=progress)
    except LogError as e:  # not a log, or a newer schema
        return bad_input(str(e))
    print(f"report: {len(files)} files in {out} (open {out / 'index.html'})")
    return EXIT_OK
