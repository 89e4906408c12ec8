"""`fumarole report --db RUN.db --out DIR [--compare B.db ...]`: figures, CSV numbers, a page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fumarole.daemon.cli.exits import EXIT_OK, bad_input


def add_parser(sub: Any) -> None:
    r = sub.add_parser(
        "report",
        help="an HTML page with figures (PNG, SVG, PDF) and CSV numbers from one or more run logs",
        description="Read run logs (daemon or study runs) and write DIR/index.html, DIR/*.png, DIR/*.csv.",
    )
    r.add_argument("--db", required=True, metavar="RUN.db", help="the run's event log")
    r.add_argument("--compare", nargs="*", default=[], metavar="B.db", help="more runs to overlay")
    r.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")
    r.add_argument(
        "--formats",
        default="png,svg",
        help="figure formats, comma-separated: png (300 dpi), svg, pdf (default png,svg)",
    )
    r.add_argument(
        "--paper",
        metavar="CSV",
        help="the paper simulator's analysis_allo_discrete.csv: its curves for the runs' workloads",
    )
    r.add_argument("--xlim", metavar="LO,HI", help="inflation figure: arrived % axis (default: fit the data)")
    r.add_argument(
        "--ylim", metavar="LO,HI", help="inflation figure: allocated % axis (default: fit the data)"
    )
    r.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from fumarole.daemon.study.figures import FORMATS
    from fumarole.daemon.study.paper_results import PaperError
    from fumarole.daemon.study.report import write_report

    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if not formats or bad:
        return bad_input(f"--formats: {bad[0] if bad else 'empty'}: expected some of {', '.join(FORMATS)}")
    limits: dict[str, tuple[float, float]] = {}
    for flag in ("xlim", "ylim"):
        text = getattr(args, flag)
        if text is None:
            continue
        try:
            lo, hi = (float(x) for x in text.split(","))
        except ValueError:
            return bad_input(f"--{flag}: {text!r}: expected LO,HI (two numbers)")
        if not lo < hi:
            return bad_input(f"--{flag}: {text!r}: LO must be below HI")
        limits[flag] = (lo, hi)
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

    from fumarole.store.log import LogError

    try:
        files = write_report(
            dbs,
            out,
            progress=progress,
            formats=formats,
            paper=Path(args.paper) if args.paper else None,
            xlim=limits.get("xlim"),
            ylim=limits.get("ylim"),
        )
    except (LogError, PaperError) as e:  # not a log, or a newer schema; an unreadable --paper
        return bad_input(str(e))
    print(f"report: {len(files)} files in {out} (open {out / 'index.html'})")
    return EXIT_OK
