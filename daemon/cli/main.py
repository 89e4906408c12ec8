"""The `fumarole` command: its top-level parser, the subcommands' registration and exit codes.

One module per subcommand in this package (schedule, run, replay, explain, serve, and migrate /
events in eventlog); each registers its parser with `add_parser(sub)`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from fumarole.daemon.cli import eventlog, explain, replay, report, run, schedule, serve, study
from fumarole.daemon.cli.exits import EXIT_OK, InputError, bad_input


def _version() -> str:
    """The installed distribution's version (pyproject.toml's, once installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fumarole")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """argparse's version action, reading the installed version only when asked (start-up cost)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        sys.stdout.write(f"{parser.prog} {_version()}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fumarole",
        description="Volcano's batch scheduling model as an event-sourced daemon.",
    )
    p.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    schedule.add_parser(sub)
    run.add_parser(sub)
    eventlog.add_parsers(sub)
    replay.add_parser(sub)
    serve.add_parser(sub)
    explain.add_parser(sub)
    study.add_parser(sub)
    report.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from fumarole.daemon.manifests import ManifestError
    from fumarole.daemon.scheduler.framework.conf import ConfError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc: int = args.func(args)
    except (InputError, ManifestError, ConfError) as e:
        return bad_input(str(e))
    except BrokenPipeError:
        return EXIT_OK
    if argv is None and args.func is schedule.cmd_schedule:
        _exit_now(rc)
    return rc


def _exit_now(rc: int) -> None:
    """End the process without the interpreter's teardown: `fumarole schedule` as a command (not
    `main([...])` called in a process that goes on) has written everything, and freeing its
    sessions' millions of objects would take ~30 ms more."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(rc)


if __name__ == "__main__":
    sys.exit(main())
