"""Checked, typed access to one source document's fields (`Doc`); errors name the field's path.

Also the exact-quantity helpers shared by the decoders: a ResourceList of exact values to a
Resource, and quantities kept as written.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from datetime import UTC, date, datetime
from fractions import Fraction
from typing import Any, NoReturn

from fumarole.daemon.manifests.errors import ManifestError
from fumarole.daemon.scheduler.model.quantity import QuantityError, parse_quantity
from fumarole.daemon.scheduler.model.resources import Resource

Obj = dict[str, Any]
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
_NANO = 10**9


def type_name(v: Any) -> str:
    """How an error message names a value's type ("a string", "a mapping", "null" …)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    return type(v).__name__


def show(v: Any) -> str:
    """A value as an error message quotes it (strings JSON-quoted, booleans as YAML writes them)."""
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def join(path: str, key: str | int) -> str:
    """A field path one level down: `a.b`, or `a[0]` for a list index."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class Doc:
    """One source document (file, index, object label) and checked accessors raising ManifestError."""

    __slots__ = ("file", "index", "label")

    def __init__(self, file: str, index: int, label: str = "") -> None:
        self.file = file
        self.index = index
        self.label = label

    def fail(self, path: str, reason: str) -> NoReturn:
        raise ManifestError(self.file, reason, document=self.index, obj=self.label, field=path)

    def where(self) -> str:
        return f"{self.file} document {self.index + 1}"  # counted from 1, as in ManifestError

    def mapping(self, v: Any, path: str) -> Obj:
        if v is None:
            return {}
        if not isinstance(v, dict):
            self.fail(path, f"expected a mapping, got {type_name(v)}")
        for k in v:
            if not isinstance(k, str):
                self.fail(path, f"keys must be strings, got {type_name(k)} {show(k)}")
        return v

    def seq(self, v: Any, path: str) -> list[Any]:
        if v is None:
            return []
        if not isinstance(v, list):
            self.fail(path, f"expected a list, got {type_name(v)}")
        return v

    def string(self, v: Any, path: str, default: str = "") -> str:
        if v is None:
            return default
        if isinstance(v, str):
            return v
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        self.fail(path, f"expected a string, got {type_name(v)}")

    def integer(self, v: Any, path: str, default: int, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
        if v is None:
            return default
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not isinstance(v, int) or isinstance(v, bool):
            self.fail(path, f"expected an integer, got {type_name(v)} {show(v)}")
        if not lo <= v <= hi:
            self.fail(path, f"{v} is out of range [{lo}, {hi}]")
        return v

    def boolean(self, v: Any, path: str) -> bool | None:
        if v is None or isinstance(v, bool):
            return v
        self.fail(path, f"expected true or false, got {type_name(v)} {show(v)}")

    def str_map(self, v: Any, path: str) -> dict[str, str]:
        """Labels, annotations, selectors: scalar values become strings (YAML `true` -> "true")."""
        m = self.mapping(v, path)
        out: dict[str, str] = {}
        for k in sorted(m):
            val = m[k]
            if isinstance(val, str):
                out[k] = val
            elif isinstance(val, bool):
                out[k] = "true" if val else "false"
            elif isinstance(val, int | float):
                out[k] = str(val)
            elif val is None:
                out[k] = ""
            else:
                self.fail(join(path, k), f"expected a string, got {type_name(val)}")
        return out

    def quantities(self, v: Any, path: str) -> dict[str, Fraction]:
        """A ResourceList: name -> exact non-negative value."""
        m = self.mapping(v, path)
        out: dict[str, Fraction] = {}
        for k in sorted(m):
            q = m[k]
            try:
                if isinstance(q, bool) or not isinstance(q, str | int | float):
                    raise QuantityError(q, f"expected a quantity string or number, got {type_name(q)}")
                value = _parsed_quantity(type(q).__name__, q)
            except QuantityError as e:
                self.fail(join(path, k), f"bad quantity {show(q)}: {e.reason}")
            if value < 0:
                self.fail(join(path, k), f"bad quantity {show(q)}: must not be negative")
            out[k] = value
        return out

    def resource(self, v: Any, path: str) -> Resource | None:
        """Resource of a ResourceList, None when absent or empty (Go's len(list) == 0)."""
        q = self.quantities(v, path)
        return to_resource(q) if q else None

    def timestamp(self, v: Any, path: str) -> float:
        if v is None:
            return 0.0
        if isinstance(v, datetime):
            dt = v
        elif isinstance(v, date):
            dt = datetime(v.year, v.month, v.day)
        elif isinstance(v, str):
            try:
                return _iso_seconds(v)
            except ValueError:
                self.fail(path, f"bad timestamp {show(v)}: expected RFC 3339 such as 2024-01-02T03:04:05Z")
        else:
            self.fail(path, f"expected an RFC 3339 timestamp, got {type_name(v)}")
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp()


@functools.lru_cache(maxsize=4096)
def _iso_seconds(text: str) -> float:
    """Seconds of an ISO 8601 timestamp (UTC when it has no offset), remembered per text: the
    pods of one workload share a few creation times.  ValueError (never remembered) when bad."""
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def plain_quantities(v: Any) -> dict[str, Fraction] | None:
    """`Doc.quantities` of a valid ResourceList without field paths; None where it could fail.

    None (absent) is {} as there; anything `Doc.quantities` might refuse (not a plain mapping of
    string keys to strings or numbers, a bad or negative quantity) gives None, so that the caller
    goes the checked way and its error names the field.
    """
    if v is None:
        return {}
    if type(v) is not dict:
        return None
    for k in v:
        if type(k) is not str:
            return None
    out: dict[str, Fraction] = {}
    for k in sorted(v):
        q = v[k]
        kind = type(q)
        if kind is not str and kind is not int and kind is not float:
            return None
        try:
            value = _parsed_quantity(kind.__name__, q)
        except QuantityError:
            return None
        if value.numerator < 0:  # `value < 0` without Fraction's comparison (denominators are positive)
            return None
        out[k] = value
    return out


@functools.lru_cache(maxsize=4096)
def _parsed_quantity(kind: str, q: str | int | float) -> Fraction:
    """parse_quantity, remembered per (type name, value): manifests repeat the same few quantities.

    `kind` keeps 1 and 1.0 apart (equal keys otherwise); errors are raised, never remembered.
    """
    return parse_quantity(q)


def to_resource(q: Mapping[str, Fraction]) -> Resource:
    """Resource.from_resource_list over exact values (sums of parsed quantities are whole nanos).

    Remembered per list of values (a fresh copy each time: a Resource is mutable).
    """
    # Keyed by numerator and denominator: Fraction's hash is computed in Python at every call.
    key = tuple([(name, v.numerator, v.denominator) for name, v in q.items()])
    made = _RESOURCES.get(key)
    if made is None:
        made = _RESOURCES[key] = _to_resource(q)
        if len(_RESOURCES) > _RESOURCES_KEPT:
            _RESOURCES.pop(next(iter(_RESOURCES)))
    return made.clone()


_RESOURCES: dict[tuple[tuple[str, int, int], ...], Resource] = {}
_RESOURCES_KEPT = 4096


def _to_resource(q: Mapping[str, Fraction]) -> Resource:
    text: dict[str, str] = {}
    for name, value in q.items():
        nanos = value * _NANO
        n = -(-nanos.numerator // nanos.denominator)
        text[name] = f"{n // _NANO}.{n % _NANO:09d}"
    return Resource.from_resource_list(text)


def quantity_text(d: Doc, v: Any, path: str) -> dict[str, str]:
    """Validated quantities kept as the strings written (ResourceQuota hard/used)."""
    m = d.mapping(v, path)
    d.quantities(m, path)
    return {k: show(m[k]) if not isinstance(m[k], str) else m[k] for k in sorted(m)}
