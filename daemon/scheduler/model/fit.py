"""Predicate outcomes: per-node statuses (FitError) and per-task histograms (FitErrors)."""

from __future__ import annotations

from collections import Counter
from enum import IntEnum


class Code(IntEnum):
    """Status codes of the Kubernetes scheduling framework as Volcano uses them."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5


NODE_POD_NUMBER_EXCEEDED = "node(s) pod number exceeded"
ALL_NODES_UNAVAILABLE = "all nodes are unavailable"


class FitError(Exception):
    """Why one task does not fit one node: a list of (code, reason)."""

    def __init__(self, task_ns: str, task_name: str, node: str, statuses: list[tuple[Code, str]]) -> None:
        super().__init__()
        self.task_ns = task_ns
        self.task_name = task_name
        self.node = node
        self.statuses = statuses

    def reasons(self) -> list[str]:
        return [r for _, r in self.statuses if r]

    def codes(self) -> set[Code]:
        return {c for c, _ in self.statuses}

    @property
    def unresolvable(self) -> bool:
        return Code.UNSCHEDULABLE_AND_UNRESOLVABLE in self.codes()

    def __str__(self) -> str:
        reasons = ", ".join(self.reasons())
        return f"task {self.task_ns}/{self.task_name} on node {self.node} fit failed: {reasons}"


def fit_error(task_ns: str, task_name: str, node: str, code: Code, *reasons: str) -> FitError:
    return FitError(task_ns, task_name, node, [(code, r) for r in reasons])


class FitErrors:
    """Fit errors of one task over nodes; renders Volcano's histogram message."""

    __slots__ = ("err", "extra_failed", "extra_unresolvable", "hypernode", "nodes", "reason_counts")

    def __init__(self) -> None:
        self.nodes: dict[str, FitError] = {}
        self.err = ""
        # Aggregated counts from the vectorised path: reason -> number of nodes (beside `nodes`).
        self.reason_counts: Counter[str] = Counter()
        self.extra_failed = 0
        self.extra_unresolvable: set[str] = set()
        # The HyperNode whose nodes were searched (SetHyperNode); "" for the whole cluster.
        self.hypernode = ""

    def set_error(self, msg: str) -> None:
        self.err = msg

    def set_node_error(self, node: str, err: Exception) -> None:
        if isinstance(err, FitError):
            err.node = node
            self.nodes[node] = err
        else:
            self.nodes[node] = FitError("", "", node, [(Code.ERROR, str(err))])

    def add_counts(self, counts: dict[str, int], failed_nodes: int, unresolvable: set[str]) -> None:
        """Record failures found by the vectorised path without one FitError object per node."""
        self.reason_counts.update(counts)
        self.extra_failed += failed_nodes
        self.extra_unresolvable |= unresolvable

    def failed_node_count(self) -> int:
        return len(self.nodes) + self.extra_failed

    def unresolvable_nodes(self) -> set[str]:
        return {n for n, fe in self.nodes.items() if fe.unresolvable} | self.extra_unresolvable

    def histogram(self) -> Counter[str]:
        hist: Counter[str] = Counter(self.reason_counts)
        for fe in self.nodes.values():
            for r in fe.reasons():
                hist[r] += 1
        return hist

    def message(self) -> str:
        head = self.err or f"0/{self.failed_node_count()} nodes are unavailable"
        hist = self.histogram()
        if not self.nodes and not self.reason_counts:
            return head
        parts = sorted(f"{v} {k}" for k, v in hist.items())
        msg = f"{head}: {', '.join(parts)}."
        return f"In hyperNode {self.hypernode}: {msg}" if self.hypernode else msg

    def __str__(self) -> str:
        return self.message()
