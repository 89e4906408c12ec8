"""numa-aware's topology policies (plugins/numaaware/policy): hint merging per policy.

A hint is (NUMA affinity bitmask or None, preferred).  A provider answers, per resource, a list
of hints; `filter_providers_hints` turns "no preference" (no answer, or None for a resource)
into [(None, True)] and "no possible affinity" (an empty list) into [(None, False)].  Every
permutation (one hint per resource) is merged: the affinities ANDed together with all the
node's NUMA nodes (None counts as all), preferred only if every hint is.  The best merged hint
starts as (all NUMA nodes, not preferred); a preferred one replaces a non-preferred one, and
among equals a narrower one (fewer NUMA nodes; at equal count, the lower bitmask) wins.

Policies (by the node's TopologyManagerPolicy): none admits everything with an empty hint;
best-effort admits the best hint; restricted admits it only if preferred; single-numa-node
keeps only preferred hints of one NUMA node (or None) before merging, then admits if preferred.
An unknown policy behaves as none without NUMA nodes (Volcano's `&policyNone{}`).

Bitmasks are Python ints (bit i = NUMA node i).  Determinism: Volcano ranges over the
provider's resource map (random order); here resources go in name order (only `cpu` exists).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

NONE = "none"
BEST_EFFORT = "best-effort"
RESTRICTED = "restricted"
SINGLE_NUMA_NODE = "single-numa-node"
POLICIES = (NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)


@dataclass(frozen=True, slots=True)
class Hint:
    """policy.TopologyHint: a NUMA affinity (None: any) and whether it is preferred."""

    affinity: int | None
    preferred: bool


# One provider's answer: resource name -> hints (None: no preference for that resource).
ProviderHints = Mapping[str, Sequence[Hint] | None] | None


def mask_of(bits: Sequence[int]) -> int:
    m = 0
    for b in bits:
        m |= 1 << b
    return m


def bits_of(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def count(mask: int) -> int:
    return bin(mask).count("1")


def narrower(a: int, b: int) -> bool:
    """bitmask.IsNarrowerThan: fewer bits, or as many and a lower value."""
    ca, cb = count(a), count(b)
    return a < b if ca == cb else ca < cb


def iterate_bitmasks(bits: Sequence[int]) -> list[int]:
    """bitmask.IterateBitMasks: every non-empty subset, by size, then lexicographically."""
    return [mask_of(c) for k in range(1, len(bits) + 1) for c in combinations(bits, k)]


def filter_providers_hints(providers: Sequence[ProviderHints]) -> list[list[Hint]]:
    out: list[list[Hint]] = []
    for hints in providers:
        if not hints:
            out.append([Hint(None, True)])
            continue
        for resource in sorted(hints):
            h = hints[resource]
            if h is None:
                out.append([Hint(None, True)])
            elif len(h) == 0:
                out.append([Hint(None, False)])
            else:
                out.append(list(h))
    return out


def _permutations(hints: list[list[Hint]], callback: Callable[[list[Hint]], None]) -> None:
    def rec(i: int, acc: list[Hint]) -> None:
        if i == len(hints):
            callback(acc)
            return
        for h in hints[i]:
            rec(i + 1, [*acc, h])

    rec(0, [])


def merge_permutation(numa_nodes: Sequence[int], permutation: Sequence[Hint]) -> Hint:
    default = mask_of(numa_nodes)
    merged = default
    preferred = True
    for h in permutation:
        merged &= default if h.affinity is None else h.affinity
        if not h.preferred:
            preferred = False
    return Hint(merged, preferred)


def merge_filtered_hints(numa_nodes: Sequence[int], filtered: list[list[Hint]]) -> Hint:
    best = Hint(mask_of(numa_nodes), False)

    def visit(permutation: list[Hint]) -> None:
        nonlocal best
        merged = merge_permutation(numa_nodes, permutation)
        assert merged.affinity is not None
        if count(merged.affinity) == 0:
            return
        if merged.preferred and not best.preferred:
            best = merged
            return
        if not merged.preferred and best.preferred:
            return
        assert best.affinity is not None
        if not narrower(merged.affinity, best.affinity):
            return
        best = merged

    _permutations(filtered, visit)
    return best


def _single_numa(filtered: list[list[Hint]]) -> list[list[Hint]]:
    return [
        [h for h in hs if h.preferred and (h.affinity is None or count(h.affinity) == 1)] for hs in filtered
    ]


def predicate(
    policy: str, numa_nodes: Sequence[int], providers: Sequence[ProviderHints]
) -> tuple[Hint, bool]:
    """Policy.Predicate: the best hint and whether the container is admitted."""
    if policy == NONE:
        return Hint(None, False), True
    if policy not in POLICIES:  # GetPolicy's fallback: &policyNone{}
        return Hint(None, False), True
    filtered = filter_providers_hints(providers)
    if policy == SINGLE_NUMA_NODE:
        filtered = _single_numa(filtered)
    best = merge_filtered_hints(numa_nodes, filtered)
    if policy == BEST_EFFORT:
        return best, True
    return best, best.preferred
