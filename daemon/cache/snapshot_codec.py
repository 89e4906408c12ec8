"""The projection's state as bytes (msgpack) for `EventLog.save_snapshot("cache", seq, data)`.

The image holds the per-object manifests in their order, the folded decision overlays, the
explanations, open resyncs and the clock.  `FORMAT` is bumped when the image changes; an image of
another format is refused (`SnapshotFormatError`) and the caller folds the log from the start
instead.

The parse caches (`Projection.parse_caches`: parsed records, pod TaskInfo templates, pod job ids)
travel beside the image as a pickle, so that the first freeze after a restart does not parse every
manifest again (~10 s at 100k pods).  Pickle because they are graphs of the scheduler's model
objects (slotted classes, shared references) that only this code reads back; the blob is written
and read by the daemon in its own event log, and is bound to the code that wrote it: a
fingerprint of the parsing and model modules' source (and the Python version) must match, or the
caches are ignored and rebuilt by parsing (never an error).  `state_image` leaves them out: equal
states still give equal images.
"""

from __future__ import annotations

import copyreg
import dataclasses
import hashlib
import importlib
import io
import pickle
import pkgutil
import sys
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from fumarole.daemon.cache.projection import Projection
from fumarole.daemon.cache.state import KINDS, BindOverlay, raw_group_of, raw_uid
from fumarole.daemon.gc_pause import collector_paused
from fumarole.daemon.scheduler.model.node_usage import NODE_METRICS_PERIOD, NodeUsage
from fumarole.store.events import JobExplained, PodGroupStatusChanged, QueueFigures

__all__ = [
    "FORMAT",
    "SnapshotFormatError",
    "decode_projection",
    "encode_parts",
    "encode_projection",
    "snapshot_parts",
    "state_image",
]

FORMAT = 2  # 2: PodGroup conditions keyed `type` (decision.podgroup_status v2)


class SnapshotFormatError(ValueError):
    """Snapshot bytes that this version cannot read."""


class _Image(msgspec.Struct, frozen=True, kw_only=True):
    format: int
    scheduler_names: tuple[str, ...]
    default_queue: str
    seq: int
    now_ms: int
    last_cycle: int
    conf_hash: str
    # kind -> [(namespace, name, manifest)] in the projection's order
    objects: dict[str, list[tuple[str, str, dict[str, Any]]]]
    binds: list[tuple[str, str, int, str, str]]  # ns, name, decision seq, node, uid
    evictions: list[tuple[str, str, int, str]]  # ns, name, decision seq, uid
    pg_status: list[PodGroupStatusChanged]
    explanations: list[JobExplained]
    members: list[tuple[str, int]]
    resyncs: list[tuple[str, tuple[str, ...], list[tuple[str, str, str]]]]
    queue_figures: dict[str, QueueFigures] = {}
    # The last CycleOpened's clock (-1: none) and node usage: node -> (cpu, mem, period, time ms).
    last_cycle_now_ms: int = -1
    node_usage: list[tuple[str, float, float, str, int]] = []
    # Projection.parse_caches() pickled, and the code fingerprint it is valid for.
    caches: bytes = b""
    caches_fingerprint: str = ""


class _Head(msgspec.Struct):
    format: int = 0


@cache
def code_fingerprint() -> str:
    """sha256 over the source of the modules whose objects the parse caches hold, and Python's version."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(sys.version.encode())
    for folder in ("manifests", "scheduler/model"):
        for f in sorted((root / folder).glob("*.py")):
            h.update(f.name.encode())
            h.update(f.read_bytes())
    h.update((root / "cache" / "projection.py").read_bytes())
    return h.hexdigest()


def state_image(p: Projection) -> _Image:
    """The projection's state as one comparable value (what is saved; equal states give equal images)."""
    return _Image(
        format=FORMAT,
        scheduler_names=p.scheduler_names,
        default_queue=p.default_queue,
        seq=p.seq,
        now_ms=p.now_ms,
        last_cycle=p.last_cycle,
        conf_hash=p.conf_hash,
        objects={k: [(ns, name, m) for (ns, name), m in p.objects[k].items()] for k in KINDS},
        binds=[(ns, name, b.seq, b.node, b.uid) for (ns, name), b in p.binds.items()],
        evictions=[(ns, name, s, uid) for (ns, name), (s, uid) in p.evictions.items()],
        pg_status=list(p.pg_status.values()),
        explanations=list(p.explained.values()),
        members=sorted(p.members.items()),
        resyncs=[
            (source, kinds, sorted((kind, ns, name) for kind, (ns, name) in seen))
            for source, (kinds, seen) in sorted(p.resyncs.items())
        ],
        queue_figures=dict(p.queue_figures),
        last_cycle_now_ms=-1 if p.last_cycle_now_ms is None else p.last_cycle_now_ms,
        node_usage=[_usage_row(node, u) for node, u in sorted(p.node_usage.items())],
    )


def _usage_row(node: str, u: NodeUsage) -> tuple[str, float, float, str, int]:
    period = next(iter(u.cpu), NODE_METRICS_PERIOD)
    t = u.metrics_time if u.metrics_time is not None else 0.0
    return (node, u.cpu_avg(period), u.mem_avg(period), period, round(t * 1000))


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Image)


def _by_constructor(value: Any) -> tuple[Any, ...]:
    """Pickle reduction of a frozen slotted dataclass whose fields are all constructor arguments:
    the class called with its field values (dataclasses' own `__setstate__` looks the fields up
    again for every object it loads: ~8 µs each)."""
    cls = type(value)
    return (cls, tuple(getattr(value, name) for name in cls.__slots__))


