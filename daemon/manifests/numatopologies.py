"""Numatopology objects (nodeinfo.volcano.sh/v1alpha1) decoded into model/numa.NumaTopology.

Checks beyond the CRD's types: `numares.<r>.allocatable` must be a cpuset string ("0-3,8"),
`cpuDetail` keys CPU ids (decimal), `resReserved` quantities (Volcano logs a bad cpuset or
resource list and carries on with an empty one; here it is an error naming the field).
"""

from __future__ import annotations

import math

from fumarole.daemon.manifests.fields import join, show
from fumarole.daemon.manifests.objects import Entry
from fumarole.daemon.scheduler.model.numa import (
    CPUInfo,
    CPUSetError,
    NumaTopology,
    PodAllocation,
    parse_cpuset,
)


def decode_numatopology(e: Entry) -> NumaTopology:
    d, o = e.doc, e.obj
    spec = d.mapping(o.get("spec"), "spec")
    policies = d.str_map(spec.get("policies"), "spec.policies")
    numa_res: dict[str, tuple[frozenset[int], int]] = {}
    raw_res = d.mapping(spec.get("numares"), "spec.numares")
    for res in sorted(raw_res):
        path = join("spec.numares", res)
        info = d.mapping(raw_res[res], path)
        text = d.string(info.get("allocatable"), path + ".allocatable")
        try:
            cpus = parse_cpuset(text)
        except CPUSetError as err:
            d.fail(path + ".allocatable", str(err))
        numa_res[res] = (cpus, d.integer(info.get("capacity"), path + ".capacity", 0, 0))
    detail: dict[int, CPUInfo] = {}
    raw_detail = d.mapping(spec.get("cpuDetail"), "spec.cpuDetail")
    for key in sorted(raw_detail):
        path = join("spec.cpuDetail", key)
        if not key.isdigit():
            d.fail(path, f"a cpu id (decimal) is expected, got {show(key)}")
        info = d.mapping(raw_detail[key], path)
        detail[int(key)] = CPUInfo(
            numa=d.integer(info.get("numa"), path + ".numa", 0, 0),
            socket=d.integer(info.get("socket"), path + ".socket", 0, 0),
            core=d.integer(info.get("core"), path + ".core", 0, 0),
        )
    reserved = d.quantities(spec.get("resReserved"), "spec.resReserved")
    cpu = reserved.get("cpu")
    allocs: list[PodAllocation] = []
    for i, raw in enumerate(d.seq(spec.get("podAllocations"), "spec.podAllocations")):
        path = f"spec.podAllocations[{i}]"
        a = d.mapping(raw, path)
        allocs.append(
            PodAllocation(
                uid=d.string(a.get("uid"), path + ".uid"),
                namespace=d.string(a.get("namespace"), path + ".namespace"),
                name=d.string(a.get("name"), path + ".name"),
            )
        )
    return NumaTopology(
        name=e.name,
        policies=policies,
        numa_res=numa_res,
        cpu_detail=detail,
        reserved_cpu_milli=None if cpu is None else math.ceil(cpu * 1000),
        pod_allocations=tuple(allocs),
    )
