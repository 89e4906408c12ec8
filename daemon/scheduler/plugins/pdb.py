"""The pdb plugin (plugins/pdb): victims may not push a PodDisruptionBudget below zero disruptions."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.queue import PodDisruptionBudgetInfo
from fumarole.daemon.scheduler.model.task import TaskInfo
from fumarole.daemon.scheduler.plugins.k8s.labels import (
    LabelSelector,
    SelectorError,
    label_selector_from_meta,
)

NAME = "pdb"


def session_pdbs(ssn: Session) -> list[PodDisruptionBudgetInfo]:
    """Every PodDisruptionBudget of the snapshot, by namespace then name."""
    out: list[PodDisruptionBudgetInfo] = []
    for ns in sorted(ssn.namespaces):
        out.extend(sorted(ssn.namespaces[ns].pdbs, key=lambda p: p.name))
    return out


def _selector(pdb: PodDisruptionBudgetInfo) -> LabelSelector | None:
    try:
        return label_selector_from_meta(pdb.selector)
    except SelectorError:
        return None


def filter_victims(pdbs: list[PodDisruptionBudgetInfo], tasks: list[TaskInfo]) -> list[TaskInfo]:
    """The tasks that can be disrupted, budgets spent in task order.

    A pod without labels is never kept.  Every matching budget not listing the pod in
    disruptedPods is charged, even when another budget already refuses the pod.  A nil or
    empty selector, or one that does not parse, matches nothing.
    """
    selectors = [_selector(p) for p in pdbs]
    allowed = [p.disruptions_allowed for p in pdbs]
    victims: list[TaskInfo] = []
    for task in tasks:
        labels = task.pod.labels
        if not labels:
            continue
        violated = False
        for i, pdb in enumerate(pdbs):
            if pdb.namespace != task.namespace:
                continue
            sel = selectors[i]
            if sel is None or sel.empty or not sel.matches(labels):
                continue
            if task.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                violated = True
        if not violated:
            victims.append(task)
    return victims


class PdbPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, ssn: Session) -> None:
        pdbs = session_pdbs(ssn)

        def victim_tasks(tasks: list[TaskInfo]) -> list[TaskInfo]:
            return filter_victims(pdbs, tasks)

        def evictable(_evictor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            return filter_victims(pdbs, candidates), cb.PERMIT

        ssn.register(cb.VICTIM_TASKS, NAME, victim_tasks)
        ssn.register(cb.RECLAIMABLE, NAME, evictable)
        ssn.register(cb.PREEMPTABLE, NAME, evictable)

    def on_session_close(self, ssn: Session) -> None:
        return None


def new(arguments: dict[str, Any]) -> PdbPlugin:
    return PdbPlugin(arguments)
