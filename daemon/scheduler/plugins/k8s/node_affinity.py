"""The NodeAffinity filter's rules (`component-helpers/scheduling/corev1/nodeaffinity`).

Required node selector terms with `matchExpressions` and `matchFields` (`metadata.name`), the
pod's nodeSelector, the PreFilter's `metadata.name` conflict check, and preferred terms' weights
(the nodeorder plugin's score).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fumarole.daemon.scheduler.plugins.k8s.labels import (
    OP_GT,
    OP_IN,
    OP_LT,
    OP_NOT_IN,
    SELECTOR_OPS,
    LabelSelector,
    SelectorError,
    make_requirement,
    raw_expression,
    selector_from_set,
    str_list,
)

NODE_NAME_FIELD = "metadata.name"
_NODE_OPS = {**SELECTOR_OPS, "Gt": OP_GT, "Lt": OP_LT}


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """One matchFields entry: `key` equals (or, negated, differs from) `value`."""

    key: str
    value: str
    negated: bool

    def matches(self, node_name: str) -> bool:
        actual = node_name if self.key == NODE_NAME_FIELD else ""
        return (actual != self.value) if self.negated else (actual == self.value)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A parsed nodeSelectorTerm; a term with a parse error never matches."""

    labels: LabelSelector | None
    fields: tuple[FieldRequirement, ...] | None
    error: str = ""

    def matches(self, node_labels: Mapping[str, str], node_name: str) -> bool:
        if self.error:
            return False
        if self.labels is not None and not self.labels.matches(node_labels):
            return False
        return self.fields is None or all(f.matches(node_name) for f in self.fields)


def _node_label_selector(exprs: list[Any]) -> LabelSelector:
    reqs = []
    for e in exprs:
        key, op, values = raw_expression(e)
        mapped = _NODE_OPS.get(op)
        if mapped is None:
            raise SelectorError(f"operator: Unsupported value: {op!r}")
        reqs.append(make_requirement(key, mapped, values))
    return LabelSelector(tuple(reqs))


def _node_field_selector(exprs: list[Any]) -> tuple[FieldRequirement, ...]:
    out = []
    for e in exprs:
        key, op, values = raw_expression(e)
        if op not in (OP_IN, OP_NOT_IN):
            raise SelectorError(f'operator: Unsupported value: {op!r}: supported values: "In", "NotIn"')
        if len(values) != 1:
            raise SelectorError("values: Invalid value: must have one element")
        out.append(FieldRequirement(key, values[0], op == OP_NOT_IN))
    return tuple(out)


def _term_lists(raw: Any) -> tuple[list[Any], list[Any]]:
    if not isinstance(raw, Mapping):
        return [], []
    exprs = raw.get("matchExpressions") or []
    fields = raw.get("matchFields") or []
    return (exprs if isinstance(exprs, list) else []), (fields if isinstance(fields, list) else [])


def is_empty_node_selector_term(raw: Any) -> bool:
    exprs, fields = _term_lists(raw)
    return not exprs and not fields


def parse_node_selector_term(raw: Any) -> NodeSelectorTerm:
    """newNodeSelectorTerm: requirements are only built for non-empty lists."""
    exprs, fields = _term_lists(raw)
    try:
        labels = _node_label_selector(exprs) if exprs else None
        field_reqs = _node_field_selector(fields) if fields else None
    except SelectorError as e:
        return NodeSelectorTerm(None, None, str(e))
    return NodeSelectorTerm(labels, field_reqs)


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """nodeaffinity.GetRequiredNodeAffinity: pod.spec.nodeSelector AND required node affinity terms."""

    node_selector: LabelSelector | None
    terms: tuple[NodeSelectorTerm, ...] | None

    @property
    def trivial(self) -> bool:
        return self.node_selector is None and self.terms is None

    def matches(self, node_labels: Mapping[str, str], node_name: str) -> bool:
        if self.node_selector is not None and not self.node_selector.matches(node_labels):
            return False
        if self.terms is None:
            return True
        return any(t.matches(node_labels, node_name) for t in self.terms)


def _node_affinity(affinity: Mapping[str, Any]) -> Mapping[str, Any]:
    na = affinity.get("nodeAffinity")
    return na if isinstance(na, Mapping) else {}


def required_node_selector_raw(affinity: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, or None when absent."""
    req = _node_affinity(affinity).get("requiredDuringSchedulingIgnoredDuringExecution")
    return req if isinstance(req, Mapping) else None


def raw_node_selector_terms(required: Mapping[str, Any]) -> list[Any]:
    terms = required.get("nodeSelectorTerms") or []
    return terms if isinstance(terms, list) else []


def required_node_affinity(
    node_selector: Mapping[str, str], affinity: Mapping[str, Any]
) -> RequiredNodeAffinity:
    selector = selector_from_set(node_selector) if node_selector else None
    required = required_node_selector_raw(affinity)
    if required is None:
        return RequiredNodeAffinity(selector, None)
    raw = raw_node_selector_terms(required)
    terms = tuple(parse_node_selector_term(t) for t in raw if not is_empty_node_selector_term(t))
    return RequiredNodeAffinity(selector, terms)


def node_names_conflict(affinity: Mapping[str, Any]) -> bool:
    """NodeAffinity PreFilter: every required term pins `metadata.name In` to disjoint node sets."""
    required = required_node_selector_raw(affinity)
    if required is None:
        return False
    terms = raw_node_selector_terms(required)
    if not terms:
        return False
    names: set[str] | None = None
    for t in terms:
        term_names: set[str] | None = None
        for f in _term_lists(t)[1]:
            if not isinstance(f, Mapping) or f.get("key") != NODE_NAME_FIELD or f.get("operator") != OP_IN:
                continue
            s = set(str_list(f.get("values")))
            term_names = s if term_names is None else term_names & s
        if term_names is None:
            return False
        names = term_names if names is None else names | term_names
    return names is not None and not names


@dataclass(frozen=True, slots=True)
class PreferredNodeTerm:
    term: NodeSelectorTerm
    weight: int


def preferred_node_terms(affinity: Mapping[str, Any]) -> tuple[PreferredNodeTerm, ...]:
    """NewPreferredSchedulingTerms: zero-weight and empty terms dropped; invalid terms ignored here."""
    raw = _node_affinity(affinity).get("preferredDuringSchedulingIgnoredDuringExecution") or []
    out: list[PreferredNodeTerm] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping):
            continue
        weight = item.get("weight")
        pref = item.get("preference")
        if not isinstance(weight, int) or weight == 0 or is_empty_node_selector_term(pref):
            continue
        term = parse_node_selector_term(pref)
        if not term.error:
            out.append(PreferredNodeTerm(term, weight))
    return tuple(out)


def preferred_node_score(
    terms: Iterable[PreferredNodeTerm], node_labels: Mapping[str, str], node_name: str
) -> int:
    return sum(t.weight for t in terms if t.term.matches(node_labels, node_name))
