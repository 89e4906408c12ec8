"""Per-container extended-resource figures of a pod, as device plugins (deviceshare) read them.

Volcano's device code reads container `limits` (and sometimes `requests`) of extended
resources such as `volcano.sh/gpu-memory` one container at a time, not the pod's summed
request; a pod keeps those figures here.  Values are whole units, as Quantity.Value() gives
them (rounded up).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """One container's extended-resource limits and requests (names with a '/')."""

    init: bool = False
    limits: Mapping[str, int] = field(default_factory=dict)
    requests: Mapping[str, int] = field(default_factory=dict)

    def limit(self, name: str) -> int | None:
        return self.limits.get(name)

    def limit_or_request(self, name: str) -> int | None:
        v = self.limits.get(name)
        return v if v is not None else self.requests.get(name)


def _whole(values: Mapping[str, Fraction | int]) -> dict[str, int]:
    return {k: math.ceil(v) for k, v in sorted(values.items()) if "/" in k}


def pod_extended_resources(
    containers: Iterable[tuple[Mapping[str, Fraction | int], Mapping[str, Fraction | int]]],
    inits: Iterable[tuple[Mapping[str, Fraction | int], Mapping[str, Fraction | int], bool]] = (),
) -> tuple[ContainerResources, ...]:
    """Init containers first (spec order), then app containers; containers without any are left out."""
    out: list[ContainerResources] = []
    for req, lim, _sidecar in inits:
        lim_w, req_w = _whole(lim), _whole(req)
        if lim_w or req_w:
            out.append(ContainerResources(True, lim_w, req_w))
    for req, lim in containers:
        lim_w, req_w = _whole(lim), _whole(req)
        if lim_w or req_w:
            out.append(ContainerResources(False, lim_w, req_w))
    return tuple(out)
