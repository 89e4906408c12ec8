"""Event <-> bytes: msgpack encoding of the event vocabulary, versioned decoding with upcasters."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from fumarole.store.events import EVENT_TYPES, Event, EventBase, event_type
from fumarole.store.log import LogError

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns the field map of (type, v) into the field map of (type, v + 1); must set nothing but fields."""


def _clock_advanced_v1(fields: dict[str, Any]) -> dict[str, Any]:
    """clock.advanced v1 -> v2: v1 did not record how many facts came with the move; read 0."""
    return {**fields, "facts": 0}


def _podgroup_status_v1(fields: dict[str, Any]) -> dict[str, Any]:
    """decision.podgroup_status v1 -> v2: a condition's kind was keyed `type_`, now `type`."""
    conditions = fields.get("conditions")
    if isinstance(conditions, list):
        fields["conditions"] = [
            {("type" if k == "type_" else k): val for k, val in c.items()} if isinstance(c, dict) else c
            for c in conditions
        ]
    return fields


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("clock.advanced", 1): _clock_advanced_v1,
    ("decision.podgroup_status", 1): _podgroup_status_v1,
}
"""(type, version) -> the upcaster from that version to the next.  When a type's fields change, bump
its `v` default (the event class) and add the step here."""


class CodecError(LogError, ValueError):
    """An event cannot be encoded, or stored bytes cannot be decoded into an event."""


# What decoding damaged bytes can raise besides msgspec's DecodeError (ValidationError is one):
# a string that is not UTF-8 (UnicodeDecodeError), an integer out of range, a nesting too deep,
# an upcaster meeting a field of an unexpected shape.  All of them mean "these bytes are not an
# event" and become a CodecError, so that a damaged row is always named, never a traceback.
_DAMAGED = (
    msgspec.DecodeError,
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    OverflowError,
    RecursionError,
)


def current_version(type_: str) -> int:
    """The schema version the code writes for an event type (the default of its `v` field)."""
    cls = EVENT_TYPES.get(type_)
    if cls is None:
        raise CodecError(f"unknown event type {type_!r}")
    return _CURRENT[type_]


def _default_v(cls: type[EventBase]) -> int:
    names = cls.__struct_fields__
    defaults = cls.__struct_defaults__
    idx = names.index("v") - (len(names) - len(defaults))
    v = defaults[idx]
    assert isinstance(v, int)
    return v


_CURRENT: dict[str, int] = {tag: _default_v(cls) for tag, cls in EVENT_TYPES.items()}
_TAG_OF: dict[type[EventBase], str] = {cls: tag for tag, cls in EVENT_TYPES.items()}
_ENCODER = msgspec.msgpack.Encoder()
_DECODERS: dict[str, msgspec.msgpack.Decoder[Any]] = {
    tag: msgspec.msgpack.Decoder(cls) for tag, cls in EVENT_TYPES.items()
}
_RAW = msgspec.msgpack.Decoder(dict[str, Any])


def encode(event: Event) -> bytes:
    """The stored bytes of an event (a msgpack map that includes `type` and `v`).

    Refuses anything that is not an event of the vocabulary, and an event whose `v` is not the
    current version of its type (bytes written must always be of the current schema).
    """
    return event_row(event)[2]


def decode(
    type_: str, v: int, data: bytes, *, upcasters: Mapping[tuple[str, int], Upcaster] | None = None
) -> Event:
    """The event stored as (type, v, data), upcast to the current version of its type.

    Raises CodecError for an unknown type, a version newer than the code, a version with no
    upcaster path, bytes that are not a valid event of that type, or a body whose tag differs.
    """
    if type_ not in _CURRENT:
        raise CodecError(f"unknown event type {type_!r}")
    want = _CURRENT[type_]
    if v == want:
        try:
            ev: Event = _DECODERS[type_].decode(data)
        except _DAMAGED as e:
            raise CodecError(f"{type_} v{v}: {_why(e)}") from e
        return ev
    if v > want:
        raise CodecError(f"{type_} v{v} was written by a newer Fumarole (this code knows up to v{want})")
    table = UPCASTERS if upcasters is None else upcasters
    try:
        fields = _RAW.decode(data)
    except _DAMAGED as e:
        raise CodecError(f"{type_} v{v}: {_why(e)}") from e
    for step in range(v, want):
        up = table.get((type_, step))
        if up is None:
            raise CodecError(f"{type_} v{step}: no upcaster to v{step + 1}")
        try:
            fields = up(dict(fields))
        except _DAMAGED as e:
            raise CodecError(f"{type_} upcast from v{step}: {_why(e)}") from e
    fields["type"] = type_
    fields["v"] = want
    try:
        return msgspec.convert(fields, EVENT_TYPES[type_])  # type: ignore[return-value]
    except _DAMAGED as e:
        raise CodecError(f"{type_} upcast from v{v}: {_why(e)}") from e


def _why(e: BaseException) -> str:
    """One line: msgspec's message as is, any other error prefixed with its kind."""
    text = " ".join(str(e).split())
    return text if isinstance(e, msgspec.DecodeError) else f"{type(e).__name__}: {text}"


def event_row(event: Event) -> tuple[str, int, bytes]:
    """(type, v, bytes) of an event as the log stores it (see `encode`)."""
    tag = _TAG_OF.get(type(event))
    if tag is None:
        if isinstance(event, EventBase):
            raise CodecError(f"unknown event type {event_type(event)!r}")
        raise CodecError(f"not an event: {type(event).__name__}")
    v = _CURRENT[tag]
    if event.v != v:
        raise CodecError(f"{tag}: v={event.v} but the code writes v={v}")
    try:
        return tag, v, _ENCODER.encode(event)
    except (TypeError, ValueError, OverflowError) as e:
        raise CodecError(f"{tag}: cannot encode: {e}") from e
