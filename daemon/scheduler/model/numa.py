"""Numatopology objects (nodeinfo.volcano.sh/v1alpha1): a node's CPU topology and NUMA state.

A Numatopology is cluster-scoped and named after its node.  It carries the kubelet's manager
policies (`spec.policies`: CPUManagerPolicy, TopologyManagerPolicy), the allocatable CPU set per
resource (`spec.numares[r].allocatable`, a cpuset string such as "0-3,8"), each CPU's NUMA node,
socket and core (`spec.cpuDetail`), the reserved resources (`spec.resReserved`) and the pods
the exporter has seen assigned (`spec.podAllocations`).  This module also holds the cpuset
text form (k8s.io/utils/cpuset Parse / String) and the CPU-topology queries the numa-aware
plugin's CPU manager provider uses (kubelet cpumanager/topology CPUDetails).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

CPU_MANAGER_POLICY = "CPUManagerPolicy"
TOPOLOGY_MANAGER_POLICY = "TopologyManagerPolicy"

# Carried on a pod bound with a numa-aware assignment: the CPU set Volcano's cache keeps for it
# (NodeInfo.UnassignedNumaPods) until the node's Numatopology lists the pod (Fumarole's carrier;
# Volcano keeps it in memory only).
NUMA_CPUS_ANNOTATION = "fumarole.io/numa-cpus"


class CPUSetError(ValueError):
    """A cpuset string that k8s.io/utils/cpuset.Parse refuses."""


def parse_cpuset(text: str) -> frozenset[int]:
    """cpuset.Parse: "" is empty; comma-separated ids or inclusive ranges "a-b" (a <= b)."""
    out: set[int] = set()
    if text == "":
        return frozenset()
    for part in text.split(","):
        lo_s, sep, hi_s = part.partition("-")
        if not lo_s.isdigit() or (sep and not hi_s.isdigit()):
            raise CPUSetError(f"invalid cpuset {text!r}: bad element {part!r}")
        lo = int(lo_s)
        hi = int(hi_s) if sep else lo
        if lo > hi:
            raise CPUSetError(f"invalid cpuset {text!r}: range {part!r} goes down")
        out.update(range(lo, hi + 1))
    return frozenset(out)


def format_cpuset(cpus: Iterable[int]) -> str:
    """cpuset.String: sorted ids, runs of consecutive ids as "a-b"."""
    ids = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass(frozen=True, slots=True)
class CPUInfo:
    """One CPU's place: NUMA node, socket, core (cpumanager/topology.CPUInfo)."""

    numa: int = 0
    socket: int = 0
    core: int = 0


class CPUDetails:
    """cpumanager/topology.CPUDetails: cpu id -> CPUInfo, with the queries the provider uses."""

    __slots__ = ("by_id",)

    def __init__(self, by_id: Mapping[int, CPUInfo]) -> None:
        self.by_id: dict[int, CPUInfo] = dict(by_id)

    def get(self, cpu: int) -> CPUInfo:
        """`details[cpu]`: a CPU absent from the map reads as the zero CPUInfo (NUMA 0), as in Go."""
        return self.by_id.get(cpu, _ZERO)

    def keep_only(self, cpus: frozenset[int]) -> CPUDetails:
        return CPUDetails({c: i for c, i in self.by_id.items() if c in cpus})

    def cpus(self) -> frozenset[int]:
        return frozenset(self.by_id)

    def numa_nodes(self) -> list[int]:
        return sorted({i.numa for i in self.by_id.values()})

    def sockets(self) -> frozenset[int]:
        return frozenset(i.socket for i in self.by_id.values())

    def cores(self) -> frozenset[int]:
        return frozenset(i.core for i in self.by_id.values())

    def cores_in_sockets(self, *sockets: int) -> frozenset[int]:
        return frozenset(i.core for i in self.by_id.values() if i.socket in sockets)

    def cpus_in_numa_nodes(self, *numa: int) -> frozenset[int]:
        return frozenset(c for c, i in self.by_id.items() if i.numa in numa)

    def cpus_in_sockets(self, *sockets: int) -> frozenset[int]:
        return frozenset(c for c, i in self.by_id.items() if i.socket in sockets)

    def cpus_in_cores(self, *cores: int) -> frozenset[int]:
        return frozenset(c for c, i in self.by_id.items() if i.core in cores)

    def physical_cores(self) -> int:
        """getPhysicalCoresNum: distinct (socket, core) pairs."""
        return len({(i.socket, i.core) for i in self.by_id.values()})


_ZERO = CPUInfo()


@dataclass(frozen=True, slots=True)
class PodAllocation:
    """One `spec.podAllocations[]` entry (only its identity matters to the scheduler)."""

    uid: str = ""
    namespace: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class NumaTopology:
    """A Numatopology object as decoded (api.NumatopoInfo)."""

    name: str
    policies: Mapping[str, str] = field(default_factory=dict)
    # resource name -> (allocatable cpuset, capacity)
    numa_res: Mapping[str, tuple[frozenset[int], int]] = field(default_factory=dict)
    cpu_detail: Mapping[int, CPUInfo] = field(default_factory=dict)
    # spec.resReserved["cpu"] in millicores (None: not given)
    reserved_cpu_milli: int | None = None
    pod_allocations: tuple[PodAllocation, ...] = ()

    def details(self) -> CPUDetails:
        return CPUDetails(self.cpu_detail)

    def assigned(self, uid: str, namespace: str, name: str) -> bool:
        """CheckNumaPodAssigned: listed by uid, or by namespace and name."""
        return any(
            (a.uid == uid) or (a.name == name and a.namespace == namespace) for a in self.pod_allocations
        )
