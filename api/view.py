"""The small read interface the API uses to reach the daemon (or a log file opened read-only).

`api` never imports the daemon's runtime: the daemon hands `build_app` an object with this
shape (daemon/runtime/api_view.py: LiveView), and `fumarole serve` a read-only one
(ReadOnlyView).  Everything about cluster state comes back as the API's own response types;
the log is read directly (keyset pages, the decision index).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from fumarole.api.types import HyperNodeList, JobDetail, JobRow, NodeRow, QueueHistory, QueueRow
from fumarole.store.events import Event
from fumarole.store.log import EventLog, StoredEvent


class DecisionLog(EventLog, Protocol):
    """An EventLog with the decision index (store/index.py; SqliteEventLog)."""

    async def read_decisions(
        self, *, since: int = 1, limit: int = 100, types: tuple[str, ...] = (), **filters: str | int | None
    ) -> list[StoredEvent]: ...


class DaemonView(Protocol):
    @property
    def event_log(self) -> DecisionLog:
        """The log (read through it; writes go through `ingest`)."""
        ...

    def is_ready(self) -> bool:
        """True once the cache has caught up with the log."""
        ...

    def folded_seq(self) -> int:
        """The last log sequence folded into the projection."""
        ...

    def config_warnings(self) -> list[str]:
        """What the scheduler configuration in force draws a warning for (an unknown plugin name,
        an unsupported flag: skipped, as Volcano skips them); empty for a read-only view."""
        ...

    def last_cycle(self) -> int:
        """The number of the newest cycle folded into the projection (0 before the first)."""
        ...

    @property
    def writable(self) -> bool:
        """False for a read-only view (`fumarole serve`): ingest is refused."""
        ...

    async def ingest(self, events: Sequence[Event], idem_keys: Sequence[str | None]) -> list[int]:
        """Append observed events through the daemon's single writer; returns their sequences."""
        ...

    def jobs(self, *, queue: str | None = None, phase: str | None = None) -> list[JobRow]:
        """Every job (PodGroup) the projection knows, by namespace/name, optionally filtered."""
        ...

    def job(self, namespace: str, name: str) -> JobDetail | None:
        """One job with its explanation, None when unknown."""
        ...

    def queues(self) -> list[QueueRow]:
        """Every queue, by name."""
        ...

    def nodes(self) -> list[NodeRow]:
        """Every node, in the projection's order."""
        ...

    def hypernodes(self) -> HyperNodeList:
        """Every HyperNode with the nodes it holds, resolved as a session resolves them."""
        ...

    def queue_history(self, *, from_cycle: int | None, to_cycle: int | None, points: int) -> QueueHistory:
        """Every queue's allocated, deserved, share and waiting jobs over cycles, downsampled
        (daemon/runtime/queue_history.py)."""
        ...

    def decisions(
        self, *, since: int = 1, limit: int = 100, types: tuple[str, ...] = (), **filters: str | int | None
    ) -> list[StoredEvent]:
        """Decision events through the decision index (store/index.py), keyset paged by seq."""
        ...

    def decision_page(
        self, *, since: int = 1, limit: int = 100, types: tuple[str, ...] = (), **filters: str | int | None
    ) -> bytes:
        """The same page as `decisions`, as the JSON of a DecisionPage (`next_since`: the last seq + 1
        when the page is full), byte for byte what msgspec encodes (api/decision_json.py)."""
        ...

    def metrics_text(self) -> tuple[bytes, str]:
        """The Prometheus exposition (body, content type)."""
        ...
