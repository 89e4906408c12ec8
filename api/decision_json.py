"""Decision rows as ready-made JSON bytes for GET /v1/decisions: encoded once, kept by seq (byte-bounded LRU).

GET /v1/decisions answers a list of `DecisionRow`s.  A decision event never changes once written,
so its row's JSON (`{"seq":…,"type":…,"event":{…}}`, byte for byte what msgspec encodes for a
`DecisionRow`) can be computed once and kept by sequence number.  Rows are decoded with
the codec (typed, validated, upcast from an older schema); with msgspec that is faster than an
untyped msgpack -> JSON transcode.  A query asked for the first time is encoded as one page
(`page_json`: cheapest when nothing is cached); asked a second time, its rows are encoded one
by one and kept; from the third time on only the page's seqs are read, the cached rows taken,
the missing ones read and encoded, and the page joined from the row bytes (`decision_page_json`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any

import msgspec

from fumarole.api.types import DecisionPage, DecisionRow
from fumarole.store.codec import CodecError, decode
from fumarole.store.events import Event
from fumarole.store.log import CorruptEventError

__all__ = ["DEFAULT_CACHE_BYTES", "DecisionJsonCache", "decision_page_json", "page_json", "row_json"]

DEFAULT_CACHE_BYTES = 64 << 20
"""The default bound of the cache (the rows' JSON bytes; a few hundred bytes to ~1.5 KB each)."""

_ENC = msgspec.json.Encoder()
_OVERHEAD = 100  # per cached row: the bytes object and the dict entry, roughly


def _event(seq: int, tag: str, v: int, body: bytes) -> Event:
    try:
        return decode(tag, v, body)
    except CodecError as e:
        raise CorruptEventError(seq, str(e)) from e


def row_json(seq: int, tag: str, v: int, body: bytes) -> bytes:
    """The JSON of the DecisionRow of a stored decision (type `tag`, schema version `v`, msgpack `body`).

    Raises CorruptEventError for a body that is not a valid event of its type.
    """
    return _ENC.encode(DecisionRow(seq=seq, type=tag, event=_event(seq, tag, v, body)))  # type: ignore[arg-type]


def page_json(stored: Sequence[tuple[Any, ...]], limit: int) -> bytes:
    """The DecisionPage of stored rows (seq, type, v, idem_key, body) encoded in one go (no row kept).

    `next_since` follows the API's keyset rule: the last seq + 1 when the page is full."""
    items = [
        DecisionRow(seq=seq, type=tag, event=_event(seq, tag, v, body))  # type: ignore[arg-type]
        for seq, tag, v, _key, body in stored
    ]
    nxt = int(stored[-1][0]) + 1 if stored and len(stored) >= limit else None
    return _ENC.encode(DecisionPage(items=items, next_since=nxt))


def decision_page_json(rows: Sequence[bytes], next_since: int | None) -> bytes:
    """The JSON of a DecisionPage made of the given row JSONs (what msgspec encodes for it)."""
    tail = b"null" if next_since is None else b"%d" % next_since
    return b'{"items":[' + b",".join(rows) + b'],"next_since":' + tail + b"}"


class DecisionJsonCache:
    """Row JSON by seq, least recently used evicted first once the rows' bytes exceed `max_bytes`.

    A doorkeeper keeps one-off lookups out: `seen(query)` remembers the last `doorkeeper`
    distinct queries, and the caller admits rows (`rows(..., admit=True)`) only for a query
    asked before (and reads just the seqs, then the cache, for one asked twice before), so a
    stream of never-repeated lookups (random jobs over a long history) does not churn the
    cache, while a dashboard polling the same jobs is served from it.
    `max_bytes=0` disables it.  Not thread-safe: the API uses it from the event loop only.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, *, doorkeeper: int = 4096) -> None:
        if max_bytes < 0 or doorkeeper < 0:
            raise ValueError("max_bytes and doorkeeper must be >= 0")
        self.max_bytes = max_bytes
        self.doorkeeper = doorkeeper
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._rows: OrderedDict[int, bytes] = OrderedDict()
        self._seen: OrderedDict[Hashable, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, seq: object) -> bool:
        return seq in self._rows

    def seen(self, query: Hashable) -> int:
        """Record `query`; how many times (0, 1, or 2 for more) it was asked before, among the last
        `doorkeeper` distinct queries (always 0 when the cache is disabled)."""
        if not self.max_bytes:
            return 0
        known = self._seen
        before = known.get(query)
        if before is None:
            known[query] = 0
            if len(known) > self.doorkeeper:
                known.popitem(last=False)
            return 0
        known[query] = min(before + 1, 2)
        known.move_to_end(query)
        return before + 1 if before < 2 else 2

    def lookup(self, seqs: Sequence[int]) -> list[bytes | None]:
        """The cached row JSON of each seq (None where not cached)."""
        cached = self._rows
        out: list[bytes | None] = []
        for seq in seqs:
            data = cached.get(seq)
            if data is not None:
                cached.move_to_end(seq)
                self.hits += 1
            out.append(data)
        return out

    def rows(self, stored: Sequence[tuple[Any, ...]], *, admit: bool = True) -> list[bytes]:
        """The row JSON of each stored (seq, type, v, idem_key, body), from the cache or encoded (and
        then kept when `admit`)."""
        cached = self._rows
        out: list[bytes] = []
        for seq, tag, v, _key, body in stored:
            data = cached.get(seq)
            if data is not None:
                cached.move_to_end(seq)
                self.hits += 1
            else:
                data = row_json(seq, tag, v, body)
                self.misses += 1
                if admit:
                    self._put(seq, data)
            out.append(data)
        return out

    def _put(self, seq: int, data: bytes) -> None:
        size = len(data) + _OVERHEAD
        if size > self.max_bytes:
            return
        self._rows[seq] = data
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, old = self._rows.popitem(last=False)
            self.bytes -= len(old) + _OVERHEAD

    def clear(self) -> None:
        self._rows.clear()
        self._seen.clear()
        self.bytes = 0
