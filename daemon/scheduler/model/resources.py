"""Resource vectors and Volcano's comparison semantics (api/resource_info.go).

A `Resource` holds milli-cpu, memory in bytes and scalar resources (milli-units, except
`pods`, a whole count).  Values read from manifests are integers; figures that Volcano
derives with float arithmetic (proportion's deserved, DRF shares) may be floats here too,
so that comparisons give Volcano's answers.  Every comparison honours Volcano's 0.1
tolerance (`MIN_RESOURCE`); with integer inputs this is exact comparison.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Any

from fumarole.daemon.scheduler.model.quantity import format_quantity, milli_value, whole_value

MIN_RESOURCE = 0.1
CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"

Number = int | float

# Resource names that are never scalar resources in Volcano's sense (v1helper.IsScalarResourceName).
_NATIVE_NON_SCALAR = frozenset({CPU, MEMORY})


class Default(IntEnum):
    """How a dimension missing from one side of a comparison is treated."""

    ZERO = 0
    INFINITY = -1


def is_scalar_resource_name(name: str) -> bool:
    """Mirror Kubernetes' IsScalarResourceName: extended, hugepages, attachable volumes, native prefixed."""
    if name.startswith("hugepages-") or name.startswith("attachable-volumes-"):
        return True
    if "kubernetes.io/" in name:
        return True
    if "/" in name:
        # Extended resources: a domain-qualified name outside kubernetes.io (requests.* is a quota name).
        prefix = name.split("/", 1)[0]
        return not name.startswith("requests.") and prefix != "kubernetes.io"
    # Native resources without a prefix that are scalar: pods and ephemeral-storage are added explicitly.
    return False


