"""The conformance plugin: never evict system-critical pods or pods in kube-system."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.task import TaskInfo

NAME = "conformance"
CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_NAMESPACE = "kube-system"


def evictable(preemptor: TaskInfo | None, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
    victims = [
        c
        for c in candidates
        if c.pod.priority_class_name not in CRITICAL_CLASSES and c.namespace != SYSTEM_NAMESPACE
    ]
    return victims, cb.PERMIT


def unified_evictable(ctx: cb.EvictionContext, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
    """The same filter for gangpreempt / gangreclaim (UnifiedEvictable)."""
    return evictable(None, candidates)


class ConformancePlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, ssn: Session) -> None:
        ssn.register(cb.PREEMPTABLE, NAME, evictable)
        ssn.register(cb.RECLAIMABLE, NAME, evictable)
        ssn.register(cb.UNIFIED_EVICTABLE, NAME, unified_evictable)

    def on_session_close(self, ssn: Session) -> None:
        return None


def new(arguments: dict[str, Any]) -> ConformancePlugin:
    return ConformancePlugin(arguments)
