"""The TaintToleration and NodeUnschedulable filters' rules.

`Toleration.ToleratesTaint`, `FindMatchingUntoleratedTaint` (NoSchedule / NoExecute), the
unschedulable taint, and the PreferNoSchedule counts the nodeorder plugin scores.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fumarole.daemon.scheduler.model.task import Taint, Toleration

TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"


def tolerates(tol: Toleration, taint: Taint) -> bool:
    """Toleration.ToleratesTaint (comparison operators Gt/Lt are feature-gated off in Volcano)."""
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if tol.operator in ("", "Equal"):
        return tol.value == taint.value
    return tol.operator == "Exists"


def tolerations_tolerate(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def find_untolerated_taint(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """FindMatchingUntoleratedTaint with DoNotScheduleTaintsFilterFunc (NoSchedule, NoExecute)."""
    for taint in taints:
        if taint.effect not in (NO_SCHEDULE, NO_EXECUTE):
            continue
        if not tolerations_tolerate(tolerations, taint):
            return taint
    return None


def tolerates_unschedulable(tolerations: Iterable[Toleration]) -> bool:
    """NodeUnschedulable: tolerating the unschedulable NoSchedule taint tolerates spec.unschedulable."""
    return tolerations_tolerate(tolerations, Taint(TAINT_NODE_UNSCHEDULABLE, "", NO_SCHEDULE))


def prefer_no_schedule_tolerations(tolerations: Iterable[Toleration]) -> tuple[Toleration, ...]:
    """getAllTolerationPreferNoSchedule: tolerations with an empty or PreferNoSchedule effect."""
    return tuple(t for t in tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE)


def count_intolerable_prefer_no_schedule(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> int:
    return sum(
        1 for t in taints if t.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate(tolerations, t)
    )
