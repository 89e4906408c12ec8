"""Pod topology spread constraints (`spec.topologySpreadConstraints`) parsed for PodTopologySpread.

Used by the filter (pod_topology_spread.py, DoNotSchedule) and the nodeorder plugin's score
(ScheduleAnyway).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fumarole.daemon.scheduler.plugins.k8s.labels import (
    OP_EQUALS,
    LabelSelector,
    label_selector_from_meta,
    make_requirement,
    str_list,
)

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HOSTNAME_LABEL = "kubernetes.io/hostname"
SPREAD_FIELD = "topology_spread_constraints"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """topologySpreadConstraint as the PodTopologySpread plugin holds it (policies defaulted)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    honor_node_affinity: bool = True  # nodeAffinityPolicy: Honor (default)
    honor_node_taints: bool = False  # nodeTaintsPolicy: Ignore (default)


def raw_spread_constraints(pod: Any) -> list[Any]:
    """The pod's raw `spec.topologySpreadConstraints`, from a `topology_spread_constraints` field if any."""
    raw = getattr(pod, SPREAD_FIELD, None)
    return list(raw) if isinstance(raw, (list, tuple)) else []


def spread_constraints(
    raw: Sequence[Any], pod_labels: Mapping[str, str], action: str
) -> tuple[SpreadConstraint, ...]:
    """filterTopologySpreadConstraints: the constraints with `whenUnsatisfiable == action`.

    `matchLabelKeys` values are taken from the pod's labels and ANDed into the selector; a
    selector that does not parse raises SelectorError.
    """
    out = []
    for c in raw:
        if not isinstance(c, Mapping) or c.get("whenUnsatisfiable") != action:
            continue
        selector = label_selector_from_meta(c.get("labelSelector"))
        keys = [k for k in str_list(c.get("matchLabelKeys")) if k in pod_labels]
        if keys:
            extra = tuple(make_requirement(k, OP_EQUALS, [pod_labels[k]]) for k in keys)
            selector = LabelSelector(selector.requirements + extra, selector.nothing)
        min_domains = c.get("minDomains")
        out.append(
            SpreadConstraint(
                max_skew=int(c.get("maxSkew") or 0),
                topology_key=str(c.get("topologyKey") or ""),
                selector=selector,
                min_domains=min_domains if isinstance(min_domains, int) else 1,
                honor_node_affinity=c.get("nodeAffinityPolicy", "Honor") != "Ignore",
                honor_node_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor",
            )
        )
    return tuple(out)


def node_has_spread_keys(labels: Mapping[str, str], constraints: Iterable[SpreadConstraint]) -> bool:
    """nodeLabelsMatchSpreadConstraints: the node carries every constraint's topology key."""
    return all(c.topology_key in labels for c in constraints)


def spread_matches(
    c: SpreadConstraint, namespace: str, labels: Mapping[str, str], deleting: bool, pod_ns: str
) -> bool:
    """countPodsMatchSelector for one pod: same namespace, not terminating, selector matches."""
    if c.selector.empty or deleting or namespace != pod_ns:
        return False
    return c.selector.matches(labels)