class Resource:
    """A mutable resource vector; mutating methods return `self` as Volcano's do."""

    __slots__ = ("cpu", "memory", "scalars")

    def __init__(
        self, cpu: Number = 0, memory: Number = 0, scalars: Mapping[str, Number] | None = None
    ) -> None:
        self.cpu: Number = cpu
        self.memory: Number = memory
        self.scalars: dict[str, Number] = dict(scalars) if scalars else {}

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_resource_list(cls, rl: Mapping[str, Any] | None) -> Resource:
        """Build from a Kubernetes ResourceList as Volcano's NewResource does."""
        r = cls()
        if not rl:
            return r
        for name in sorted(rl):
            q = rl[name]
            if name == CPU:
                r.cpu += milli_value(q)
            elif name == MEMORY:
                r.memory += whole_value(q)
            elif name == PODS:
                r.scalars[PODS] = r.scalars.get(PODS, 0) + whole_value(q)
            elif name == EPHEMERAL_STORAGE:
                r.scalars[name] = r.scalars.get(name, 0) + milli_value(q)
            elif name.startswith("count/"):
                continue
            elif is_scalar_resource_name(name):
                r.scalars[name] = r.scalars.get(name, 0) + milli_value(q)
        return r

    @classmethod
    def infinite(cls) -> Resource:
        return cls(float("inf"), float("inf"))

    def clone(self) -> Resource:
        return Resource(self.cpu, self.memory, self.scalars)

    # ----------------------------------------------------------------- accessors
    def get(self, name: str) -> Number:
        if name == CPU:
            return self.cpu
        if name == MEMORY:
            return self.memory
        return self.scalars.get(name, 0)

    def set(self, name: str, value: Number) -> None:
        if name == CPU:
            self.cpu = value
        elif name == MEMORY:
            self.memory = value
        else:
            self.scalars[name] = value

    def resource_names(self) -> list[str]:
        """Dimensions holding at least MIN_RESOURCE, cpu and memory first, scalars sorted."""
        names = []
        if self.cpu >= MIN_RESOURCE:
            names.append(CPU)
        if self.memory >= MIN_RESOURCE:
            names.append(MEMORY)
        s = self.scalars
        if s:
            for n in sorted(s) if len(s) > 1 else s:
                if s[n] >= MIN_RESOURCE:
                    names.append(n)
        return names

    def is_empty(self) -> bool:
        """cpu, memory and every scalar but `pods` below MIN_RESOURCE."""
        if self.cpu >= MIN_RESOURCE or self.memory >= MIN_RESOURCE:
            return False
        return all(v < MIN_RESOURCE for n, v in self.scalars.items() if n != PODS)

    def is_zero(self, name: str) -> bool:
        return self.get(name) < MIN_RESOURCE

    # ----------------------------------------------------------------- arithmetic (in place)
    def add(self, rr: Resource) -> Resource:
        self.cpu += rr.cpu
        self.memory += rr.memory
        s = self.scalars
        for n, v in rr.scalars.items():
            s[n] = s.get(n, 0) + v
        return self

    def sub(self, rr: Resource) -> Resource:
        """Subtract without Volcano's assertion (it only logs when the build allows it)."""
        self.cpu -= rr.cpu
        self.memory -= rr.memory
        if not self.scalars:
            # Volcano's sub skips scalars when the left side has no scalar map.
            return self
        s = self.scalars
        for n, v in rr.scalars.items():
            s[n] = s.get(n, 0) - v
        return self

    def multi(self, ratio: float) -> Resource:
        self.cpu *= ratio
        self.memory *= ratio
        for n in self.scalars:
            self.scalars[n] *= ratio
        return self

    def set_max_resource(self, rr: Resource) -> None:
        if rr.cpu > self.cpu:
            self.cpu = rr.cpu
        if rr.memory > self.memory:
            self.memory = rr.memory
        if not rr.scalars:
            return
        if not self.scalars:
            self.scalars = dict(rr.scalars)
            return
        for n, v in rr.scalars.items():
            if n not in self.scalars or v > self.scalars[n]:
                self.scalars[n] = v

    def fit_delta(self, rr: Resource) -> Resource:
        if rr.cpu > 0:
            self.cpu -= rr.cpu + MIN_RESOURCE
        if rr.memory > 0:
            self.memory -= rr.memory + MIN_RESOURCE
        for n, v in rr.scalars.items():
            if v > 0:
                self.scalars[n] = self.scalars.get(n, 0) - (v + MIN_RESOURCE)
        return self

    def min_dimension_resource(self, rr: Resource, default: Default) -> Resource:
        """Per-dimension minimum in place; left scalars missing on the right follow `default`."""
        if rr.cpu < self.cpu:
            self.cpu = rr.cpu
        if rr.memory < self.memory:
            self.memory = rr.memory
        if not self.scalars:
            return self
        if not rr.scalars:
            if default is Default.INFINITY:
                return self
            for n in self.scalars:
                self.scalars[n] = 0
            return self
        for n, v in self.scalars.items():
            if n in rr.scalars:
                self.scalars[n] = min(v, rr.scalars[n])
            elif default is Default.ZERO:
                self.scalars[n] = 0
        return self

    # ----------------------------------------------------------------- comparisons
    def less_equal(self, rr: Resource, default: Default = Default.ZERO) -> bool:
        if not _le(self.cpu, rr.cpu) or not _le(self.memory, rr.memory):
            return False
        rs = rr.scalars
        if default is Default.INFINITY:
            for n in rs:
                if n not in self.scalars:
                    return False
            for n, v in self.scalars.items():  # noqa: SIM110 - a plain loop is faster here
                if n in rs and not _le(v, rs[n]):
                    return False
            return True
        for n, v in self.scalars.items():  # noqa: SIM110 - a plain loop is faster here
            if not _le(v, rs.get(n, 0)):
                return False
        return True

    def less_equal_with_names(self, rr: Resource, default: Default = Default.ZERO) -> tuple[bool, list[str]]:
        """Like less_equal, naming the failing dimensions (cpu, memory, then scalars sorted)."""
        bad: list[str] = []
        if not _le(self.cpu, rr.cpu):
            bad.append(CPU)
        if not _le(self.memory, rr.memory):
            bad.append(MEMORY)
        rs = rr.scalars
        for n in sorted(self.scalars):
            if n not in rs and default is Default.INFINITY:
                continue
            if not _le(self.scalars[n], rs.get(n, 0)):
                bad.append(n)
        return (not bad), bad

    def less(self, rr: Resource, default: Default = Default.ZERO) -> bool:
        if not self.cpu < rr.cpu or not self.memory < rr.memory:
            return False
        rs = rr.scalars
        if default is Default.INFINITY:
            for n in rs:
                if n not in self.scalars:
                    return False
        for n, v in self.scalars.items():
            if n not in rs and default is Default.INFINITY:
                continue
            if not v < rs.get(n, 0):
                return False
        return True

    def less_partly(self, rr: Resource, default: Default = Default.ZERO) -> bool:
        if self.cpu < rr.cpu or self.memory < rr.memory:
            return True
        rs = rr.scalars
        if default is Default.ZERO:
            for n in rs:
                if n not in self.scalars:
                    return True
        for n, v in self.scalars.items():
            if n not in rs and default is Default.INFINITY:
                return True
            if v < rs.get(n, 0):
                return True
        return False

    def less_equal_partly(self, rr: Resource, default: Default = Default.ZERO) -> bool:
        if _le(self.cpu, rr.cpu) or _le(self.memory, rr.memory):
            return True
        rs = rr.scalars
        if default is Default.ZERO:
            for n in rs:
                if n not in self.scalars:
                    return True
        for n, v in self.scalars.items():
            if n not in rs and default is Default.INFINITY:
                return True
            if _le(v, rs.get(n, 0)):
                return True
        return False

    def less_equal_with_dimension(self, rr: Resource | None, req: Resource | None) -> tuple[bool, list[str]]:
        """LessEqualWithDimensionAndResourcesName: only the request's dims, strict, pods ignored."""
        if rr is None:
            return False, self.resource_names()
        if req is None:
            return self.less_equal_with_names(rr, Default.ZERO)
        bad: list[str] = []
        if req.cpu > 0 and self.cpu > rr.cpu:
            bad.append(CPU)
        if req.memory > 0 and self.memory > rr.memory:
            bad.append(MEMORY)
        if not self.scalars:
            return (not bad), bad
        for n in sorted(req.scalars):
            if n == PODS:
                continue
            if req.scalars[n] > 0 and self.scalars.get(n, 0) > rr.scalars.get(n, 0):
                bad.append(n)
        return (not bad), bad

    def less_equal_partly_with_dimension(self, rr: Resource, req: Resource | None) -> tuple[bool, list[str]]:
        """True when at least one requested dimension (pods ignored) is within rr (tolerance 0.1)."""
        ok: list[str] = []
        if req is None:
            return False, ok
        if req.cpu > 0 and _le(self.cpu, rr.cpu):
            ok.append(CPU)
        if req.memory > 0 and _le(self.memory, rr.memory):
            ok.append(MEMORY)
        for n in sorted(req.scalars):
            if n == PODS:
                continue
            if req.scalars[n] > 0 and _le(self.get(n), rr.get(n)):
                ok.append(n)
        return bool(ok), ok

    def greater_partly_with_dimension(
        self, rr: Resource | None, req: Resource | None
    ) -> tuple[bool, list[str]]:
        bad: list[str] = []
        if req is None:
            return False, bad
        other = rr if rr is not None else Resource()
        if req.cpu > 0 and self.cpu > other.cpu:
            bad.append(CPU)
        if req.memory > 0 and self.memory > other.memory:
            bad.append(MEMORY)
        for n in sorted(req.scalars):
            if n == PODS:
                continue
            if req.scalars[n] > 0 and self.get(n) > other.get(n):
                bad.append(n)
        return bool(bad), bad

    def equal(self, rr: Resource, default: Default = Default.ZERO) -> bool:
        if not _eq(self.cpu, rr.cpu) or not _eq(self.memory, rr.memory):
            return False
        return all(_eq(v, rr.scalars.get(n, 0)) for n, v in self.scalars.items())

    def diff(self, rr: Resource, default: Default = Default.ZERO) -> tuple[Resource, Resource]:
        """(increased, decreased) per dimension; missing scalars filled with `default` (-1 for infinity)."""
        inc, dec = Resource(), Resource()
        if self.cpu > rr.cpu:
            inc.cpu = self.cpu - rr.cpu
        else:
            dec.cpu = rr.cpu - self.cpu
        if self.memory > rr.memory:
            inc.memory = self.memory - rr.memory
        else:
            dec.memory = rr.memory - self.memory
        fill = int(default)
        names = sorted(set(self.scalars) | set(rr.scalars))
        for n in names:
            lq = self.scalars.get(n, fill)
            rq = rr.scalars.get(n, fill)
            if lq == Default.INFINITY:
                inc.scalars[n] = lq
                continue
            if rq == Default.INFINITY:
                dec.scalars[n] = rq
                continue
            if lq > rq:
                inc.scalars[n] = lq - rq
            else:
                dec.scalars[n] = rq - lq
        return inc, dec

    # ----------------------------------------------------------------- presentation
    def to_quantities(self, *, include_zero: bool = False) -> dict[str, str]:
        """Kubernetes quantity strings per dimension (cpu/scalars from milli-units, memory/pods plain)."""
        out: dict[str, str] = {}
        if include_zero or self.cpu:
            out[CPU] = format_quantity(self.cpu, milli=True)
        if include_zero or self.memory:
            out[MEMORY] = format_quantity(self.memory, milli=False)
        for n in sorted(self.scalars):
            v = self.scalars[n]
            if not include_zero and not v:
                continue
            out[n] = format_quantity(v, milli=(n != PODS))
        return out

    def __repr__(self) -> str:
        parts = [f"cpu {self.cpu:g}", f"memory {self.memory:g}"]
        parts.extend(f"{n} {self.scalars[n]:g}" for n in sorted(self.scalars))
        return "<" + ", ".join(parts) + ">"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resource):
            return NotImplemented
        return (
            self.cpu == other.cpu
            and self.memory == other.memory
            and {k: v for k, v in self.scalars.items() if v} == {k: v for k, v in other.scalars.items() if v}
        )

    __hash__ = None  # type: ignore[assignment]


