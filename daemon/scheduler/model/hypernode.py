"""HyperNodes (topology.volcano.sh/v1alpha1): their specs, and the tree a session builds of them.

A HyperNode groups nodes (members of type Node, selected by exact name, regular expression or
labels) or other HyperNodes (members of type HyperNode, by exact name) into a network tier;
lower tiers are closer.  `build_topology` resolves the specs against the session's nodes as
Volcano's cache does (api/hyper_node_info.go BuildHyperNodeCache): each HyperNode's real nodes
are its Node members plus its HyperNode members' real nodes; a HyperNode member names its
parent.  A member claimed by two parents, or a cycle, makes the topology not ready (Volcano then
schedules no job with a network topology).  The virtual `<cluster-top-hypernode>` (tier = the
highest tier + 1, 1 without HyperNodes) is the parent of every parentless HyperNode and holds
every node (framework/session.go addClusterTopHyperNode).

Determinism: Volcano keeps children and real nodes in Go sets (random iteration).  Here the
children of a HyperNode are sorted by name and a HyperNode's nodes are in node-list order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

CLUSTER_TOP = "<cluster-top-hypernode>"
MEMBER_NODE = "Node"
MEMBER_HYPERNODE = "HyperNode"
MODE_HARD = "hard"
MODE_SOFT = "soft"


class LabelMatcher(Protocol):
    """A parsed label selector (plugins/k8s/labels.LabelSelector)."""

    def matches(self, labels: Mapping[str, str]) -> bool: ...


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One `spec.members[]` entry: its type and exactly one selector."""

    type: str
    exact: str = ""
    regex: re.Pattern[str] | None = None
    labels: LabelMatcher | None = None
    # labelMatch with neither matchLabels nor matchExpressions selects nothing (Volcano).
    labels_empty: bool = False

    def node_members(self, nodes: Sequence[tuple[str, Mapping[str, str]]]) -> list[str]:
        """hypernodeutil.GetMembers for a Node member: names (exact ones even if absent)."""
        if self.exact:
            return [self.exact]
        if self.regex is not None:
            rx = self.regex
            return [name for name, _ in nodes if rx.search(name)]
        if self.labels is not None and not self.labels_empty:
            lm = self.labels
            return [name for name, labels in nodes if lm.matches(labels)]
        return []


