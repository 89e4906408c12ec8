"""`fumarole run`: the daemon (settings from flags, FUMAROLE_* environment and a TOML file)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from fumarole.daemon.cli.exits import EXIT_FAILED, bad_input


def add_parser(sub: Any) -> None:
    r = sub.add_parser(
        "run",
        help="the daemon: ingest, timed sessions, decisions, dispatch (default: the bundled simulation)",
        description=(
            "Run the Fumarole daemon. With no arguments: data in ./fumarole-data (SQLite), the simulator "
            "with the bundled sample cluster and workload, REST API on 127.0.0.1:8321; exits with a summary "
            "once the workload drained (unless --serve). One daemon per data directory: a second one "
            "is refused (exit 2, naming the first one's PID). Settings: flags > FUMAROLE_* environment > "
            "--config file > defaults."
        ),
    )
    r.add_argument(
        "--config",
        metavar="FILE.toml",
        help="daemon settings file (TOML; keys as in docs/daemon.md 'Daemon settings'; env FUMAROLE_CONFIG)",
    )
    r.add_argument(
        "--data-dir",
        metavar="DIR",
        help="directory of the SQLite event log, one daemon at a time (default ./fumarole-data)",
    )
    r.add_argument(
        "--db",
        metavar="postgresql://…",
        help=(
            "keep the event log in PostgreSQL instead (shared by replicas: one leads, the others stand by "
            "and take over; env FUMAROLE_DB; docs/postgresql.md)"
        ),
    )
    r.add_argument(
        "--conf",
        dest="scheduler_conf",
        metavar="SCHED.yaml",
        help="Volcano scheduler configuration, re-read before every cycle (default: the bundled one)",
    )
    r.add_argument(
        "--strict",
        action="store_true",
        default=None,
        help="refuse a scheduler configuration that draws a warning (e.g. an unknown plugin name)",
    )
    r.add_argument(
        "--adapter", choices=("simulator", "kubernetes"), help="cluster adapter (default simulator)"
    )
    r.add_argument(
        "--cluster", metavar="FILE|DIR", help="simulator: cluster manifests (default: the bundled sample)"
    )
    r.add_argument(
        "--workload", metavar="FILE|DIR", help="simulator: workload manifests (default: the bundled sample)"
    )
    r.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubernetes: kubeconfig (default $KUBECONFIG, ~/.kube/config, or the in-cluster config)",
    )
    r.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="REST API address (default 127.0.0.1:8321; port 0 = any free port)",
    )
    r.add_argument("--allow-remote", action="store_true", default=None, help="allow --listen beyond loopback")
    r.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        metavar="NAME[:PORT]",
        help="a Host name the API answers to besides localhost, loopback and the listen address "
        "(repeatable; replaces FUMAROLE_ALLOWED_HOSTS; '*' = any, no DNS-rebinding protection)",
    )
    r.add_argument(
        "--read-token",
        dest="read_token_file",
        metavar="FILE",
        help="require the token in FILE's first line for every read (Bearer, or the dashboard's login); "
        "or FUMAROLE_READ_TOKEN",
    )
    r.add_argument(
        "--require-read-token",
        action="store_true",
        default=None,
        help="refuse to start without a read token",
    )
    r.add_argument(
        "--no-api", dest="api", action="store_false", default=None, help="do not serve the REST API"
    )
    r.add_argument(
        "--serve", action="store_true", default=None, help="keep serving after the workload drained"
    )
    r.add_argument(
        "--schedule-period",
        type=float,
        metavar="SECONDS",
        help="seconds between cycles, virtual with the simulator (default 1)",
    )
    r.add_argument(
        "--max-cycles",
        type=int,
        metavar="N",
        help="simulator: give up (exit 1) after this many cycles (default 100000)",
    )
    r.add_argument("--log-format", choices=("json", "text"), help="stderr log format (default text)")
    r.add_argument(
        "--log-level", choices=("debug", "info", "warning", "error"), help="stderr log level (default info)"
    )
    r.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from fumarole.daemon.runtime.service import hold_signals

    hold_signals()  # from here to the exit a SIGTERM/SIGINT stops the daemon cleanly (exit 0)
    import anyio

    from fumarole.daemon.manifests import ManifestError
    from fumarole.daemon.runtime.conf_watch import ConfError
    from fumarole.daemon.runtime.logs import configure_logging
    from fumarole.daemon.runtime.service import Service, ServiceError, held_signal
    from fumarole.daemon.runtime.settings import SettingsError, load_settings
    from fumarole.daemon.runtime.telemetry import make_tracer_provider
    from fumarole.store.log import FencedError, LogError

    flags = {
        k: getattr(args, k)
        for k in (
            "data_dir",
            "db",
            "scheduler_conf",
            "strict",
            "adapter",
            "cluster",
            "workload",
            "kubeconfig",
            "listen",
            "allow_remote",
            "allowed_hosts",
            "read_token_file",
            "require_read_token",
            "api",
            "serve",
            "schedule_period",
            "max_cycles",
            "log_format",
            "log_level",
        )
    }
    try:
        settings = load_settings(args.config or os.environ.get("FUMAROLE_CONFIG"), os.environ, flags)
        tracer_provider = make_tracer_provider()
    except (SettingsError, ValueError) as e:
        return bad_input(str(e))
    configure_logging(settings.log_level, settings.log_format)
    if held_signal():
        logging.getLogger("fumarole").info("signal before the start: stopped")
        if tracer_provider is not None:
            tracer_provider.shutdown()
        return 0
    service = Service(settings, tracer_provider=tracer_provider)
    try:
        rc: int = anyio.run(service.run, backend="asyncio")
    except (ServiceError, ConfError, ManifestError, LogError) as e:
        if isinstance(e, FencedError):
            return _refused(e)
        return bad_input(str(e))
    except OSError as e:
        return _os_failure(e)
    except BaseExceptionGroup as e:  # a task of the daemon failed on the log (a database gone, refused)
        from fumarole.daemon.runtime.shared_log import log_error_in

        failed = log_error_in(e)
        if failed is None:
            os_failed = _os_error_in(e)
            if os_failed is None:
                raise
            return _os_failure(os_failed)
        if isinstance(failed, FencedError):
            return _refused(failed)
        logging.getLogger("fumarole").error("stopped: %s", failed)
        print(f"fumarole: error: {failed}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if tracer_provider is not None:
            tracer_provider.shutdown()
    return rc


def _refused(e: Exception) -> int:
    """A stale leader's write refused by the shared log's database: exit 1."""
    logging.getLogger("fumarole").error("stopped: the database refused a write: %s", e)
    print(f"fumarole: error: the database refused this replica's write: {e}", file=sys.stderr)
    return EXIT_FAILED


def _os_error_in(exc: BaseException) -> OSError | None:
    """The first OSError among the leaves of an exception group (a task of the daemon failed on a
    file: a full disk, a read-only file system), or None."""
    if isinstance(exc, BaseExceptionGroup):
        return next((f for e in exc.exceptions if (f := _os_error_in(e)) is not None), None)
    return exc if isinstance(exc, OSError) else None


def _os_failure(e: OSError) -> int:
    """An OS error that stopped the daemon: one line naming the file (when the error names one), exit 1."""
    where = f"{e.filename}: " if e.filename else ""
    why = e.strerror or str(e)
    logging.getLogger("fumarole").error("stopped: %s%s", where, why)
    print(f"fumarole: error: {where}{why}", file=sys.stderr)
    return EXIT_FAILED
