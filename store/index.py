"""The decision index: which job, pod, queue, node and cycle each decision event names (0002, 0003),
and the detail a job's history needs (0004: an explanation's reason codes, a PodGroup's phase).

`index_fields(event)` gives the index row of a decision (None for events that are not part of
a cycle); the SQLite writer inserts it in the same transaction as the event, so the index is
never behind the log, and widens the cycle's seq span in `decision_cycles` (`cycle_spans`,
`UPSERT_CYCLE`).  `backfill_index(conn)` indexes the decisions a log already held when
migration 0002 was applied.  `decision_query(...)` builds the parameterised keyset query the
API's GET /v1/decisions runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fumarole.store.codec import CodecError, decode, event_row
from fumarole.store.events import (
    DECISIONS,
    BindDecided,
    Event,
    EventBase,
    EvictDecided,
    JobExplained,
    PipelineDecided,
    PodGroupStatusChanged,
)
from fumarole.store.log import CorruptEventError

if TYPE_CHECKING:
    from fumarole.store.pg_sync import PgSyncConnection

__all__ = [
    "DECISION_TYPES",
    "INSERT_INDEX",
    "UPSERT_CYCLE",
    "IndexFields",
    "IndexReader",
    "IndexedRow",
    "backfill_index",
    "cycle_spans",
    "decision_query",
    "explained_codes",
    "explained_detail",
    "index_fields",
    "indexed_rows",
]

# (cycle, type, job, namespace, pod, queue, node, detail); the seq is added by the writer.
IndexFields = tuple[int, str, str | None, str | None, str | None, str | None, str | None, str | None]

INSERT_INDEX = (
    "INSERT INTO decision_index (seq, cycle, type, job, namespace, pod, queue, node, detail) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

# A cycle's span: the first and last seq of its decisions (migration 0003), widened per transaction.
UPSERT_CYCLE = (
    "INSERT INTO decision_cycles (cycle, first_seq, last_seq) VALUES (?, ?, ?) "
    "ON CONFLICT (cycle) DO UPDATE SET first_seq = min(first_seq, excluded.first_seq), "
    "last_seq = max(last_seq, excluded.last_seq)"
)

DECISION_TYPES: tuple[str, ...] = tuple(
    t for c in DECISIONS if isinstance(t := c.__struct_config__.tag, str) and "cycle" in c.__struct_fields__
)


def _placement(event: Any, tag: str) -> IndexFields:
    return (
        event.cycle,
        tag,
        event.job or None,
        event.namespace or None,
        event.name or None,
        event.queue or None,
        event.node or None,
        None,
    )


def explained_detail(message: str, codes: tuple[str, ...]) -> str:
    """The index detail of an explanation: '+' and its reason codes (most important first), '-' when
    the job no longer waits (no message, no reason)."""
    return "+" + ",".join(codes) if message or codes else "-"


def explained_codes(detail: str) -> tuple[str, ...] | None:
    """The reason codes of an explanation's index detail; None when the job no longer waits."""
    if detail == "-":
        return None
    return tuple(detail[1:].split(",")) if len(detail) > 1 else ()


def _explained(event: Any, tag: str) -> IndexFields:
    return (
        event.cycle,
        tag,
        f"{event.namespace}/{event.name}",
        event.namespace or None,
        None,
        event.queue or None,
        None,
        explained_detail(event.message, tuple(r.code for r in event.reasons)),
    )


def _status(event: Any, tag: str) -> IndexFields:
    return (
        event.cycle,
        tag,
        f"{event.namespace}/{event.name}",
        event.namespace or None,
        None,
        None,
        None,
        event.phase,
    )


def _cycle_only(event: Any, tag: str) -> IndexFields:
    return (event.cycle, tag, None, None, None, None, None, None)


_BY_CLASS: dict[type[EventBase], tuple[str, Any]] = {}
for _cls in DECISIONS:
    _tag = _cls.__struct_config__.tag
    if isinstance(_tag, str) and _tag in DECISION_TYPES:
        _fn = (
            _placement
            if _cls in (BindDecided, EvictDecided, PipelineDecided)
            else _explained
            if _cls is JobExplained
            else _status
            if _cls is PodGroupStatusChanged
            else _cycle_only
        )
        _BY_CLASS[_cls] = (_tag, _fn)


