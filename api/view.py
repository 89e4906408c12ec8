"""The small read interface the API uses to reach the daemon (or a log file opened read-only).

`api` never imports the daemon's runtime: the daemon hands `build_app` an object with this
shape (daemon/runtime/api_view.py: LiveView), and `fumarole serve` a read-only one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from store.events import Event
from store.log import EventLog


class DaemonView(Protocol):
    @property
    def event_log(self) -> EventLog:
        """The log (read through it; writes go through `ingest`)."""
        ...

    @property
    def projection(self) -> Any:
        """The live projection (daemon.cache), read-only for the API."""
        ...

    def is_ready(self) -> bool:
        """True once the cache has caught up with the log."""
        ...

    def folded_seq(self) -> int:
        """The last log sequence folded into the projection."""
        ...

    @property
    def writable(self) -> bool:
        """False for a read-only view (`fumarole serve`): ingest is refused."""
        ...

    async def ingest(self, events: Sequence[Event], idem_keys: Sequence[str | None]) -> list[int]:
        """Append observed events through the daemon's single writer; returns their sequences."""
        ...