def _le(left: Number, right: Number) -> bool:
    return left < right or abs(left - right) < MIN_RESOURCE


def _eq(left: Number, right: Number) -> bool:
    return left == right or abs(left - right) < MIN_RESOURCE


def exceeded_part(left: Resource | None, right: Resource | None) -> Resource:
    """Per-dimension max(left - right, 0) over the union of dimensions (Volcano's ExceededPart)."""
    if left is None:
        return Resource()
    if right is None:
        return left
    inc, _ = left.diff(right, Default.ZERO)
    return inc


def share(allocated: Number, deserved: Number) -> float:
    """helpers.Share: l/r, with r == 0 giving 0 when l == 0 else 1."""
    if deserved == 0:
        return 0.0 if allocated == 0 else 1.0
    return float(allocated) / float(deserved)


def sum_resources(items: Iterable[Resource]) -> Resource:
    total = Resource()
    for r in items:
        total.add(r)
    return total


def finite_quantities(r: Resource | None) -> dict[str, str]:
    """Kubernetes quantity strings; unlimited (infinite) dimensions are left out."""
    if r is None:
        return {}
    finite = Resource(
        r.cpu if math.isfinite(r.cpu) else 0,
        r.memory if math.isfinite(r.memory) else 0,
        {k: v for k, v in r.scalars.items() if math.isfinite(v)},
    )
    out = finite.to_quantities()
    if not math.isfinite(r.cpu):
        out.pop("cpu", None)
    if not math.isfinite(r.memory):
        out.pop("memory", None)
    return out


def resource_list(r: Resource) -> dict[str, str]:
    """A Resource as Volcano's util.ConvertRes2ResList writes it into a Queue's `status.allocated`.

    `cpu` and `memory` always (also when zero), then every scalar: `cpu` and the scalars as
    milli-quantities in DecimalSI, `pods` as a whole DecimalSI count, `memory` in BinarySI —
    which apimachinery prints in DecimalSI below 1024 (1000 bytes is "1k", 2000 pods "2k",
    1024 pods "1024"); names in sorted order.  A scalar whose total is zero is left out: Volcano
    writes the names its allocated tasks requested, and an explicit zero request is the only way
    one sums to zero.
    """
    out = {CPU: format_quantity(r.cpu, milli=True)}
    memory = r.memory
    out[MEMORY] = (
        format_quantity(memory * 1000, milli=True)
        if -1024 < memory < 1024
        else format_quantity(memory, milli=False)
    )
    for name in sorted(r.scalars):
        v = r.scalars[name]
        if v:
            out[name] = format_quantity(v * 1000 if name == PODS else v, milli=True)
    return dict(sorted(out.items()))  # in name order, as Go's encoding/json writes a map
