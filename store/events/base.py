"""The common base of every event: frozen, keyword-only, tagged by `type`, versioned by `v`."""

from __future__ import annotations

import msgspec


class EventBase(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of all events.

    `v` is the schema version of the event's own type (bumped when its fields change; the
    codec upcasts older versions on read).  Subclasses set `tag="family.name"`.
    """

    v: int = 1