@dataclass(frozen=True, slots=True)
class HyperNodeSpec:
    """A HyperNode object as decoded: name, tier, tierName, members."""

    name: str
    tier: int
    tier_name: str = ""
    members: tuple[MemberSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class NetworkTopology:
    """A PodGroup's `spec.networkTopology` (mode hard|soft, highestTierAllowed or highestTierName)."""

    mode: str = MODE_HARD
    highest_tier_allowed: int | None = None
    highest_tier_name: str = ""

    def hard_tier(self) -> int | None:
        """IsHardTopologyMode: the highest allowed tier when hard with a tier, else None."""
        if self.highest_tier_allowed is None or self.mode != MODE_HARD:
            return None
        return self.highest_tier_allowed

    def describe(self) -> str:
        if self.highest_tier_allowed is not None:
            return f"{self.mode}, highestTierAllowed {self.highest_tier_allowed}"
        if self.highest_tier_name:
            return f"{self.mode}, highestTierName {self.highest_tier_name}"
        return self.mode


@dataclass(slots=True)
class HyperNodeInfo:
    name: str
    tier: int
    tier_name: str = ""
    parent: str = ""
    children: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Topology:
    """The session's HyperNodes (cluster top included), their nodes and tiers."""

    hypernodes: dict[str, HyperNodeInfo]
    # HyperNode -> its nodes that exist in the session, in node-list order (RealNodesList).
    real_nodes: dict[str, list[str]]
    real_sets: dict[str, frozenset[str]]
    # Tier -> HyperNode names (sorted); tiers ascending (HyperNodesSetByTier, HyperNodesTiers).
    by_tier: dict[int, list[str]]
    tiers: list[int]
    tier_names: dict[str, int]
    ready: bool = True
    problem: str = ""
    _lowest: dict[str, str] = field(default_factory=dict)

    @property
    def top(self) -> HyperNodeInfo:
        return self.hypernodes[CLUSTER_TOP]

    def ancestors(self, name: str) -> list[str]:
        """GetAncestors: the HyperNode itself, then its parent, and so on up to the top."""
        out = [name]
        seen = {name}
        cur = self.hypernodes.get(name)
        while cur is not None and cur.parent and cur.parent not in seen:
            out.append(cur.parent)
            seen.add(cur.parent)
            cur = self.hypernodes.get(cur.parent)
        return out

    def lca(self, a: str, b: str) -> str:
        """GetLCAHyperNode: the lowest common ancestor ("" when none); an empty side gives the other."""
        if not a:
            return b
        if not b:
            return a
        mine = set(self.ancestors(a))
        for anc in self.ancestors(b):
            if anc in mine:
                return anc
        return ""

    def tier_of(self, name: str) -> int:
        hn = self.hypernodes.get(name)
        return hn.tier if hn is not None else 0

    def hypernode_of_node(self, node: str) -> str:
        """FindHyperNodeForNode: the HyperNode of the lowest tier holding the node ("" if none).

        Volcano takes the first one found in a Go set of that tier; here the first by name.
        """
        if not self._lowest and self.tiers:
            for hn in self.by_tier.get(self.tiers[0], []):
                for n in self.real_nodes.get(hn, ()):
                    self._lowest.setdefault(n, hn)
            self._lowest.setdefault("", "")
        return self._lowest.get(node, "")

    def descendants_bfs(self, root: str) -> list[str]:
        """The HyperNode and every HyperNode below it, breadth first, children by name."""
        out = [root]
        seen = {root}
        i = 0
        while i < len(out):
            hn = self.hypernodes.get(out[i])
            i += 1
            if hn is None:
                continue
            for c in hn.children:
                if c not in seen and c in self.hypernodes:
                    seen.add(c)
                    out.append(c)
        return out


def build_topology(
    specs: Iterable[HyperNodeSpec], nodes: Sequence[tuple[str, Mapping[str, str]]]
) -> Topology:
    """The session's topology from the HyperNode specs and the session's (name, labels) nodes."""
    by_name = {s.name: s for s in sorted(specs, key=lambda s: s.name)}
    infos = {name: HyperNodeInfo(name, s.tier, s.tier_name) for name, s in by_name.items()}
    problem = ""
    # Parents: a HyperNode member is the child of the HyperNode that lists it (addChild).
    for name, s in by_name.items():
        for m in s.members:
            if m.type != MEMBER_HYPERNODE or not m.exact or m.exact not in infos:
                continue
            child = infos[m.exact]
            if child.parent and child.parent != name:
                problem = problem or (
                    f"HyperNode {m.exact} already has a parent {child.parent}, "
                    f"and cannot set another parent {name}"
                )
                continue
            child.parent = name
            if m.exact not in infos[name].children:
                infos[name].children.append(m.exact)
    for hn in infos.values():
        hn.children.sort()
    # Real nodes: Node members, plus the real nodes of HyperNode members (recursively).
    node_order = {name: i for i, (name, _) in enumerate(nodes)}
    resolved: dict[str, set[str]] = {}

    def resolve(name: str, chain: list[str]) -> set[str]:
        nonlocal problem
        if name in chain:
            problem = (
                problem or f"cyclic dependency detected: HyperNode {name} is already in the ancestor chain"
            )
            return set()
        if name in resolved:
            return resolved[name]
        out: set[str] = set()
        for m in by_name[name].members:
            if m.type == MEMBER_NODE:
                out.update(m.node_members(nodes))
            elif m.exact in by_name:
                out |= resolve(m.exact, [*chain, name])
        resolved[name] = out
        return out

    for name in by_name:
        resolve(name, [])
    real_nodes = {
        name: sorted((n for n in members if n in node_order), key=node_order.__getitem__)
        for name, members in resolved.items()
    }
    top_tier = max((s.tier + 1 for s in by_name.values()), default=1)
    top_tier = max(top_tier, 1)
    top = HyperNodeInfo(CLUSTER_TOP, top_tier)
    for name, hn in infos.items():
        if not hn.parent:
            hn.parent = CLUSTER_TOP
            top.children.append(name)
    infos[CLUSTER_TOP] = top
    real_nodes[CLUSTER_TOP] = [name for name, _ in nodes]
    by_tier: dict[int, list[str]] = {}
    for name, hn in infos.items():
        by_tier.setdefault(hn.tier, []).append(name)
    by_tier[top_tier] = [CLUSTER_TOP]
    for row in by_tier.values():
        row.sort()
    tier_names: dict[str, int] = {}
    for s in by_name.values():
        if s.tier_name:
            tier_names[s.tier_name] = s.tier
    return Topology(
        hypernodes=infos,
        real_nodes=real_nodes,
        real_sets={k: frozenset(v) for k, v in real_nodes.items()},
        by_tier=by_tier,
        tiers=sorted(by_tier),
        tier_names=tier_names,
        ready=not problem,
        problem=problem,
    )
