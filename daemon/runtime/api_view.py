"""LiveView: the running daemon seen through api.view.DaemonView (log, projection, writer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from store.events import Event
from store.log import EventLog

if TYPE_CHECKING:
    from daemon.runtime.service import Service
    from daemon.runtime.writer import Writer


class LiveView:
    def __init__(self, service: Service, event_log: EventLog, projection: Any, writer: Writer) -> None:
        self._service = service
        self._log = event_log
        self._projection = projection
        self._writer = writer

    @property
    def event_log(self) -> EventLog:
        return self._log

    @property
    def projection(self) -> Any:
        return self._projection

    def is_ready(self) -> bool:
        return self._service.ready

    def folded_seq(self) -> int:
        return self._writer.folded_seq

    @property
    def writable(self) -> bool:
        return True

    async def ingest(self, events: Sequence[Event], idem_keys: Sequence[str | None]) -> list[int]:
        return await self._writer.submit(events, idem_keys=idem_keys)
