"""The cdp plugin (plugins/cdp): running pods within their cooldown time are protected from eviction."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.task import TaskInfo
from fumarole.daemon.scheduler.plugins.sla import GoDurationError, parse_go_duration, to_nanos

NAME = "cdp"
COOLDOWN_KEY = "volcano.sh/cooldown-time"


def cooldown_time(task: TaskInfo) -> int | None:
    """The pod's cooldown in ns: label first, then annotation; None when absent or not a Go duration."""
    raw = task.pod.labels.get(COOLDOWN_KEY)
    if raw is None:
        raw = task.pod.annotations.get(COOLDOWN_KEY)
        if raw is None:
            return None
    try:
        return parse_go_duration(raw)
    except GoDurationError:
        return None


def in_cooldown(task: TaskInfo, now_ns: int) -> bool:
    """A Running pod whose first PodScheduled=True condition changed less than its cooldown ago."""
    cooldown = cooldown_time(task)
    if cooldown is None or task.pod.phase != "Running" or task.pod.scheduled_time is None:
        return False
    return to_nanos(task.pod.scheduled_time) + cooldown > now_ns


class CooldownProtectionPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, ssn: Session) -> None:
        now_ns = to_nanos(ssn.now)
        for uid in sorted(ssn.jobs):
            for t in sorted(ssn.jobs[uid].peek_tasks().values(), key=lambda t: t.uid):
                raw = t.pod.labels.get(COOLDOWN_KEY, t.pod.annotations.get(COOLDOWN_KEY))
                if raw is not None and cooldown_time(t) is None:
                    ssn.warnings.append(
                        f"cdp: pod {t.key}: {COOLDOWN_KEY}={raw!r} is not a Go duration; ignored"
                    )

        def filter_victims(_evictor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            return [c for c in candidates if not in_cooldown(c, now_ns)], cb.PERMIT

        ssn.register(cb.PREEMPTABLE, NAME, filter_victims)
        ssn.register(cb.RECLAIMABLE, NAME, filter_victims)

    def on_session_close(self, ssn: Session) -> None:
        return None


def new(arguments: dict[str, Any]) -> CooldownProtectionPlugin:
    return CooldownProtectionPlugin(arguments)
