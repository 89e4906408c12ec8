"""run_session: open a session, run the configured actions, close it, report decisions.

Spans (OpenTelemetry API only; the caller injects a TracerProvider): `session`, one child per
plugin open and close (`plugin.open <name>` / `plugin.close <name>`) and one per action
(`action <name>`) carrying per-plugin callback counts and seconds as attributes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

from fumarole.daemon.scheduler.framework import registry
from fumarole.daemon.scheduler.framework.close import update_job_statuses, update_queue_allocated
from fumarole.daemon.scheduler.framework.conf import SchedulerConf, unknown_plugin_message
from fumarole.daemon.scheduler.framework.explain import pending_reasons
from fumarole.daemon.scheduler.framework.session import Eviction, Session
from fumarole.daemon.scheduler.model.fingerprint import SnapshotChangedError, fingerprint, first_difference
from fumarole.daemon.scheduler.model.job import PodGroupStatus
from fumarole.daemon.scheduler.model.resources import Resource
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskStatus

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from fumarole.daemon.scheduler.framework.callout import CalloutPort
    from fumarole.daemon.scheduler.framework.placement import SearchOptions
    from fumarole.daemon.scheduler.framework.plugin import Plugin

TRACER_NAME = "fumarole.scheduler"


# A PodGroup's status after the session: the session's own `PodGroupStatus` of the job (phase,
# conditions, running, succeeded, failed), handed out as is.  Every session job owns its status
# object and condition list (JobInfo.cow_clone / clone) and nothing changes them once the session
# is over, so the result needs no copy of them.
PodGroupOutcome = PodGroupStatus


@dataclass(slots=True)
class SessionResult:
    """What one session decided, in stable order."""

    session_id: str
    binds: dict[str, str]
    bind_order: list[str]
    pipelined: dict[str, str]
    evictions: list[Eviction]
    podgroups: dict[str, PodGroupOutcome]
    changed_podgroups: list[str]
    queues: dict[str, dict[str, Any]]
    pending: dict[str, str]
    warnings: list[str]
    stats: dict[str, dict[str, float]] = field(default_factory=dict)
    # Annotations a plugin asked the binder to write on a bound pod (deviceshare's card index).
    bind_annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    # Per queue of the session (name order): the allocated total the session close writes to the
    # Queue's `status.allocated` (close.py update_queue_allocated; pipelined tasks not counted,
    # unlike the queue-share plugin's own `allocated` in `queues`).
    queue_allocated: dict[str, Resource] = field(default_factory=dict)
    # Measured seconds per action (observability only: never part of a decision).
    action_seconds: dict[str, float] = field(default_factory=dict)
    # Measured seconds of the session's phases: "open" (session and plugins opened), "actions",
    # "close" (plugins closed, PodGroup statuses, queue totals), "result" (observability only).
    phase_seconds: dict[str, float] = field(default_factory=dict)
    # Whether the session read its virtual `now` (if not, the same snapshot decides the same at
    # any now: the daemon may reuse the result, see daemon/runtime/session_memo.py).
    read_now: bool = False


class UnknownActionError(ValueError):
    pass


def known_actions() -> frozenset[str]:
    return frozenset(registry.ACTIONS)


def known_plugins() -> frozenset[str]:
    return frozenset(registry.PLUGINS)


_guard = False


def guard_snapshots(on: bool = True) -> None:
    """Debug guard (tests switch it on): fingerprint every session's snapshot before and after the
    session and raise `SnapshotChangedError` if the session wrote to it (model/fingerprint.py)."""
    global _guard
    _guard = on


def run_session(
    snapshot: ClusterSnapshot,
    conf: SchedulerConf,
    *,
    tracer_provider: TracerProvider | None = None,
    explain: bool = True,
    search: SearchOptions | None = None,
    whole_copy: bool = False,
    callouts: CalloutPort | None = None,
) -> SessionResult:
    """One session; `search` overrides the node search flags (Volcano's --minimum-feasible-nodes,
    --minimum-percentage-nodes-to-find, --percentage-nodes-to-find) of the actions that search.

    `whole_copy` opens the session on a whole copy of the snapshot instead of a copy-on-write one
    (the same decisions, slower: the reference the tests compare against).

    `callouts` is the port through which plugins ask outside services (framework/callout.py:
    live, recording or replaying); without one a plugin that calls out raises CalloutUnavailable."""
    if not _guard:
        return _run_session(snapshot, conf, tracer_provider, explain, search, whole_copy, callouts)
    before = fingerprint(snapshot)
    result = _run_session(snapshot, conf, tracer_provider, explain, search, whole_copy, callouts)
    diff = first_difference(before, fingerprint(snapshot))
    if diff is not None:
        raise SnapshotChangedError(f"session {result.session_id} changed its snapshot: {diff}")
    return result


def _run_session(
    snapshot: ClusterSnapshot,
    conf: SchedulerConf,
    tracer_provider: TracerProvider | None,
    explain: bool,
    search: SearchOptions | None,
    whole_copy: bool,
    callouts: CalloutPort | None,
) -> SessionResult:
    tracer = (
        tracer_provider.get_tracer(TRACER_NAME)
        if tracer_provider is not None
        else trace.get_tracer(TRACER_NAME)
    )
    measuring = tracer_provider is not None
    for a in conf.actions:
        if a not in registry.ACTIONS:
            raise UnknownActionError(f"action {a!r} is not implemented by Fumarole")
    with tracer.start_as_current_span("session") as root:
        t_open = time.perf_counter()
        ssn = Session(snapshot, conf, measure_callbacks=measuring, whole_copy=whole_copy)
        ssn.tie_seed = search.tie_seed if search is not None else None
        if callouts is not None:
            ssn.callouts = callouts
        ssn.typical_shapes = search.typical_shapes if search is not None else None
        root.set_attribute("session.id", ssn.uid)
        root.set_attribute("session.jobs", len(ssn.jobs))
        root.set_attribute("session.nodes", len(ssn.node_list))
        root.set_attribute("conf.hash", conf.digest)
        plugins: list[Plugin] = []
        for tier in conf.tiers:
            for opt in tier.plugins:
                factory = registry.PLUGINS.get(opt.name)
                if factory is None:
                    _warn_unimplemented(ssn, opt.name)
                    continue
                plugin = factory(dict(opt.arguments))
                with tracer.start_as_current_span(f"plugin.open {opt.name}"):
                    plugin.on_session_open(ssn)
                plugins.append(plugin)
                ssn.plugins.setdefault(opt.name, plugin)
        ssn.compile_chains()
        t_actions = time.perf_counter()
        action_seconds: dict[str, float] = {}
        for name in conf.actions:
            action = registry.ACTIONS[name]()
            if search is not None and hasattr(action, "search"):
                action.search = search
            ssn.current_action = name
            before = _snapshot_stats(ssn)
            with tracer.start_as_current_span(f"action {name}") as span:
                t0 = time.perf_counter()
                action.execute(ssn)
                action_seconds[name] = action_seconds.get(name, 0.0) + time.perf_counter() - t0
                if measuring:
                    for key, (calls, secs) in _diff_stats(ssn, before).items():
                        span.set_attribute(f"plugin.{key}.calls", calls)
                        span.set_attribute(f"plugin.{key}.seconds", round(secs, 6))
        ssn.current_action = ""
        t_close = time.perf_counter()
        for plugin in plugins:
            with tracer.start_as_current_span(f"plugin.close {plugin.name}"):
                plugin.on_session_close(ssn)
        changed = update_job_statuses(ssn)
        update_queue_allocated(ssn)
        t_result = time.perf_counter()
        result = _result(ssn, changed, explain)
        result.action_seconds = {k: round(v, 6) for k, v in action_seconds.items()}
        result.phase_seconds = {
            "open": round(t_actions - t_open, 6),
            "actions": round(t_close - t_actions, 6),
            "close": round(t_result - t_close, 6),
            "result": round(time.perf_counter() - t_result, 6),
        }
        result.read_now = ssn.now_read
        root.set_attribute("session.binds", len(result.binds))
        root.set_attribute("session.evictions", len(result.evictions))
        root.set_attribute("session.pipelined", len(result.pipelined))
    _release(ssn)
    return result


def _release(ssn: Session) -> None:
    """Drop the session's references once its result is built (nothing reads it afterwards).

    The session, its plugins, handlers and node table refer to each other, so without this its
    whole copy of the cluster is cyclic garbage that only a (full-heap-traversing) cyclic
    collection frees; with it reference counting frees it at once.
    """
    for node in ssn.node_list:
        node.on_change = None
    ssn.__dict__.clear()


def _warn_unimplemented(ssn: Session, name: str) -> None:
    """Volcano logs and skips a plugin it has no builder for; we say so once.

    The configuration parser may have said it already, prefixed with the entry's key.
    """
    message = unknown_plugin_message(name, known_plugins(), registry.VOLCANO_ONLY_PLUGINS)
    if any(w.endswith(message) for w in ssn.warnings):
        return
    ssn.warnings.append(message)


def _snapshot_stats(ssn: Session) -> dict[tuple[str, str], tuple[int, float]]:
    return {k: (ssn.stats.calls[k], ssn.stats.seconds[k]) for k in ssn.stats.calls}


def _diff_stats(
    ssn: Session, before: dict[tuple[str, str], tuple[int, float]]
) -> dict[str, tuple[int, float]]:
    out: dict[str, tuple[int, float]] = {}
    for key in sorted(ssn.stats.calls):
        calls0, secs0 = before.get(key, (0, 0.0))
        calls = ssn.stats.calls[key] - calls0
        if calls:
            out[f"{key[0]}.{key[1]}"] = (calls, ssn.stats.seconds[key] - secs0)
    return out


def _result(ssn: Session, changed: list[str], explain: bool) -> SessionResult:
    pipelined: dict[str, str] = {}
    # Every job's status, in uid order (Session.__init__ fills the jobs sorted).
    podgroups: dict[str, PodGroupOutcome] = {uid: job.status for uid, job in ssn.jobs.items()}
    # A task is Pipelined at the end only if it was Pending (or Pipelined) at open.
    for job in ssn.jobs_with_work:  # in uid order
        if job.peek_in(TaskStatus.PIPELINED):
            for t in sorted(job.tasks_in(TaskStatus.PIPELINED), key=lambda t: t.key):
                pipelined[t.key] = t.node_name
    queues: dict[str, dict[str, Any]] = {}
    for name in ("capacity", "proportion"):
        plugin = ssn.plugins.get(name)
        if plugin is not None and hasattr(plugin, "queue_figures"):
            queues = plugin.queue_figures()
            break
    stats = {
        f"{p}.{point}": {
            "calls": float(ssn.stats.calls[(p, point)]),
            "seconds": ssn.stats.seconds[(p, point)],
        }
        for (p, point) in sorted(ssn.stats.calls)
    }
    bind_annotations: dict[str, dict[str, str]] = {}
    for job in ssn.jobs_with_work:
        # Only a job with a Pending task at open binds; one the session never materialised bound
        # nothing (dispatch changes the job's index).
        if not job.materialised:
            continue
        for t in job.tasks.values():
            if t.bind_annotations and t.key in ssn.binds:
                bind_annotations[t.key] = dict(sorted(t.bind_annotations.items()))
    return SessionResult(
        bind_annotations=dict(sorted(bind_annotations.items())),
        session_id=ssn.uid,
        binds=dict(ssn.binds),
        bind_order=list(ssn.bind_order),
        pipelined=pipelined,
        evictions=list(ssn.evictions),
        podgroups=podgroups,
        changed_podgroups=changed,
        queues=queues,
        queue_allocated={name: ssn.queues[name].allocated.clone() for name in sorted(ssn.queues)},
        pending=pending_reasons(ssn) if explain else {},
        warnings=list(dict.fromkeys(ssn.warnings)),
        stats=stats,
    )
