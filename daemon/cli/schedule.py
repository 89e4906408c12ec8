"""`fumarole schedule`: the offline dry run over manifests, its flags and its output."""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

from fumarole.daemon.cli.exits import EXIT_OK, InputError
from fumarole.daemon.gc_pause import collector_paused

__all__ = ["add_parser", "cmd_schedule"]


def add_parser(sub: Any) -> None:
    """Register `schedule` on the `fumarole` parser's subparsers."""
    s = sub.add_parser(
        "schedule",
        help="offline dry run of scheduling sessions over manifests",
        description=(
            "Run Volcano scheduling sessions over Kubernetes/Volcano manifests, offline (no daemon, no "
            "event log), and print the decisions: binds, evictions, pipelined pods, queue shares and why "
            "each pending job waits. Exit 2 on a bad manifest or configuration (named by file and field)."
        ),
    )
    s.add_argument(
        "--conf",
        metavar="SCHED.yaml",
        help="Volcano scheduler configuration (default: Volcano's built-in default)",
    )
    s.add_argument(
        "--cluster",
        required=True,
        metavar="FILE|DIR",
        help="manifests: a YAML file (multi-document or List) or a directory of them",
    )
    s.add_argument(
        "--cycles",
        type=int,
        default=1,
        metavar="N",
        help="number of sessions, each seeing the decisions of the previous ones applied (default 1)",
    )
    s.add_argument(
        "--format",
        choices=("json", "table"),
        default="json",
        help="output: one JSON object (default) or a human-readable table",
    )
    s.add_argument(
        "--now",
        metavar="TIME|manifests",
        help=(
            "the first session's clock: RFC 3339 (2024-03-05T12:00:00Z) or Unix seconds; 'manifests' = "
            "the newest creationTimestamp given (reproducible); default: the wall clock, as Volcano"
        ),
    )
    s.add_argument(
        "--strict",
        action="store_true",
        help="refuse a scheduler configuration that draws a warning (e.g. an unknown plugin name)",
    )
    s.add_argument(
        "--callouts-from",
        metavar="FILE",
        help=(
            "answer the extender plugin's HTTP calls from FILE (JSON lines, as --callouts-out writes or "
            "`fumarole events --type cycle.callouts` prints) instead of calling out; a call it lacks: exit 2"
        ),
    )
    s.add_argument(
        "--callouts-out",
        metavar="FILE",
        help="write the extender calls of this run and their answers to FILE (JSON lines, one per cycle)",
    )
    s.add_argument(
        "--timings",
        action="store_true",
        help="print the seconds (wall and CPU) of each phase as one JSON line on stderr (bench/schedule.py)",
    )
    s.set_defaults(func=cmd_schedule)


def _read_conf(path: str | None, *, strict: bool = False):  # type: ignore[no-untyped-def]
    from fumarole.daemon.scheduler.framework.conf import DEFAULT_SCHEDULER_CONF
    from fumarole.daemon.scheduler.framework.conf_check import parse_scheduler_conf

    if path is None:
        return parse_scheduler_conf(DEFAULT_SCHEDULER_CONF, "<built-in default>", strict=strict)
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(f"{path}: cannot read the scheduler configuration: {e.strerror}") from e
    return parse_scheduler_conf(text, path, strict=strict)


def _session_now(value: str | None) -> float | None:
    """`--now`: the wall clock, read here once (never inside a session), or the value given."""
    from fumarole.daemon.cli.dry_run import NowError, parse_now

    if value is None:
        return time.time()
    try:
        return parse_now(value)
    except NowError as e:
        raise InputError(str(e)) from e


