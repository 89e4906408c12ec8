"""Inter-pod (anti-)affinity terms: `fwk.AffinityTerm`, `PodInfo` parsing, namespace merging, matching.

Raw pod affinity is the Kubernetes JSON form (`podAffinity.requiredDuringSchedulingIgnored...`).
Shared by the InterPodAffinity filter (inter_pod_affinity.py), the session's node snapshot
(node_mirror.py) and the nodeorder plugin's InterPodAffinity score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fumarole.daemon.scheduler.plugins.k8s.labels import (
    NOTHING,
    LabelSelector,
    SelectorError,
    label_selector_from_meta,
    str_list,
)


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """fwk.AffinityTerm: namespaces, namespace selector, label selector and topology key."""

    namespaces: frozenset[str]
    ns_selector: LabelSelector
    selector: LabelSelector
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None) -> bool:
        if namespace in self.namespaces or self.ns_selector.matches(ns_labels or {}):
            return self.selector.matches(labels)
        return False


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    term: AffinityTerm
    weight: int


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """The inter-pod affinity a PodInfo carries; lists that fail to parse are empty (`error` says why)."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti: tuple[WeightedTerm, ...] = ()
    # podWithAffinity: spec.affinity.podAffinity or podAntiAffinity is set.
    with_affinity: bool = False
    # podWithRequiredAntiAffinity: the raw required anti-affinity list is non-empty.
    with_required_anti: bool = False
    error: str = ""


NO_POD_AFFINITY = PodAffinity()


def _section(affinity: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    v = affinity.get(name)
    return v if isinstance(v, Mapping) else None


def _raw_list(section: Mapping[str, Any] | None, key: str) -> list[Any]:
    if section is None:
        return []
    v = section.get(key)
    return v if isinstance(v, list) else []


def affinity_term(namespace: str, raw: Any) -> AffinityTerm:
    """newAffinityTerm: namespaces default to the pod's own when neither list nor selector is given."""
    if not isinstance(raw, Mapping):
        raise SelectorError("a pod affinity term must be a mapping")
    selector = label_selector_from_meta(raw.get("labelSelector"))
    names = str_list(raw.get("namespaces"))
    ns_raw = raw.get("namespaceSelector")
    namespaces = frozenset(names) if names or ns_raw is not None else frozenset((namespace,))
    topology_key = str(raw.get("topologyKey") or "")
    return AffinityTerm(namespaces, label_selector_from_meta(ns_raw), selector, topology_key)


def _terms(namespace: str, raw: list[Any]) -> tuple[AffinityTerm, ...]:
    return tuple(affinity_term(namespace, t) for t in raw)


def _weighted(namespace: str, raw: list[Any]) -> tuple[WeightedTerm, ...]:
    out = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise SelectorError("a weighted pod affinity term must be a mapping")
        weight = item.get("weight")
        term = affinity_term(namespace, item.get("podAffinityTerm"))
        out.append(WeightedTerm(term, weight if isinstance(weight, int) else 0))
    return tuple(out)


def parse_pod_affinity(namespace: str, affinity: Mapping[str, Any]) -> PodAffinity:
    """PodInfo.Update: parse the four term lists; a list with an invalid selector is dropped."""
    pa = _section(affinity, "podAffinity")
    paa = _section(affinity, "podAntiAffinity")
    if pa is None and paa is None:
        return NO_POD_AFFINITY
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    errors: list[str] = []
    parts: list[tuple[Any, ...]] = []
    for label, section, key, weighted in (
        ("requiredAffinityTerms", pa, required, False),
        ("requiredAntiAffinityTerms", paa, required, False),
        ("preferredAffinityTerms", pa, preferred, True),
        ("preferredAntiAffinityTerms", paa, preferred, True),
    ):
        raw = _raw_list(section, key)
        try:
            parts.append(_weighted(namespace, raw) if weighted else _terms(namespace, raw))
        except SelectorError as e:
            errors.append(f"{label}: {e}")
            parts.append(())
    return PodAffinity(
        required_affinity=parts[0],
        required_anti=parts[1],
        preferred_affinity=parts[2],
        preferred_anti=parts[3],
        with_affinity=True,
        with_required_anti=bool(_raw_list(paa, required)),
        error="; ".join(errors),
    )


def merge_namespaces(term: AffinityTerm, namespace_labels: Mapping[str, Mapping[str, str]]) -> AffinityTerm:
    """mergeAffinityTermNamespacesIfNotEmpty: a non-empty namespace selector is resolved to names."""
    if term.ns_selector.empty:
        return term
    extra = {name for name, labels in namespace_labels.items() if term.ns_selector.matches(labels)}
    return replace(term, namespaces=term.namespaces | extra, ns_selector=NOTHING)


def merge_pod_affinity(pa: PodAffinity, namespace_labels: Mapping[str, Mapping[str, str]]) -> PodAffinity:
    """The incoming pod's terms with namespace selectors resolved (PreFilter / PreScore)."""
    if pa is NO_POD_AFFINITY:
        return pa

    def weighted(ts: tuple[WeightedTerm, ...]) -> tuple[WeightedTerm, ...]:
        return tuple(WeightedTerm(merge_namespaces(w.term, namespace_labels), w.weight) for w in ts)

    return replace(
        pa,
        required_affinity=tuple(merge_namespaces(t, namespace_labels) for t in pa.required_affinity),
        required_anti=tuple(merge_namespaces(t, namespace_labels) for t in pa.required_anti),
        preferred_affinity=weighted(pa.preferred_affinity),
        preferred_anti=weighted(pa.preferred_anti),
    )


def matches_all_terms(terms: Sequence[AffinityTerm], namespace: str, labels: Mapping[str, str]) -> bool:
    """podMatchesAllAffinityTerms (incoming terms are merged, so no namespace labels are needed)."""
    return bool(terms) and all(t.matches(namespace, labels, None) for t in terms)
