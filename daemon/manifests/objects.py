"""Which object each manifest is (kind, API group, namespace, name), and duplicates refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fumarole.daemon.manifests.fields import Doc, Obj, show, type_name
from fumarole.daemon.manifests.kinds import KIND_GROUPS, SUPPORTED_KINDS
from fumarole.daemon.manifests.reading import flatten


@dataclass(slots=True)
class Entry:
    """One classified object: its source document, API group, kind, name and namespace."""

    doc: Doc
    group: str
    kind: str
    name: str
    namespace: str
    obj: Obj
    record: Any = None
    """The object decoded ahead of the build (a split file's first part), else None."""


class Claims:
    """The identities seen so far: a second object (or pod uid) with the same one names the first."""

    __slots__ = ("names", "pod_uids")

    def __init__(self) -> None:
        self.names: dict[tuple[str, str, str], Doc] = {}
        self.pod_uids: dict[str, tuple[str, Doc]] = {}

    def name(self, d: Doc, path: str, kind: str, ns: str, name: str) -> None:
        key = (kind, ns, name)
        first = self.names.get(key)
        if first is not None:
            shown = f"{ns}/{name}" if ns else name
            d.fail(path, f"duplicate {kind} {shown} (first in {first.where()})")
        self.names[key] = d

    def pod_uid(self, d: Doc, uid: str, ns: str, name: str) -> None:
        first = self.pod_uids.get(uid)
        if first is not None:
            d.fail(
                "metadata.uid", f"duplicate pod uid {show(uid)} (also Pod {first[0]} in {first[1].where()})"
            )
        self.pod_uids[uid] = (f"{ns}/{name}", d)


def classify(file: str, index: int, obj: Any, claims: Claims) -> list[Entry]:
    """The entries of one loaded object (a List's items each), in order; claims their names."""
    d = Doc(file, index)
    if not isinstance(obj, dict):
        d.fail("", f"expected a mapping (an object), got {type_name(obj)}")
    kind = obj.get("kind")
    if not (isinstance(kind, str) and kind.endswith("List")):  # `flatten` gives the object itself
        return [classify_object(d, obj, claims)]
    return [classify_object(d, o, claims) for o in flatten(file, index, obj)]


def classify_object(d0: Doc, obj: Obj, claims: Claims) -> Entry:
    """One object's kind (supported ones only), namespace and name; its name is claimed."""
    d = Doc(d0.file, d0.index)
    kind = obj.get("kind")
    api = obj.get("apiVersion")
    meta = obj.get("metadata")
    if type(kind) is str and kind and type(api) is str and api and type(meta) is dict:
        # The common shape, read without the checked accessors (the same values: they return a
        # string as it is); anything else goes the checked way below.
        group = api.rsplit("/", 1)[0] if "/" in api else ""
        supported = SUPPORTED_KINDS.get((group, kind))
        name = meta.get("name")
        if supported is not None and type(name) is str and name and all(type(k) is str for k in meta):
            if not supported[1]:
                d.label = f"{kind} {name}"
                claims.name(d, "metadata.name", kind, "", name)
                return Entry(d, group, kind, name, "", obj)
            ns = meta.get("namespace")
            if ns is None or type(ns) is str:
                ns = ns or "default"
                d.label = f"{kind} {ns}/{name}"
                claims.name(d, "metadata.name", kind, ns, name)
                return Entry(d, group, kind, name, ns, obj)
    kind = d.string(kind, "kind")
    api = d.string(api, "apiVersion")
    if not kind:
        d.fail("kind", "required")
    group = api.rsplit("/", 1)[0] if "/" in api else ""
    if not api:
        group = KIND_GROUPS.get(kind, "")
    if (group, kind) not in SUPPORTED_KINDS:
        shown = f"{api} {kind}" if api else kind
        supported_kinds = ", ".join(f"{v[0]} {k[1]}" for k, v in SUPPORTED_KINDS.items())
        d.fail("kind", f"unsupported kind {show(shown)}; supported kinds: {supported_kinds}")
    namespaced = SUPPORTED_KINDS[(group, kind)][1]
    meta = d.mapping(meta, "metadata")
    name = d.string(meta.get("name"), "metadata.name")
    d.label = kind
    if not name:
        d.fail("metadata.name", "required")
    ns = (d.string(meta.get("namespace"), "metadata.namespace") or "default") if namespaced else ""
    d.label = f"{kind} {ns}/{name}" if namespaced else f"{kind} {name}"
    claims.name(d, "metadata.name", kind, ns, name)
    return Entry(d, group, kind, name, ns, obj)
