"""Kubernetes scheduling semantics shared by predicates and nodeorder: selectors, affinity, taints, ports.

Pure helpers, written from the behaviour of Kubernetes v1.36 (the version Volcano vendors):
- label selectors (`labels.NewRequirement` validation and `Requirement.Matches`), metav1
  `LabelSelectorAsSelector`, `SelectorFromSet`;
- node affinity (`component-helpers/scheduling/corev1/nodeaffinity`): required node selector
  terms with `matchExpressions` and `matchFields` (`metadata.name`), preferred terms' weights;
- taints and tolerations (`Toleration.ToleratesTaint`, `FindMatchingUntoleratedTaint`);
- host ports (`HostPortInfo` sanitising and conflict rules);
- inter-pod affinity terms (`fwk.AffinityTerm`, `PodInfo` parsing) and namespace merging;
- `NodeLabelTable`: node labels as integer-coded columns so that a selector can be evaluated
  for every node of a session with a few array operations.

Raw pod affinity is the Kubernetes JSON form (`podAffinity.requiredDuringSchedulingIgnored...`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from daemon.scheduler.model.task import Taint, Toleration

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

# Selector operators (k8s.io/apimachinery/pkg/selection).
OP_IN = "In"
OP_NOT_IN = "NotIn"
OP_EXISTS = "Exists"
OP_DOES_NOT_EXIST = "DoesNotExist"
OP_GT = "Gt"
OP_LT = "Lt"
OP_EQUALS = "="

NODE_NAME_FIELD = "metadata.name"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"
DEFAULT_PROTOCOL = "TCP"

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_DECIMAL_RE = re.compile(r"[+-]?[0-9]+")
_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


class SelectorError(ValueError):
    """A selector that Kubernetes refuses to parse (the text follows apimachinery's wording loosely)."""


# =============================================================================================
# label selectors


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


_META_OPS = {"In": OP_IN, "NotIn": OP_NOT_IN, "Exists": OP_EXISTS, "DoesNotExist": OP_DOES_NOT_EXIST}
_NODE_OPS = {**_META_OPS, "Gt": OP_GT, "Lt": OP_LT}


def _str_list(raw: Any) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise SelectorError(f"values: must be a list, got {type(raw).__name__}")
    return [str(v) for v in raw]


def _expr(raw: Any) -> tuple[str, str, list[str]]:
    if not isinstance(raw, Mapping):
        raise SelectorError("an expression must be a mapping")
    return str(raw.get("key") or ""), str(raw.get("operator") or ""), _str_list(raw.get("values"))


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
        key, op, values = _expr(e)
        mapped = _META_OPS.get(op)
        if mapped is None:
            raise SelectorError(f"{op!r} is not a valid label selector operator")
        reqs.append(make_requirement(key, mapped, values))
    return LabelSelector(tuple(reqs))


# =============================================================================================
# node affinity


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
        key, op, values = _expr(e)
        mapped = _NODE_OPS.get(op)
        if mapped is None:
            raise SelectorError(f"operator: Unsupported value: {op!r}")
        reqs.append(make_requirement(key, mapped, values))
    return LabelSelector(tuple(reqs))


def _node_field_selector(exprs: list[Any]) -> tuple[FieldRequirement, ...]:
    out = []
    for e in exprs:
        key, op, values = _expr(e)
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
            s = set(_str_list(f.get("values")))
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


# =============================================================================================
# taints and tolerations


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


# =============================================================================================
# host ports

PortKey = tuple[str, int]  # (protocol, port)
UsedPorts = dict[PortKey, set[str]]  # (protocol, port) -> host IPs (HostPortInfo, indexed by port)


def sanitize_port(ip: str, protocol: str, port: int) -> tuple[str, str, int]:
    return ip or DEFAULT_BIND_ALL_HOST_IP, protocol or DEFAULT_PROTOCOL, port


def port_conflict(used: UsedPorts, ip: str, protocol: str, port: int) -> bool:
    """HostPortInfo.CheckConflict: 0.0.0.0 conflicts with any IP; an IP with itself and 0.0.0.0."""
    if port <= 0:
        return False
    ip, protocol, port = sanitize_port(ip, protocol, port)
    ips = used.get((protocol, port))
    if not ips:
        return False
    if ip == DEFAULT_BIND_ALL_HOST_IP:
        return True
    return ip in ips or DEFAULT_BIND_ALL_HOST_IP in ips


# =============================================================================================
# inter-pod affinity


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
    names = _str_list(raw.get("namespaces"))
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


# =============================================================================================
# vectorised evaluation over the nodes of a session


class NodeLabelTable:
    """Node labels as integer-coded columns (built lazily per key), for selectors over all nodes.

    Code -1 marks a node without the key; lookup tables carry one extra trailing slot so that
    indexing with -1 lands on a "missing" entry.
    """

    def __init__(self, labels: Sequence[Mapping[str, str]], names: Sequence[str]) -> None:
        self.n = len(labels)
        self.labels = labels
        self.names = list(names)
        self.name_row: dict[str, int] = {name: i for i, name in enumerate(names)}
        self._columns: dict[str, tuple[IntArray, dict[str, int]]] = {}
        self._ints: dict[str, tuple[IntArray, BoolArray]] = {}

    def column(self, key: str) -> tuple[IntArray, dict[str, int]]:
        """(codes per node, value -> code) for a label key."""
        col = self._columns.get(key)
        if col is None:
            vocab: dict[str, int] = {}
            codes = np.fromiter(
                (
                    -1 if (v := lab.get(key)) is None else vocab.setdefault(v, len(vocab))
                    for lab in self.labels
                ),
                dtype=np.int64,
                count=self.n,
            )
            col = (codes, vocab)
            self._columns[key] = col
        return col

    def lookup(self, key: str, values: Iterable[str]) -> BoolArray:
        """Per node: the node has `key` with one of `values`."""
        codes, vocab = self.column(key)
        lut = np.zeros(len(vocab) + 1, dtype=np.bool_)
        for v in values:
            c = vocab.get(v)
            if c is not None:
                lut[c] = True
        return lut[codes]

    def has(self, key: str) -> BoolArray:
        return self.column(key)[0] >= 0

    def _int_column(self, key: str) -> tuple[IntArray, BoolArray]:
        got = self._ints.get(key)
        if got is None:
            _, vocab = self.column(key)
            ivals = np.zeros(len(vocab) + 1, dtype=np.int64)
            valid = np.zeros(len(vocab) + 1, dtype=np.bool_)
            for v, c in vocab.items():
                parsed = parse_int64(v)
                if parsed is not None:
                    ivals[c] = parsed
                    valid[c] = True
            got = (ivals, valid)
            self._ints[key] = got
        return got

    def requirement(self, r: Requirement) -> BoolArray:
        if r.op in (OP_IN, OP_EQUALS):
            return self.lookup(r.key, r.values)
        if r.op == OP_NOT_IN:
            return ~self.lookup(r.key, r.values)
        if r.op == OP_EXISTS:
            return self.has(r.key)
        if r.op == OP_DOES_NOT_EXIST:
            return ~self.has(r.key)
        codes, _ = self.column(r.key)
        ivals, valid = self._int_column(r.key)
        got = ivals[codes]
        cmp = got > r.bound if r.op == OP_GT else got < r.bound
        out: BoolArray = valid[codes] & cmp
        return out

    def selector(self, s: LabelSelector) -> BoolArray:
        out = np.full(self.n, not s.nothing, dtype=np.bool_)
        for r in s.requirements:
            out &= self.requirement(r)
        return out

    def field(self, f: FieldRequirement) -> BoolArray:
        if f.key != NODE_NAME_FIELD:
            return np.full(self.n, (f.value != "") if f.negated else (f.value == ""), dtype=np.bool_)
        out = np.zeros(self.n, dtype=np.bool_)
        row = self.name_row.get(f.value)
        if row is not None:
            out[row] = True
        return ~out if f.negated else out

    def node_selector_term(self, t: NodeSelectorTerm) -> BoolArray:
        if t.error:
            return np.zeros(self.n, dtype=np.bool_)
        out = self.selector(t.labels) if t.labels is not None else np.ones(self.n, dtype=np.bool_)
        for f in t.fields or ():
            out &= self.field(f)
        return out

    def required_node_affinity(self, a: RequiredNodeAffinity) -> BoolArray:
        out = np.ones(self.n, dtype=np.bool_)
        if a.node_selector is not None:
            out &= self.selector(a.node_selector)
        if a.terms is not None:
            any_term = np.zeros(self.n, dtype=np.bool_)
            for t in a.terms:
                any_term |= self.node_selector_term(t)
            out &= any_term
        return out

    def preferred_node_scores(self, terms: Iterable[PreferredNodeTerm]) -> IntArray:
        out = np.zeros(self.n, dtype=np.int64)
        for t in terms:
            out += np.where(self.node_selector_term(t.term), t.weight, 0)
        return out

    def pair_counts(self, key: str, counts: Mapping[str, int]) -> IntArray:
        """Per node: counts[value of `key` on the node], 0 without the key or value."""
        codes, vocab = self.column(key)
        lut = np.zeros(len(vocab) + 1, dtype=np.int64)
        for v, c in counts.items():
            code = vocab.get(v)
            if code is not None:
                lut[code] = c
        return lut[codes]


# =============================================================================================
# pod topology spread

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
        keys = [k for k in _str_list(c.get("matchLabelKeys")) if k in pod_labels]
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
