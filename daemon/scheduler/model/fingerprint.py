"""Debug guard: a deep fingerprint of a snapshot, to prove a session left it untouched.

A session opens on a copy-on-write clone of its snapshot (`Session.__init__`): jobs and
nodes share the snapshot's tasks, index and sums until the session first uses them, and the
daemon's next snapshot shares unchanged objects with this one.  So a session must never write to
a snapshot object.  `fingerprint` walks everything reachable from a snapshot (every slot and
attribute, container and element) and records, per path, each object's identity and each leaf's
value; two fingerprints differ iff some object was replaced or changed in place.  The run loop
compares the fingerprints taken before and after each session when the guard is on
(`framework/run.py` `guard_snapshots`; the scheduler tests switch it on).  Slow: tests only.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot

# The cache a snapshot carries on purpose between sessions (model/node_derived.py).
_SKIPPED_FIELDS = frozenset({"derived"})
_LEAVES = (type(None), bool, int, float, str, bytes, complex)


class SnapshotChangedError(AssertionError):
    """A session wrote to (or replaced an object of) the snapshot it was given."""


def fingerprint(snapshot: ClusterSnapshot) -> dict[str, object]:
    """Path -> identity or value of everything reachable from `snapshot` (see the module doc)."""
    out: dict[str, object] = {}
    first_path: dict[int, str] = {}
    stack: list[tuple[str, object]] = [("snapshot", snapshot)]
    while stack:
        path, obj = stack.pop()
        if isinstance(obj, (Enum, *_LEAVES)):
            out[path] = (type(obj).__name__, obj)
            continue
        if isinstance(obj, type):
            out[path] = ("class", obj.__module__, obj.__qualname__)
            continue
        seen = first_path.get(id(obj))
        if seen is not None:
            out[path] = ("ref", seen)
            continue
        first_path[id(obj)] = path
        out[path] = (type(obj).__name__, id(obj))
        if callable(obj):
            continue
        children: list[tuple[str, object]] = []
        if isinstance(obj, dict):
            children = [(f"{path}[{k!r}]", v) for k, v in obj.items()]
            out[path + ".keys"] = tuple(repr(k) for k in obj)
        elif isinstance(obj, list | tuple):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
            out[path + ".len"] = len(obj)
        elif isinstance(obj, set | frozenset):
            out[path + ".items"] = tuple(sorted(repr(v) for v in obj))
        else:
            children = [(f"{path}.{name}", value) for name, value in _fields(obj)]
        stack.extend(reversed(children))
    return out


def _fields(obj: object) -> list[tuple[str, Any]]:
    """Every set slot and instance attribute, read without `__getattr__` (which would
    materialise a copy-on-write clone)."""
    fields: list[tuple[str, Any]] = []
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in [slots] if isinstance(slots, str) else slots:
            if name in ("__weakref__", "__dict__"):
                continue
            try:
                fields.append((name, cls.__dict__[name].__get__(obj, cls)))
            except (AttributeError, KeyError):
                continue
    fields += sorted(getattr(obj, "__dict__", {}).items())
    tobytes = getattr(obj, "tobytes", None)
    if callable(tobytes):  # numpy arrays
        fields.append(("bytes", tobytes()))
    return [(n, v) for n, v in fields if n not in _SKIPPED_FIELDS]


def first_difference(before: dict[str, object], after: dict[str, object]) -> str | None:
    """The first path (in walk order) whose identity or value differs, with both sides."""
    for path, value in before.items():
        if after.get(path, "<absent>") != value:
            return f"{path}: {value!r} -> {after.get(path, '<absent>')!r}"
    for path, value in after.items():
        if path not in before:
            return f"{path}: <absent> -> {value!r}"
    return None
