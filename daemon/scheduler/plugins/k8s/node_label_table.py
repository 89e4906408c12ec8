"""`NodeLabelTable`: node labels as integer-coded columns, so that a selector, a node affinity or a
topology-pair count is evaluated for every node of a session with a few array operations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from fumarole.daemon.scheduler.framework.nodetable import BoolArray, IntArray
from fumarole.daemon.scheduler.plugins.k8s.labels import (
    OP_DOES_NOT_EXIST,
    OP_EQUALS,
    OP_EXISTS,
    OP_GT,
    OP_IN,
    OP_NOT_IN,
    LabelSelector,
    Requirement,
    parse_int64,
)
from fumarole.daemon.scheduler.plugins.k8s.node_affinity import (
    NODE_NAME_FIELD,
    FieldRequirement,
    NodeSelectorTerm,
    PreferredNodeTerm,
    RequiredNodeAffinity,
)


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