def index_fields(event: EventBase) -> IndexFields | None:
    """The index row of a decision event that belongs to a cycle; None for every other event.

    One dict lookup by class on the writer's hot path (every appended event goes through it)."""
    entry = _BY_CLASS.get(type(event))
    if entry is None:
        return None
    tag, fn = entry
    cycle = event.cycle  # type: ignore[attr-defined]
    if not isinstance(cycle, int) or isinstance(cycle, bool):
        return None
    fields: IndexFields = fn(event, tag)
    return fields


# One row an append writes: type tag, version, at_ms, idempotency key, encoded body, and the
# decision-index fields (None for an event that is not a decision).
IndexedRow = tuple[str, int, int | None, str | None, bytes, IndexFields | None]


def indexed_rows(events: Sequence[Event], keys: Sequence[str | None]) -> list[IndexedRow]:
    """The rows of an append (shared by the SQLite and PostgreSQL logs): an event that cannot be
    encoded fails the whole batch here, before anything is written."""
    rows: list[IndexedRow] = []
    for ev, key in zip(events, keys, strict=True):
        tag, v, data = event_row(ev)
        at_ms = getattr(ev, "at_ms", None)
        rows.append((tag, v, at_ms if isinstance(at_ms, int) else None, key, data, index_fields(ev)))
    return rows


def cycle_spans(rows: list[tuple[Any, ...]]) -> list[tuple[int, int, int]]:
    """(cycle, first seq, last seq) of the index rows `(seq, cycle, ...)` of one transaction."""
    spans: dict[int, list[int]] = {}
    for row in rows:
        seq, cycle = row[0], row[1]
        span = spans.get(cycle)
        if span is None:
            spans[cycle] = [seq, seq]
        elif seq < span[0]:
            span[0] = seq
        elif seq > span[1]:
            span[1] = seq
    return [(c, lo, hi) for c, (lo, hi) in spans.items()]


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
            if "decision_cycles" in tables:
                conn.executemany(UPSERT_CYCLE, cycle_spans(params))
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
    # a cycle's decisions lie in its seq span (migration 0003): a primary-key range, then the check
    (
        "cycle",
        "d.seq BETWEEN (SELECT first_seq FROM decision_cycles WHERE cycle = ?1c) "
        "AND (SELECT last_seq FROM decision_cycles WHERE cycle = ?1c) AND d.cycle = ?1c",
    ),
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
            n = clause.count("?1c")
            where.append(clause.replace("?1c", "?") if n else clause)
            params.extend([value] * max(n, 1))
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


def open_readonly(
    path: str, *, mmap_bytes: int = 1 << 30, busy_timeout_ms: int = 5000
) -> sqlite3.Connection | PgSyncConnection:
    """A synchronous, read-only, memory-mapped connection to a log file for hot-path readers.

    Usable from any thread (`check_same_thread=False`; callers serialise their own use), in
    autocommit mode, refusing writes (`query_only`), waiting `busy_timeout_ms` for a writer.
    A postgresql:// URL gives the same on PostgreSQL (store/pg_sync.py: `?` placeholders work).
    """
    if path.startswith(("postgresql://", "postgres://")):
        from fumarole.store.pg_sync import PgSyncConnection

        return PgSyncConnection(path)

    from fumarole.store.disk import readonly_uri

    uri = readonly_uri(path)
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute(f"PRAGMA mmap_size = {int(mmap_bytes)}")
    conn.execute("PRAGMA query_only = 1")
    return conn


class IndexReader:
    """A synchronous read-only connection for decision lookups (the API's hot path).

    An index lookup is a few hundred microseconds; running it on the caller's thread saves the
    thread round trip an aiosqlite read costs (which dominates at that size), and the memory
    map (`mmap_bytes`) saves copying pages.  Results are bounded by `limit`.
    """

    def __init__(self, path: str, *, mmap_bytes: int = 1 << 30, busy_timeout_ms: int = 5000) -> None:
        self._conn = open_readonly(path, mmap_bytes=mmap_bytes, busy_timeout_ms=busy_timeout_ms)
        self._where = "" if path.startswith(("postgresql://", "postgres://")) else path  # no credentials

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
                raise CorruptEventError(seq, str(e), self._where) from e
            out.append((int(seq), str(tag), ev, key))
        return out

    def close(self) -> None:
        self._conn.close()
