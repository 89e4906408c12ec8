"""Listing a collection: pages fetched ahead of their decoding, and list items decoded without
`metadata.managedFields`.

A collection is listed in pages of `PAGE_SIZE` objects (`limit` / `continue`, as client-go's
pager does: tools/pager/pager.go); each page is read whole, its `metadata` (the `continue` token
and the list's resourceVersion) decoded first, the next page asked for, and only then are its
items decoded, so the server prepares page n+1 while we decode page n.  Every page of one listing
is served from the same etcd revision, so the pages together are one consistent snapshot.  A
`continue` token that expired (410 Gone, the revision was compacted meanwhile) restarts the
listing without `limit`, as client-go's pager does (`FullListIfExpired`).

Items of the big kinds (Pods, Nodes) and of HyperNodes are decoded against a typed shape that skips
`metadata.managedFields` without building it (a third of a Pod's JSON on a real server, and the
adapter strips it before logging anyway, objects.py): the shape names every field of
ObjectMeta (k8s.io/apimachinery pkg/apis/meta/v1 types.go, in its order) and the top-level
`metadata`, `spec` and `status` of those kinds (a HyperNode has no other top-level field the
scheduler reads; `kind` and `apiVersion` are set again by objects.trimmed), and gives back the
same map a plain decoding followed by the stripping gives (the tests compare both).  A field
ObjectMeta does not have today would be dropped: the scheduler reads none.  The other kinds
decode as plain maps.

Watch frames (`{"type": ..., "object": ...}`, one a line) are decoded the same way
(`decode_watch_frame`): the frame's type first, then its object against the typed shape for
ADDED / MODIFIED / DELETED of the typed kinds, and as a plain map otherwise (an ERROR frame's
object is a Status, a BOOKMARK's carries only a resourceVersion).  A burst of binds is a burst of
MODIFIED Pods on the watch: decoding them without managedFields is most of what reading the watch
costs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

PAGE_SIZE = 2500
TYPED_KINDS = frozenset({"Pod", "Node", "HyperNode"})

Fetch = Callable[[dict[str, Any]], Awaitable[tuple[int, bytes]]]


class ListExpired(Exception):
    """A `continue` token expired (410 Gone) mid-listing."""


class ListFailed(Exception):
    """A page answered something other than 200: (status, decoded body)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class _ObjectMeta(msgspec.Struct, rename="camel", omit_defaults=True):
    """ObjectMeta less managedFields, in the API's order (see the module notes)."""

    name: Any = UNSET
    generate_name: Any = UNSET
    namespace: Any = UNSET
    self_link: Any = UNSET
    uid: Any = UNSET
    resource_version: Any = UNSET
    generation: Any = UNSET
    creation_timestamp: Any = UNSET
    deletion_timestamp: Any = UNSET
    deletion_grace_period_seconds: Any = UNSET
    labels: Any = UNSET
    annotations: Any = UNSET
    owner_references: Any = UNSET
    finalizers: Any = UNSET


_META_FIELDS = tuple(
    (name, msgspec.structs.fields(_ObjectMeta)[i].encode_name)
    for i, name in enumerate(_ObjectMeta.__struct_fields__)
)


class _Object(msgspec.Struct):
    metadata: _ObjectMeta | UnsetType = UNSET
    spec: Any = UNSET
    status: Any = UNSET


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class _Head(msgspec.Struct):
    """A page's metadata only (its items are skipped)."""

    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)


class _TypedItems(msgspec.Struct):
    items: list[_Object] | None = None


class _MapItems(msgspec.Struct):
    items: list[dict[str, Any]] | None = None


class _Frame(msgspec.Struct):
    """A watch event, its object left undecoded until its type is known."""

    type: str = ""
    object: msgspec.Raw = msgspec.Raw(b"null")


_decode_head = msgspec.json.Decoder(_Head).decode
_decode_frame = msgspec.json.Decoder(_Frame).decode
_decode_object = msgspec.json.Decoder(_Object).decode
_decode_typed = msgspec.json.Decoder(_TypedItems).decode
_decode_maps = msgspec.json.Decoder(_MapItems).decode
_decode_any = msgspec.json.Decoder().decode


def _as_map(obj: _Object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    meta = obj.metadata
    if meta is not UNSET:
        m: dict[str, Any] = {}
        for attr, key in _META_FIELDS:
            value = getattr(meta, attr)
            if value is not UNSET:
                m[key] = value
        out["metadata"] = m
    if obj.spec is not UNSET:
        out["spec"] = obj.spec
    if obj.status is not UNSET:
        out["status"] = obj.status
    return out


def decode_items(kind_name: str, raw: bytes) -> list[dict[str, Any]]:
    """The items of one list page as maps (Pods and Nodes without managedFields)."""
    if kind_name in TYPED_KINDS:
        return [_as_map(o) for o in _decode_typed(raw).items or ()]
    return list(_decode_maps(raw).items or ())


_OBJECT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})


def decode_watch_frame(kind_name: str, line: bytes) -> tuple[str, Any]:
    """(type, object) of one watch line: the object as a map, Pods and Nodes without
    managedFields (see the module notes); msgspec.DecodeError for a line that is not a frame."""
    frame = _decode_frame(line)
    if frame.type in _OBJECT_TYPES and kind_name in TYPED_KINDS:
        try:
            return frame.type, _as_map(_decode_object(frame.object))
        except msgspec.ValidationError:  # not an object of that shape (null, a list...): as it is
            pass
    return frame.type, _decode_any(frame.object)


async def list_collection(
    kind_name: str, fetch: Fetch, page_size: int = PAGE_SIZE
) -> tuple[list[dict[str, Any]], str]:
    """Every object of a collection and the list's resourceVersion (see the module notes);
    `fetch(query)` answers (status, body bytes); ListFailed for a page not answered 200."""
    try:
        return await _paged(kind_name, fetch, page_size)
    except ListExpired:
        return await _paged(kind_name, fetch, 0)


async def _paged(kind_name: str, fetch: Fetch, page_size: int) -> tuple[list[dict[str, Any]], str]:
    items: list[dict[str, Any]] = []
    query: dict[str, Any] = {"limit": page_size} if page_size else {}
    pending: asyncio.Future[tuple[int, bytes]] | None = asyncio.ensure_future(fetch(query))
    rv = ""
    try:
        while pending is not None:
            status, raw = await pending
            pending = None
            if status != 200:
                body = _body_of(raw)
                if status == 410 and "continue" in query:
                    raise ListExpired
                raise ListFailed(status, body)
            try:
                head = _decode_head(raw)
            except msgspec.DecodeError as e:
                raise ListFailed(status, {"message": f"list body: {e}"}) from None
            rv = head.metadata.resourceVersion
            if head.metadata.continue_ and page_size:
                query = {"limit": page_size, "continue": head.metadata.continue_}
                pending = asyncio.ensure_future(fetch(query))  # the server works on it meanwhile
            items += decode_items(kind_name, raw)
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
    return items, rv


def _body_of(raw: bytes) -> Any:
    try:
        return _decode_any(raw) if raw else None
    except msgspec.DecodeError:
        return {"message": raw[:500].decode(errors="replace")}
