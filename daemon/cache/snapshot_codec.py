"""The projection's state as bytes (msgpack) for `EventLog.save_snapshot("cache", seq, data)`.

The image holds the per-object manifests in their order, the folded decision overlays, the
explanations, open resyncs and the clock; parse caches are not saved (they are rebuilt on the
first freeze).  `FORMAT` is bumped when the image changes; an image of another format is
refused (`SnapshotFormatError`) and the caller folds the log from the start instead.
"""

from __future__ import annotations

from typing import Any

import msgspec

from daemon.cache.projection import Projection
from daemon.cache.state import KINDS, BindOverlay, raw_group_of, raw_uid
from store.events import JobExplained, PodGroupStatusChanged, QueueFigures

__all__ = ["FORMAT", "SnapshotFormatError", "decode_projection", "encode_projection", "state_image"]

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
    )


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Image)


def encode_projection(p: Projection) -> bytes:
    return _ENCODER.encode(state_image(p))


def decode_projection(data: bytes) -> Projection:
    """A projection from `encode_projection` bytes (raises SnapshotFormatError on bad bytes)."""
    try:
        head = msgspec.msgpack.decode(data, type=dict[str, Any])
    except msgspec.DecodeError as e:
        raise SnapshotFormatError(f"cache snapshot: cannot decode: {e}") from e
    if head.get("format") != FORMAT:
        raise SnapshotFormatError(
            f"cache snapshot: format {head.get('format')!r}, this version reads {FORMAT}"
        )
    try:
        img = _DECODER.decode(data)
    except msgspec.DecodeError as e:
        raise SnapshotFormatError(f"cache snapshot: cannot decode: {e}") from e
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
    p.resyncs = {
        source: (tuple(kinds), {(kind, (ns, name)) for kind, ns, name in seen})
        for source, kinds, seen in img.resyncs
    }
    return p
