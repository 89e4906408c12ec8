"""numa-aware's one topology hint provider, the CPU manager (plugins/numaaware/provider/cpumanager).

Hints: a container asking an integral number of CPUs n (`guaranteedCPUs`: ceil(q) when
ceil(q)·1000 equals ceil(q·1000) — so 1.9995 counts as 2 — else 0) gets, for every subset of
the node's NUMA nodes holding at least n available CPUs, a hint preferred when its size is the
smallest size whose NUMA nodes hold n CPUs in all (available or not).  No cpu request, a
non-integral one, or no `cpu` in the node's sets: no preference (None).  Reserved CPUs
(`resReserved.cpu`, rounded up) are taken by topology from all CPUs and never offered.

Allocate: CPUs of the best hint's NUMA nodes first (kubelet's takeByTopology: whole sockets,
then whole cores, then single CPUs), then the rest anywhere; when either step fails, the
container gets no CPUs (an empty set), as in Volcano.

Quirks kept: `freeSockets` intersects socket ids with CPU ids (`freeCores` core ids); CPUs
missing from cpuDetail count as NUMA node 0; the core and CPU orderings use Volcano's
comparators, which are not strict weak orders ("a<b || c<d"): the result depends on the
sorting algorithm.  Go's sort.Slice runs insertion sort on up to 12 elements, which this
reproduces exactly; on longer lists Go's pdqsort may order differently (documented in
docs/plugins.md).  Socket ids start sorted (Volcano starts from a Go map's random order).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import TypeVar

from fumarole.daemon.scheduler.model.numa import CPUDetails
from fumarole.daemon.scheduler.plugins.numa_policy import Hint, bits_of, count, iterate_bitmasks

T = TypeVar("T")
CPU = "cpu"


def guaranteed_cpus(request: Fraction | None) -> int:
    if request is None:
        return 0
    value = math.ceil(request)
    return value if value * 1000 == math.ceil(request * 1000) else 0


def _go_sort(items: list[T], less: Callable[[T, T], bool]) -> list[T]:
    """Go's sort.Slice for the lengths it insertion-sorts (<= 12), applied to any length."""
    a = list(items)
    for i in range(1, len(a)):
        j = i
        while j > 0 and less(a[j], a[j - 1]):
            a[j], a[j - 1] = a[j - 1], a[j]
            j -= 1
    return a


class _Topo:
    __slots__ = ("details", "num_cores", "num_cpus", "num_sockets")

    def __init__(self, details: CPUDetails) -> None:
        self.details = details
        self.num_cpus = len(details.cpus())
        self.num_cores = details.physical_cores()
        self.num_sockets = len(details.sockets())

    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0


class _Acc:
    def __init__(self, topo: _Topo, available: frozenset[int], n: int) -> None:
        self.topo = topo
        self.details = topo.details.keep_only(available)
        self.needed = n
        self.result: frozenset[int] = frozenset()

    def take(self, cpus: frozenset[int]) -> None:
        self.result |= cpus
        self.details = self.details.keep_only(self.details.cpus() - self.result)
        self.needed -= len(cpus)

    def free_sockets(self) -> list[int]:
        return sorted(self.details.sockets() & self.details.cpus())

    def free_cores(self) -> list[int]:
        d = self.details
        free = d.cpus()

        def n_cores(s: int) -> int:
            return len(frozenset(c for c in d.cores_in_sockets(s)) & free)

        sockets = _go_sort(sorted(d.sockets()), lambda i, j: n_cores(i) < n_cores(j) or i < j)
        out: list[int] = []
        for s in sockets:
            out.extend(sorted(d.cores_in_sockets(s) & free))
        return out

    def free_cpus(self) -> list[int]:
        full = self.topo.details
        d = self.details

        def socket_of(core: int) -> int:
            return full.get(min(full.cpus_in_cores(core))).socket

        def less(ci: int, cj: int) -> bool:
            si, sj = socket_of(ci), socket_of(cj)
            return (
                len(full.cpus_in_sockets(si) & self.result) > len(full.cpus_in_sockets(sj) & self.result)
                or len(d.cpus_in_sockets(si)) < len(d.cpus_in_sockets(sj))
                or len(d.cpus_in_cores(ci)) < len(d.cpus_in_cores(cj))
                or si < sj
                or ci < cj
            )

        out: list[int] = []
        for core in _go_sort(sorted(d.cores()), less):
            out.extend(sorted(d.cpus_in_cores(core)))
        return out

    def needs(self, n: int) -> bool:
        return self.needed >= n

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.details.cpus())


