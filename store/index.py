"""The decision index: which job, pod, queue and node each decision event names (migration 0002).

`index_fields(event)` gives the index row of a decision (None for events that are not part of
a cycle); the SQLite writer inserts it in the same transaction as the event, so the index is
never behind the log.  `backfill_index(conn)` indexes the decisions a log already held when
migration 0002 was applied.  `decision_query(...)` builds the parameterised keyset query the
API's GET /v1/decisions runs.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from store.codec import CodecError, decode
from store.events import (
    DECISIONS,
    BindDecided,
    Event,
    EventBase,
    EvictDecided,
    JobExplained,
    PipelineDecided,
    PodGroupStatusChanged,
    event_type,
)
from store.log import CorruptEventError

__all__ = [
    "DECISION_TYPES",
    "INSERT_INDEX",
    "IndexFields",
    "IndexReader",
    "backfill_index",
    "decision_query",
    "index_fields",
]

# (cycle, type, job, namespace, pod, queue, node); the seq is added by the writer.
IndexFields = tuple[int, str, str | None, str | None, str | None, str | None, str | None]

INSERT_INDEX = (
    "INSERT INTO decision_index (seq, cycle, type, job, namespace, pod, queue, node) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)

DECISION_TYPES: tuple[str, ...] = tuple(
    t for c in DECISIONS if isinstance(t := c.__struct_config__.tag, str) and "cycle" in c.__struct_fields__
)


def _opt(s: str) -> str | None:
    return s or None


def index_fields(event: EventBase) -> IndexFields | None:
    """The index row of a decision event that belongs to a cycle; None for every other event."""
    cycle = getattr(event, "cycle", None)
    if not isinstance(cycle, int) or isinstance(cycle, bool):
        return None
    tag = event_type(event)
    if tag not in DECISION_TYPES:
        return None
    if isinstance(event, BindDecided | EvictDecided | PipelineDecided):
        return (
            cycle,
            tag,
            _opt(event.job),
            _opt(event.namespace),
            _opt(event.name),
            _opt(event.queue),
            _opt(event.node),
        )
    if isinstance(event, JobExplained):
        return (
            cycle,
            tag,
            f"{event.namespace}/{event.name}",
            _opt(event.namespace),
            None,
            _opt(event.queue),
            None,
        )
    if isinstance(event, PodGroupStatusChanged):
        return (cycle, tag, f"{event.namespace}/{event.name}", _opt(event.namespace), None, None, None)
    return (cycle, tag, None, None, None, None, None)


def backfill_index(conn: sqlite3.Connection, *, batch: int = 20000) -> int:
    """Index the decisions written before migration 0002 (once; one transaction); returns rows added.

    Does nothing when the log has no decision index or it is already backfilled.  Raises
    CodecError for a decision row that cannot be decoded.
    """
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    if "decision_index_state" not in tables:
        return 0
    row = conn.execute("SELECT backfilled FROM decision_index_state WHERE id = 1").fetchone()
    if row is not None and row[0]:
        return 0
    added = 0
    marks = ",".join("?" * len(DECISION_TYPES))
    conn.execute("BEGIN IMMEDIATE")
    try:
        last = 0
        while True:
            rows = conn.execute(
                f"SELECT seq, type, v, body FROM events WHERE type IN ({marks}) AND seq > ? "
                "AND seq NOT IN (SELECT seq FROM decision_index) ORDER BY seq LIMIT ?",
                [*DECISION_TYPES, last, batch],
            ).fetchall()
            if not rows:
                break
            params: list[tuple[Any, ...]] = []
            for seq, tag, v, body in rows:
                try:
                    ev = decode(tag, v, body)
                except CodecError as e:
                    raise CodecError(f"decision index backfill: row seq={seq}: {e}") from e
                fields = index_fields(ev)
                if fields is not None:
                    params.append((seq, *fields))
            conn.executemany(INSERT_INDEX, params)
            added += len(params)
            last = int(rows[-1][0])
        conn.execute(
            "INSERT INTO decision_index_state (id, backfilled) VALUES (1, 1) "
            "ON CONFLICT (id) DO UPDATE SET backfilled = 1"
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return added


_FILTERS: tuple[tuple[str, str], ...] = (
    ("job", "d.job = ?"),
    ("namespace", "d.namespace = ?"),
    ("pod", "d.pod = ?"),
    ("queue", "d.queue = ?"),
    ("node", "d.node = ?"),
    ("cycle", "d.cycle = ?"),
)


def decision_query(
    *,
    since: int = 1,
    limit: int = 100,
    types: tuple[str, ...] = (),
    **filters: str | int | None,
) -> tuple[str, list[Any]]:
    """The keyset page of decisions (seq >= since, ascending) matching every given filter.

    Filters: job ("<ns>/<podgroup>"), namespace, pod (the pod's name; pair it with namespace),
    queue, node, cycle; `types` restricts the decision types.  Values are bound parameters.
    """
    unknown = sorted(set(filters) - {k for k, _ in _FILTERS})
    if unknown:
        raise ValueError(f"decision_query: unknown filter {unknown[0]!r}")
    where = ["d.seq >= ?"]
    params: list[Any] = [since]
    for key, clause in _FILTERS:
        value = filters.get(key)
        if value is not None:
            where.append(clause)
            params.append(value)
    if types:
        where.append(f"d.type IN ({','.join('?' * len(types))})")
        params.extend(types)
    sql = (
        "SELECT e.seq, e.type, e.v, e.idem_key, e.body FROM decision_index d "
        "JOIN events e ON e.seq = d.seq "
        f"WHERE {' AND '.join(where)} ORDER BY d.seq LIMIT ?"
    )
    params.append(limit)
    return sql, params


class IndexReader:
    """A synchronous read-only connection for decision lookups (the API's hot path).

    An index lookup is a few hundred microseconds; running it on the caller's thread saves the
    thread round trip an aiosqlite read costs (which dominates at that size), and the memory
    map (`mmap_bytes`) saves copying pages.  Results are bounded by `limit`.
    """

    def __init__(self, path: str, *, mmap_bytes: int = 1 << 30, busy_timeout_ms: int = 5000) -> None:
        from pathlib import Path

        uri = f"{Path(path).resolve().as_uri()}?mode=ro"
        self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        self._conn.execute(f"PRAGMA mmap_size = {int(mmap_bytes)}")
        self._conn.execute("PRAGMA query_only = 1")

    def decisions(
        self, *, since: int = 1, limit: int = 100, types: tuple[str, ...] = (), **filters: str | int | None
    ) -> list[tuple[int, str, Event, str | None]]:
        """(seq, type, event, idem_key) of the matching decisions (see `decision_query`)."""
        sql, params = decision_query(since=since, limit=limit, types=types, **filters)
        out: list[tuple[int, str, Event, str | None]] = []
        for seq, tag, v, key, body in self._conn.execute(sql, params).fetchall():
            try:
                ev = decode(tag, v, body)
            except CodecError as e:
                raise CorruptEventError(seq, str(e)) from e
            out.append((int(seq), str(tag), ev, key))
        return out

    def close(self) -> None:
        self._conn.close()
