"""The fake API server's model: its resources (from Volcano's CRDs and the built-in kinds), Status
answers, JSON merge and strategic merge patches, and the store with its global resourceVersion and
watch history.  See fake_apiserver.py.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CRDS = Path(__file__).resolve().parents[3] / "shared" / "k8s" / "crds"
if not CRDS.is_dir():  # the worktree layout: <root>/../shared
    CRDS = Path(__file__).resolve().parents[2].parent / "shared" / "k8s" / "crds"
PAYLOADS = Path(__file__).resolve().parent / "payloads"
SERVER_VERSION = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.2-fake",
    "gitCommit": "fake",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.27.3",
    "compiler": "gc",
    "platform": "linux/amd64",
}
ALL = "*"


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "get", "list", "patch", "update", "watch")
    custom: bool = False
    short: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def gr(self) -> str:
        """group/resource as RBAC and Status details name it ("pods", "podgroups.scheduling.volcano.sh")."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def crd_resources(hypernodes: bool = True, numa: bool = True) -> list[Resource]:
    """Volcano's PodGroup and Queue CRDs, and (unless `hypernodes` is False: a cluster without
    Volcano's network-topology CRD) the HyperNode CRD, topology.volcano.sh/v1alpha1, and the
    Numatopology one (nodeinfo.volcano.sh) unless `numa` is False."""
    out = []
    names = ["scheduling.volcano.sh_podgroups.json", "scheduling.volcano.sh_queues.json"]
    if hypernodes:
        names.append("topology.volcano.sh_hypernodes.json")
    if numa:
        names.append("nodeinfo.volcano.sh_numatopologies.json")
    for name in names:
        crd = json.loads((CRDS / name).read_text())
        spec = crd["spec"]
        for v in spec["versions"]:
            if not v.get("served"):
                continue
            subs = tuple(sorted((v.get("subresources") or {}).keys()))
            out.append(
                Resource(
                    spec["group"],
                    v["name"],
                    spec["names"]["plural"],
                    spec["names"]["kind"],
                    spec["scope"] == "Namespaced",
                    subs,
                    custom=True,
                    short=tuple(spec["names"].get("shortNames", ())),
                )
            )
    return out


BUILTIN = [
    Resource("", "v1", "namespaces", "Namespace", False, ("status",), short=("ns",)),
    Resource("", "v1", "nodes", "Node", False, ("status",), short=("no",)),
    Resource("", "v1", "pods", "Pod", True, ("binding", "eviction", "status"), short=("po",)),
    Resource("", "v1", "events", "Event", True, short=("ev",)),
    Resource("", "v1", "resourcequotas", "ResourceQuota", True, ("status",), short=("quota",)),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True, ("token",), short=("sa",)),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short=("pc",)),
    Resource(
        "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("status",), short=("pdb",)
    ),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        verbs=("create",),
    ),
]


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A metav1.Status as the API server writes it (kind/apiVersion first, `details` when known)."""
    out: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
    }
    if code >= 400:
        out["message"] = message
        out["reason"] = reason
    if details is not None:
        out["details"] = details
    out["code"] = code
    return out


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.body = status(code, reason, message, details)
        self.code = code


def details_of(res: Resource, name: str, sub: str = "") -> dict[str, Any]:
    out = {"name": name} | ({"group": res.group} if res.group else {})
    return out | {"kind": f"{res.plural}/{sub}" if sub else res.plural}


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{res.gr} "{name}" not found', details_of(res, name))


def conflict(res: Resource, name: str, why: str, sub: str = "") -> ApiError:
    what = f"{res.gr}/{sub}" if sub else res.gr
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {what} "{name}": {why}',
        details_of(res, name, sub),
    )


# ---------------------------------------------------------------------------------------- merging
_MERGE_KEYS = {("status", "conditions"): "type", ("spec", "containers"): "name"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def strategic_merge_patch(target: Any, patch: Any, path: tuple[str, ...] = ()) -> Any:
    """Strategic merge patch for the lists the adapter patches (conditions by `type`)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        key = _MERGE_KEYS.get((*path[-1:], k))
        if v is None:
            out.pop(k, None)
        elif key and isinstance(v, list):
            merged = [dict(x) for x in out.get(k) or []]
            for item in v:
                if not isinstance(item, dict) or key not in item:
                    raise ApiError(422, "Invalid", f"{'.'.join((*path, k))}: merge key {key!r} missing")
                for i, cur in enumerate(merged):
                    if cur.get(key) == item[key]:
                        merged[i] = strategic_merge_patch(cur, item, (*path, k))
                        break
                else:
                    merged.append(copy.deepcopy(item))
            out[k] = merged
        else:
            out[k] = strategic_merge_patch(out.get(k), v, (*path, k))
    return out


# ------------------------------------------------------------------------------------- the store
@dataclass(slots=True)
class WatchEvent:
    rv: int
    res: Resource
    namespace: str
    type: str
    obj: dict[str, Any]


@dataclass(slots=True)
class Watcher:
    res: Resource
    namespace: str | None
    queue: asyncio.Queue[WatchEvent | None] = field(default_factory=asyncio.Queue)


class Store:
    def __init__(self, resources: Iterable[Resource]) -> None:
        self.resources = list(resources)
        self.objects: dict[Resource, dict[tuple[str, str], dict[str, Any]]] = {r: {} for r in self.resources}
        self.rv = 1
        self.floor = 0  # watch resourceVersions below this are expired (410)
        self.history: list[WatchEvent] = []
        self.watchers: list[Watcher] = []

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def emit(self, res: Resource, ns: str, type_: str, obj: dict[str, Any]) -> None:
        ev = WatchEvent(int(obj["metadata"]["resourceVersion"]), res, ns, type_, copy.deepcopy(obj))
        self.history.append(ev)
        for w in self.watchers:
            if w.res == res and (w.namespace is None or w.namespace == ns):
                w.queue.put_nowait(ev)


def status_meta(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    meta = copy.deepcopy(old["metadata"])
    meta["resourceVersion"] = new.get("metadata", {}).get("resourceVersion", meta["resourceVersion"])
    return meta


def same_object(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def strip(o: dict[str, Any]) -> dict[str, Any]:
        o = copy.deepcopy(o)
        o["metadata"].pop("managedFields", None)
        o["metadata"].pop("resourceVersion", None)
        return o

    return strip(a) == strip(b)


def uid_mismatch(uid: str, obj: dict[str, Any]) -> str:
    return f"Precondition failed: UID in precondition: {uid}, UID in object meta: {obj['metadata']['uid']}"


def go_bool(text: str) -> bool:
    """Query booleans as Go's strconv.ParseBool reads them (what the API server uses)."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("", "0", "f", "F", "FALSE", "false", "False"):
        return False
    raise ApiError(400, "BadRequest", f"invalid boolean value: {text!r}")


async def as_coro(fn: Any, *args: Any) -> Any:
    return fn(*args)