def take_by_topology(topo: _Topo, available: frozenset[int], n: int) -> frozenset[int] | None:
    """takeByTopology: n CPUs of `available`, packed by socket, core, CPU; None when it fails."""
    acc = _Acc(topo, available, n)
    if acc.satisfied():
        return acc.result
    if acc.failed():
        return None
    if acc.needs(topo.cpus_per_socket()):
        for s in acc.free_sockets():
            acc.take(acc.details.cpus_in_sockets(s))
            if acc.satisfied():
                return acc.result
            if not acc.needs(topo.cpus_per_socket()):
                break
    if acc.needs(topo.cpus_per_core()):
        for c in acc.free_cores():
            acc.take(acc.details.cpus_in_cores(c))
            if acc.satisfied():
                return acc.result
            if not acc.needs(topo.cpus_per_core()):
                break
    for c in acc.free_cpus():
        if acc.needs(1):
            acc.take(frozenset((c,)))
        if acc.satisfied():
            return acc.result
    return None


def _reserved(topo: _Topo, reserved_milli: int | None) -> frozenset[int]:
    if reserved_milli is None:
        return frozenset()
    got = take_by_topology(topo, topo.details.cpus(), math.ceil(reserved_milli / 1000))
    return got if got is not None else frozenset()


def generate_hints(available: frozenset[int], details: CPUDetails, request: int) -> list[Hint]:
    numa = details.numa_nodes()
    min_size = len(numa)
    hints: list[Hint] = []
    for mask in iterate_bitmasks(numa):
        in_mask = len(details.cpus_in_numa_nodes(*bits_of(mask)))
        if in_mask >= request and count(mask) < min_size:
            min_size = count(mask)
        matching = sum(1 for c in available if mask >> details.get(c).numa & 1)
        if matching < request:
            continue
        hints.append(Hint(mask, False))
    return [Hint(h.affinity, True) if count(h.affinity or 0) == min_size else h for h in hints]


def topology_hints(
    request: Fraction | None,
    details: CPUDetails,
    reserved_milli: int | None,
    res_sets: dict[str, frozenset[int]],
) -> dict[str, list[Hint]] | None:
    """cpuMng.GetTopologyHints for one container (None: no preference)."""
    if request is None:
        return None
    n = guaranteed_cpus(request)
    if n == 0:
        return None
    topo = _Topo(details)
    reserved = _reserved(topo, reserved_milli)
    if CPU not in res_sets:
        return None
    available = res_sets[CPU] - reserved
    return {CPU: generate_hints(available, details, n)}


def allocate(
    request: Fraction | None,
    best: Hint,
    details: CPUDetails,
    reserved_milli: int | None,
    res_sets: dict[str, frozenset[int]],
) -> dict[str, frozenset[int]]:
    """cpuMng.Allocate for one container."""
    topo = _Topo(details)
    reserved = _reserved(topo, reserved_milli)
    n = guaranteed_cpus(request)
    available = res_sets.get(CPU, frozenset()) - reserved
    result: frozenset[int] = frozenset()
    if best.affinity is not None:
        aligned: frozenset[int] = frozenset()
        for numa in bits_of(best.affinity):
            aligned |= available & details.cpus_in_numa_nodes(numa)
        got = take_by_topology(topo, aligned, min(n, len(aligned)))
        if got is None:
            return {CPU: frozenset()}
        result |= got
    rest = take_by_topology(topo, available - result, n - len(result))
    if rest is None:
        return {CPU: frozenset()}
    return {CPU: result | rest}
