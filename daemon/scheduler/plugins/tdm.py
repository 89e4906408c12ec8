"""The tdm plugin (plugins/tdm): revocable zones with daily time windows, and eviction of preemptable pods.

Time comes from the session's virtual `now` (UTC); Volcano reads the scheduler's wall clock
in its local time zone.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.fit import Code, FitError, fit_error
from fumarole.daemon.scheduler.model.job import JobInfo
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.task import TaskInfo, TaskStatus
from fumarole.daemon.scheduler.plugins.sla import NANOS_PER_SECOND, GoDurationError, parse_go_duration

NAME = "tdm"
ZONE_ARG_PREFIX = "tdm.revocable-zone."
EVICT_PERIOD_ARG = "tdm.evict.period"
DEFAULT_EVICT_PERIOD_NS = 60 * NANOS_PER_SECOND
DEFAULT_POD_EVICT_NUM = 1
MAX_NODE_SCORE = 100.0

REVOCABLE_ZONE_KEY = "volcano.sh/revocable-zone"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"

NOT_ALLOWED = "not allow to dispatch to revocable node"

_CLOCK_RE = re.compile(r"([0-9]{1,2}):([0-9]{2})")
_ATOI_RE = re.compile(r"[+-]?[0-9]+")
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


class ZoneError(ValueError):
    """A revocable zone that is unknown, badly written or outside its time window."""


def _clock(part: str) -> tuple[int, int]:
    """time.Parse("15:04", part): hour of 1-2 digits below 24, minute of exactly 2 digits below 60."""
    m = _CLOCK_RE.fullmatch(part)
    if m is None:
        raise ZoneError(f'parsing time "{part}" as "15:04": cannot parse "{part}" as "15:04"')
    hour, minute = int(m[1]), int(m[2])
    if hour >= 24:
        raise ZoneError(f'parsing time "{part}": hour out of range')
    if minute >= 60:
        raise ZoneError(f'parsing time "{part}": minute out of range')
    return hour, minute


def zone_window(raw: str, now: float) -> tuple[int, int]:
    """parseRevocableZone: the window of `raw` ("HH:MM-HH:MM") on now's day, as Unix seconds.

    The window starts today; when start >= end it ends tomorrow (so "0:00-0:00" spans a whole
    day), else today.  A window crossing midnight is therefore only active before midnight.
    """
    parts = raw.strip().split("-")
    if len(parts) != 2:
        raise ZoneError(f"revocable zone {raw} format error")
    h1, m1 = _clock(parts[0])
    h2, m2 = _clock(parts[1])
    day = datetime.fromtimestamp(math.floor(now), tz=UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = day + timedelta(hours=h1, minutes=m1)
    end_day = day + timedelta(days=1) if (h1, m1) >= (h2, m2) else day
    end = end_day + timedelta(hours=h2, minutes=m2)
    return int(start.timestamp()), int(end.timestamp())


def go_atoi(text: str) -> int | None:
    return int(text) if _ATOI_RE.fullmatch(text) else None


def int_or_percent(text: str, total: int) -> int:
    """tdm parseIntStr: an integer, or "<n>%" of `total` rounded up; anything else is 0."""
    n = go_atoi(text)
    if n is not None:
        return n
    if not text.endswith("%"):
        return 0
    p = go_atoi(text[:-1])
    if p is None:
        return 0
    return math.ceil(float(p) * float(total) / 100)


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    min_available: str = ""
    max_unavailable: str = ""


def job_budget(job: JobInfo) -> DisruptionBudget:
    """extractBudget: PodGroup annotation jdb-min-available, else jdb-max-unavailable."""
    if JDB_MIN_AVAILABLE in job.annotations:
        return DisruptionBudget(min_available=job.annotations[JDB_MIN_AVAILABLE])
    if JDB_MAX_UNAVAILABLE in job.annotations:
        return DisruptionBudget(max_unavailable=job.annotations[JDB_MAX_UNAVAILABLE])
    return DisruptionBudget()


def max_pod_evict_num(job: JobInfo) -> int:
    """getMaxPodEvictNum: how many running tasks of the job may be evicted at once."""
    running = job.count(TaskStatus.RUNNING)
    total = job.task_num()
    budget = job_budget(job)
    if budget.max_unavailable:
        max_unavailable = int_or_percent(budget.max_unavailable, total)
        finished = job.count(TaskStatus.SUCCEEDED) + job.count(TaskStatus.FAILED)
        unavailable = total - finished - running
        if unavailable >= max_unavailable:
            return 0
        return max_unavailable - unavailable
    if budget.min_available:
        min_available = int_or_percent(budget.min_available, total)
        if running >= min_available:
            return running - min_available
    return DEFAULT_POD_EVICT_NUM


def task_revocable_zone(task: TaskInfo) -> str:
    """GetPodRevocableZone: "*" when the pod may use revocable nodes, else ""."""
    ann = task.pod.annotations
    if REVOCABLE_ZONE_KEY in ann:
        return "*" if ann[REVOCABLE_ZONE_KEY] == "*" else ""
    if ann.get(PREEMPTABLE_KEY) in _GO_TRUE:
        return "*"
    return ""


def node_zone(node: NodeInfo) -> str:
    return node.facts.labels.get(REVOCABLE_ZONE_KEY, "")


class TdmPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.zones: dict[str, str] = {}
        self.evict_period_ns = DEFAULT_EVICT_PERIOD_NS
        # Virtual time (ns) of the last eviction sweep of this session; None = never.
        self.last_evict_ns: int | None = None
        self.now = 0.0
        self._zone_errors: dict[str, str | None] = {}

    def parse_arguments(self, warnings: list[str]) -> None:
        self.zones = {}
        for key in sorted(self.arguments):
            if ZONE_ARG_PREFIX not in key:
                continue
            value = self.arguments[key]
            zone = key.replace(ZONE_ARG_PREFIX, "", 1)
            if not isinstance(value, str):
                warnings.append(
                    f'tdm: {key}: expected a string such as "10:00-21:00", got {value!r}; zone ignored '
                    "(Volcano would crash)"
                )
                continue
            self.zones[zone] = value
        self.evict_period_ns = DEFAULT_EVICT_PERIOD_NS
        if EVICT_PERIOD_ARG in self.arguments:
            period = self.arguments[EVICT_PERIOD_ARG]
            if not isinstance(period, str):
                warnings.append(
                    f"tdm: {EVICT_PERIOD_ARG}: expected a duration string, got {period!r}; using 1m "
                    "(Volcano would crash)"
                )
                return
            try:
                self.evict_period_ns = parse_go_duration(period)
            except GoDurationError:
                warnings.append(f"tdm: {EVICT_PERIOD_ARG}: bad duration {period!r}; using 1m")

    def zone_error(self, zone: str) -> str | None:
        """availableRevocableZone: None when the zone is configured and its window is open now.

        `now` is fixed for a session, so each zone's answer is computed once.
        """
        if zone not in self._zone_errors:
            self._zone_errors[zone] = self._zone_error(zone)
        return self._zone_errors[zone]

    def _zone_error(self, zone: str) -> str | None:
        raw = self.zones.get(zone)
        if raw is None:
            return f"revocable zone {zone} not support"
        try:
            start, end = zone_window(raw, self.now)
        except ZoneError as e:
            return str(e)
        now = math.floor(self.now)
        if now < start or now > end:
            return f"current time beyond revocable zone {zone}:{raw}"
        return None

    def max_victims(self, job: JobInfo, tasks: list[TaskInfo]) -> list[TaskInfo]:
        return tasks[: min(max_pod_evict_num(job), len(tasks))]

    def revocable_zone_tasks(self, ssn: Session, zone: str) -> dict[str, list[TaskInfo]]:
        """Running preemptable tasks on the nodes of `zone`, by job (nodes in session order, tasks by uid)."""
        out: dict[str, list[TaskInfo]] = {}
        for node in ssn.node_list:
            if node_zone(node) != zone:
                continue
            for uid in sorted(node.tasks):
                placed = node.tasks[uid]
                job = ssn.jobs.get(placed.job)
                task = job.tasks.get(uid, placed) if job is not None else placed
                if task.preemptable and task.status is TaskStatus.RUNNING:
                    out.setdefault(task.job, []).append(task)
        return out

    def on_session_open(self, ssn: Session) -> None:
        self.parse_arguments(ssn.warnings)
        self.now = ssn.now
        self._zone_errors = {}
        self.last_evict_ns = None

        def predicate(task: TaskInfo, node: NodeInfo) -> FitError | None:
            zone = node_zone(node)
            if not zone:
                return None
            err = self.zone_error(zone)
            if err is not None:
                return fit_error(
                    task.namespace, task.name, node.name, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, err
                )
            if not task_revocable_zone(task):
                return fit_error(
                    task.namespace, task.name, node.name, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NOT_ALLOWED
                )
            return None

        def node_order(task: TaskInfo, node: NodeInfo) -> float:
            zone = node_zone(node)
            if not zone or self.zone_error(zone) is not None or not task_revocable_zone(task):
                return 0.0
            return MAX_NODE_SCORE

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            if preemptor.preemptable or task_revocable_zone(preemptor):
                return [], cb.REJECT
            by_job: dict[str, list[TaskInfo]] = {}
            for t in preemptees:
                if not t.preemptable or t.status is not TaskStatus.RUNNING:
                    continue
                node = ssn.nodes.get(t.node_name)
                if node is None or node_zone(node):
                    continue
                by_job.setdefault(t.job, []).append(t)
            victims: list[TaskInfo] = []
            for job_id in sorted(by_job):
                job = ssn.jobs.get(job_id)
                if job is not None:
                    victims.extend(self.max_victims(job, by_job[job_id]))
            return victims, cb.PERMIT

        def victim_tasks(_tasks: list[TaskInfo]) -> list[TaskInfo]:
            now_ns = round(ssn.now * NANOS_PER_SECOND)
            if self.last_evict_ns is not None and self.last_evict_ns + self.evict_period_ns > now_ns:
                return []
            victims: list[TaskInfo] = []
            for zone in sorted(self.zones):
                if self.zone_error(zone) is None:
                    continue
                by_job = self.revocable_zone_tasks(ssn, zone)
                for job_id in sorted(by_job):
                    job = ssn.jobs.get(job_id)
                    if job is not None:
                        victims.extend(self.max_victims(job, by_job[job_id]))
            self.last_evict_ns = now_ns
            return victims

        def job_order(l: JobInfo, r: JobInfo) -> int:
            if l.preemptable == r.preemptable:
                return 0
            return -1 if not l.preemptable else 1

        def job_pipelined(job: JobInfo) -> int:
            return cb.PERMIT if job.is_pipelined() else cb.REJECT

        def job_starving(job: JobInfo) -> bool:
            if job.preemptable:
                return False
            return job.count(TaskStatus.PENDING) > 0

        ssn.register(cb.PREDICATE, NAME, predicate)
        ssn.register(cb.NODE_ORDER, NAME, node_order)
        ssn.register(cb.PREEMPTABLE, NAME, preemptable)
        ssn.register(cb.VICTIM_TASKS, NAME, victim_tasks)
        ssn.register(cb.JOB_ORDER, NAME, job_order)
        ssn.register(cb.JOB_PIPELINED, NAME, job_pipelined)
        ssn.register(cb.JOB_STARVING, NAME, job_starving)

    def on_session_close(self, ssn: Session) -> None:
        return None


def new(arguments: dict[str, Any]) -> TdmPlugin:
    return TdmPlugin(arguments)
