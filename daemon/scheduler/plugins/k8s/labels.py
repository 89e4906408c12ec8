"""Kubernetes label selectors: `labels.NewRequirement` validation, `Requirement.Matches`, metav1
`LabelSelectorAsSelector` and `SelectorFromSet` (Kubernetes v1.36, the version Volcano vendors)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Selector operators (k8s.io/apimachinery/pkg/selection).
OP_IN = "In"
OP_NOT_IN = "NotIn"
OP_EXISTS = "Exists"
OP_DOES_NOT_EXIST = "DoesNotExist"
OP_GT = "Gt"
OP_LT = "Lt"
OP_EQUALS = "="

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_DECIMAL_RE = re.compile(r"[+-]?[0-9]+")
_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


class SelectorError(ValueError):
    """A selector that Kubernetes refuses to parse (the text follows apimachinery's wording loosely)."""


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): optional sign, decimal digits, int64 range; else None."""
    if not _DECIMAL_RE.fullmatch(text):
        return None
    v = int(text)
    return v if _INT64_MIN <= v <= _INT64_MAX else None


def valid_label_key(key: str) -> bool:
    """validation.IsQualifiedName: `[prefix/]name`, prefix a DNS-1123 subdomain, name ≤ 63 chars."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= 63 and _NAME_RE.fullmatch(name) is not None


def valid_label_value(value: str) -> bool:
    return len(value) <= 63 and _VALUE_RE.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One validated label requirement (labels.Requirement)."""

    key: str
    op: str
    values: frozenset[str]
    # Gt/Lt: the single value as an integer.
    bound: int = 0

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        value = labels.get(self.key)
        if op in (OP_IN, OP_EQUALS):
            return value is not None and value in self.values
        if op == OP_NOT_IN:
            return value is None or value not in self.values
        if op == OP_EXISTS:
            return value is not None
        if op == OP_DOES_NOT_EXIST:
            return value is None
        if value is None:
            return False
        actual = parse_int64(value)
        if actual is None:
            return False
        return actual > self.bound if op == OP_GT else actual < self.bound


def make_requirement(key: str, op: str, values: Sequence[str]) -> Requirement:
    """labels.NewRequirement: validates the key, the value count for the operator and each value."""
    if not valid_label_key(key):
        raise SelectorError(f"key: Invalid value: {key!r}: not a qualified name")
    bound = 0
    if op in (OP_IN, OP_NOT_IN):
        if not values:
            raise SelectorError("values: for 'in', 'notin' operators, values set can't be empty")
    elif op == OP_EQUALS:
        if len(values) != 1:
            raise SelectorError("values: Invalid value: exact-match compatibility requires one single value")
    elif op in (OP_EXISTS, OP_DOES_NOT_EXIST):
        if values:
            raise SelectorError("values: Forbidden: values set must be empty for exists and does not exist")
    elif op in (OP_GT, OP_LT):
        parsed = parse_int64(values[0]) if len(values) == 1 else None
        if parsed is None:
            raise SelectorError("values: for 'Gt', 'Lt' operators, the value must be an integer")
        bound = parsed
    else:
        raise SelectorError(f"operator: Unsupported value: {op!r}")
    for v in values:
        if not valid_label_value(v):
            raise SelectorError(f"values: Invalid value: {v!r}: not a valid label value")
    return Requirement(key, op, frozenset(values), bound)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed selector: requirements ANDed; `nothing` is labels.Nothing()."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """Selector.Empty(): true for Everything only (Nothing is not empty)."""
        return not self.nothing and not self.requirements


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


def selector_from_set(labels: Mapping[str, str]) -> LabelSelector:
    """labels.SelectorFromSet (no validation): key = value for every entry."""
    return LabelSelector(tuple(Requirement(k, OP_EQUALS, frozenset((v,))) for k, v in sorted(labels.items())))


SELECTOR_OPS = {"In": OP_IN, "NotIn": OP_NOT_IN, "Exists": OP_EXISTS, "DoesNotExist": OP_DOES_NOT_EXIST}


def str_list(raw: Any) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise SelectorError(f"values: must be a list, got {type(raw).__name__}")
    return [str(v) for v in raw]


def raw_expression(raw: Any) -> tuple[str, str, list[str]]:
    if not isinstance(raw, Mapping):
        raise SelectorError("an expression must be a mapping")
    return str(raw.get("key") or ""), str(raw.get("operator") or ""), str_list(raw.get("values"))


def label_selector_from_meta(raw: Any) -> LabelSelector:
    """metav1.LabelSelectorAsSelector: nil → Nothing, {} → Everything, else matchLabels + matchExpressions."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise SelectorError("labelSelector must be a mapping")
    match_labels = raw.get("matchLabels") or {}
    exprs = raw.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(exprs, list):
        raise SelectorError("matchLabels must be a mapping and matchExpressions a list")
    if not match_labels and not exprs:
        return EVERYTHING
    reqs = [make_requirement(str(k), OP_EQUALS, [str(v)]) for k, v in sorted(match_labels.items())]
    for e in exprs:
        key, op, values = raw_expression(e)
        mapped = SELECTOR_OPS.get(op)
        if mapped is None:
            raise SelectorError(f"{op!r} is not a valid label selector operator")
        reqs.append(make_requirement(key, mapped, values))
    return LabelSelector(tuple(reqs))