class _Phases:
    """Wall and CPU seconds per phase of the command, for `--timings`."""

    def __init__(self) -> None:
        self.figures: dict[str, dict[str, float]] = {}
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    def mark(self, phase: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.figures[phase] = {"wall": round(wall - self._wall, 4), "cpu": round(cpu - self._cpu, 4)}
        self._wall, self._cpu = wall, cpu


def _dry_run_with_callouts(args: argparse.Namespace, snapshot: Any, conf: Any, now: Any, dry_run: Any) -> Any:
    """The sessions, calling out live (the extender's configured URL) or answered from
    `--callouts-from`; with `--callouts-out` every cycle's calls are written as they end."""
    from fumarole.daemon.scheduler.framework.callout import CalloutUnavailable, RecordingPort, ReplayPort

    inner: Any
    if args.callouts_from:
        from fumarole.daemon.cli.callout_files import read_records

        inner = ReplayPort(read_records(args.callouts_from), source=f"--callouts-from {args.callouts_from}")
    else:
        from fumarole.daemon.callouts_http import HttpCalloutPort

        inner = HttpCalloutPort()
    port = RecordingPort(inner)
    out_file = None
    if args.callouts_out:
        try:
            out_file = open(args.callouts_out, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as e:
            raise InputError(f"--callouts-out {args.callouts_out}: cannot write: {e.strerror}") from e
    written = 0

    def cycle_done(cycle: int) -> None:
        nonlocal written
        if out_file is not None:
            from fumarole.daemon.cli.callout_files import write_cycle

            write_cycle(out_file, cycle, port.records[written:])
        written = len(port.records)

    try:
        return dry_run(
            snapshot,
            conf,
            args.cycles,
            now=now,
            between_cycles=gc.collect,
            callouts=port,
            cycle_done=cycle_done,
        )
    except CalloutUnavailable as e:
        raise InputError(str(e)) from None
    finally:
        if out_file is not None:
            out_file.close()


def cmd_schedule(args: argparse.Namespace) -> int:
    # Loading a large cluster allocates millions of objects, none of them garbage (the collector
    # would take about a third of the load time); the session releases its own reference cycles.
    with collector_paused():
        rc = _schedule(args)
        # The process ends next (the output is written): the cyclic collector's last pass at
        # interpreter exit would walk and free the sessions' millions of objects (0.02-0.05 s of a
        # 1.4 s run on issue 11's cluster) for nothing.  Frozen objects are left to the exit as they
        # are; an in-process caller only keeps this call's reference cycles until it ends.  Frozen
        # while the collector is still paused: every object made since the pause is in its youngest
        # generation, which the first allocation after re-enabling it would otherwise walk (~12 ms).
        gc.freeze()
    return rc


def _schedule(args: argparse.Namespace) -> int:
    phases = _Phases()
    from fumarole.daemon.manifests.reading import start_loading

    if args.cycles < 1:
        raise InputError("--cycles: must be at least 1")
    now = _session_now(args.now)
    # A large YAML file's second half is parsed in a child process while the scheduler's modules
    # are imported and the configuration is parsed here (daemon/manifests/yaml_split.py).
    loading = start_loading(args.cluster)
    try:
        from fumarole.daemon.cli.dry_run import dry_run, to_json
        from fumarole.daemon.manifests.snapshot import build_loading

        conf = _read_conf(args.conf, strict=args.strict)
    except BaseException:
        loading.cancel()
        raise
    phases.mark("imports_and_conf")
    # The first part's objects are decoded while the child parses the second (daemon/manifests/snapshot.py).
    try:
        snapshot = build_loading(loading, loaded=lambda: phases.mark("load"))
    finally:
        loading.cancel()  # and the documents released before the sessions
    phases.mark("build")
    conf_path = Path(args.conf).resolve() if args.conf else None
    for name in loading.skipped:
        if Path(name).resolve() != conf_path:
            print(
                f"note: {name}: a scheduler configuration, not manifests: skipped (pass it as --conf)",
                file=sys.stderr,
            )
    result = _dry_run_with_callouts(args, snapshot, conf, now, dry_run)
    phases.mark("sessions")
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.format == "json":
        sys.stdout.write(json.dumps(to_json(result), sort_keys=False, separators=(",", ":")) + "\n")
    else:
        from fumarole.daemon.cli.tables import render_table, stdout_terminal_width  # rich: only for tables

        sys.stdout.write(render_table(result, terminal_width=stdout_terminal_width()))
    phases.mark("output")
    if args.timings:
        print(json.dumps({"timings": phases.figures}), file=sys.stderr)
    return EXIT_OK