@cache
def _dispatch_table() -> dict[type, Any]:
    """Reductions for the frozen slotted dataclasses of the model and the manifest records whose
    every field is a constructor argument (the others pickle as usual)."""
    import fumarole.daemon.manifests as manifests_pkg
    import fumarole.daemon.scheduler.model as model_pkg

    table: dict[type, Any] = dict(copyreg.dispatch_table)
    for pkg in (manifests_pkg, model_pkg):
        for info in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
            module = importlib.import_module(info.name)
            for obj in vars(module).values():
                if (
                    isinstance(obj, type)
                    and dataclasses.is_dataclass(obj)
                    and obj.__dataclass_params__.frozen  # type: ignore[attr-defined]
                    and obj.__module__ == module.__name__
                    and not hasattr(obj, "__post_init__")
                    and obj.__dict__.get("__slots__")
                    == tuple(f.name for f in dataclasses.fields(obj) if f.init)
                ):
                    table[obj] = _by_constructor
    return table


def _pickled(caches: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _dispatch_table()
    pickler.dump(caches)
    return out.getvalue()


_HEAD = msgspec.msgpack.Decoder(_Head)


SnapshotParts = tuple[_Image, dict[str, Any]]


def snapshot_parts(p: Projection) -> SnapshotParts:
    """The state image and shallow copies of the parse caches, as of now (cheap).

    `encode_parts` may then run in another thread while `p` folds on: folding replaces the
    manifests and cache entries it changes and never mutates them, so what was taken stays as it
    was at `p.seq`.
    """
    caches = {k: dict(v) if isinstance(v, dict) else v for k, v in p.parse_caches().items()}
    return state_image(p), caches


def encode_parts(parts: SnapshotParts) -> bytes:
    """The bytes of `snapshot_parts` (the image with its pickled parse caches)."""
    image, caches = parts
    with collector_paused():  # pickling allocates its memo as it goes; nothing here is garbage
        blob = _pickled(caches)
        img = msgspec.structs.replace(image, caches=blob, caches_fingerprint=code_fingerprint())
        return _ENCODER.encode(img)


def encode_projection(p: Projection) -> bytes:
    """The projection's state image and its parse caches (see the module notes) as bytes."""
    return encode_parts(snapshot_parts(p))


def decode_projection(data: bytes) -> Projection:
    """A projection from `encode_projection` bytes (raises SnapshotFormatError on bad bytes)."""
    with collector_paused():
        return _decode(data)


# Damaged bytes can raise more than msgspec's DecodeError (a string that is not UTF-8, a value of
# the wrong shape met while rebuilding): any of them means "not a readable snapshot".
_DAMAGED = (msgspec.DecodeError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError)


def _decode(data: bytes) -> Projection:
    try:
        head = _HEAD.decode(data)
    except _DAMAGED as e:
        raise SnapshotFormatError(f"cache snapshot: cannot decode: {e}") from e
    if head.format != FORMAT:
        raise SnapshotFormatError(f"cache snapshot: format {head.format!r}, this version reads {FORMAT}")
    try:
        return _rebuild(_DECODER.decode(data))
    except _DAMAGED as e:
        raise SnapshotFormatError(f"cache snapshot: cannot decode: {e}") from e


def _rebuild(img: _Image) -> Projection:
    p = Projection(scheduler_names=img.scheduler_names, default_queue=img.default_queue)
    p.seq = img.seq
    p.now_ms = img.now_ms
    p.last_cycle = img.last_cycle
    p.conf_hash = img.conf_hash
    for kind in KINDS:
        objs = p.objects[kind]
        for ns, name, m in img.objects.get(kind, []):
            objs[(ns, name)] = m
    for (ns, name), m in p.objects["Pod"].items():
        p.pod_ident[(ns, name)] = (raw_uid(ns, name, m), raw_group_of(ns, name, m, p.scheduler_names))
    p.binds = {(ns, name): BindOverlay(s, node, uid) for ns, name, s, node, uid in img.binds}
    p.evictions = {(ns, name): (s, uid) for ns, name, s, uid in img.evictions}
    p.pg_status = {(e.namespace, e.name): e for e in img.pg_status}
    p.explained = {f"{e.namespace}/{e.name}": e for e in img.explanations}
    p.members = dict(img.members)
    p.queue_figures = dict(img.queue_figures)
    p.last_cycle_now_ms = None if img.last_cycle_now_ms < 0 else img.last_cycle_now_ms
    p.node_usage = {
        node: NodeUsage(cpu={period: cpu}, memory={period: mem}, metrics_time=ms / 1000.0)
        for node, cpu, mem, period, ms in img.node_usage
    }
    p.resyncs = {
        source: (tuple(kinds), {(kind, (ns, name)) for kind, ns, name in seen})
        for source, kinds, seen in img.resyncs
    }
    if img.caches and img.caches_fingerprint == code_fingerprint():
        _adopt(p, img.caches)
    return p


def _adopt(p: Projection, blob: bytes) -> None:
    """Adopt pickled parse caches; any failure leaves them empty (the first freeze parses)."""
    try:
        caches = pickle.loads(blob)  # the daemon's own, code-bound (module notes)
        p.adopt_parse_caches(caches)
    except Exception:  # a cache: never fatal
        p.adopt_parse_caches(Projection().parse_caches())
