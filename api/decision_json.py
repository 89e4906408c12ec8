"""Decision rows as ready-made JSON bytes for GET /v1/decisions: encoded once, kept by seq (byte-bounded LRU).

GET /v1/decisions answers a list of `DecisionRow`s.  A decision event never changes once written,
so its row's JSON (`{"seq":…,"type":…,"event":{…}}`, byte for byte what msgspec encodes for a
`DecisionRow`) can be computed once and kept by sequence number.  A miss decodes the stored
body with the codec (typed, validated, upcast from an older schema) and encodes the row; with
msgspec that is faster than an untyped msgpack -> JSON transcode.  The page is then joined from
the row bytes, without building the page's structs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import msgspec

from api.types import DecisionRow
from store.codec import CodecError, decode
from store.log import CorruptEventError

__all__ = ["DEFAULT_CACHE_BYTES", "DecisionJsonCache", "decision_page_json", "row_json"]

DEFAULT_CACHE_BYTES = 64 << 20
"""The default bound of the cache (the rows' JSON bytes; a few hundred bytes to ~1.5 KB each)."""

_ENC = msgspec.json.Encoder()
_OVERHEAD = 100  # per cached row: the bytes object and the dict entry, roughly


def row_json(seq: int, tag: str, v: int, body: bytes) -> bytes:
    """The JSON of the DecisionRow of a stored decision (type `tag`, schema version `v`, msgpack `body`).

    Raises CorruptEventError for a body that is not a valid event of its type.
    """
    try:
        event = decode(tag, v, body)
    except CodecError as e:
        raise CorruptEventError(seq, str(e)) from e
    return _ENC.encode(DecisionRow(seq=seq, type=tag, event=event))  # type: ignore[arg-type]


def decision_page_json(rows: Sequence[bytes], next_since: int | None) -> bytes:
    """The JSON of a DecisionPage made of the given row JSONs (what msgspec encodes for it)."""
    tail = b"null" if next_since is None else b"%d" % next_since
    return b'{"items":[' + b",".join(rows) + b'],"next_since":' + tail + b"}"


class DecisionJsonCache:
    """Row JSON by seq, least recently used evicted first once the rows' bytes exceed `max_bytes`.

    `max_bytes=0` disables it (every lookup misses, nothing is kept).  Not thread-safe: the
    API uses it from the event loop only.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._rows: OrderedDict[int, bytes] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, seq: object) -> bool:
        return seq in self._rows

    def rows(self, stored: Sequence[tuple[Any, ...]]) -> list[bytes]:
        """The row JSON of each stored (seq, type, v, idem_key, body), from the cache or transcoded."""
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
        self.bytes = 0
