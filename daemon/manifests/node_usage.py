"""Node usage written on Node manifests, for `fumarole schedule` and the simulator.

Volcano reads node load from a metrics source; a manifest directory has none, so a Node may
carry it as annotations (docs/plugins.md, plugin `usage`):

* `usage.fumarole.io/cpu`, `usage.fumarole.io/memory`: average utilisation percentages (a
  number >= 0, as Volcano's "10m" averages), read by `fumarole schedule`; both or neither.
  `usage.fumarole.io/metrics-time` (RFC 3339), optional: when they were sampled (without it,
  at the session's now, so they are fresh).
* `usage.fumarole.io/script` (simulator cluster files): a timeline of samples,
  "0s cpu=20 memory=30; 2m cpu=90 memory=85": at each offset from the start of the
  simulation the simulator observes the node's usage (a NodeUsageObserved event sampled then).
  Offsets are the simulator's durations and must not decrease.

Errors are ManifestErrors naming the file, document, object and annotation.
"""

from __future__ import annotations

import math
import re
from typing import Any

from fumarole.daemon.manifests.fields import Doc
from fumarole.daemon.manifests.objects import Entry
from fumarole.daemon.scheduler.model.node_usage import NODE_METRICS_PERIOD, NodeUsage

__all__ = [
    "CPU_KEY",
    "MEMORY_KEY",
    "SCRIPT_KEY",
    "TIME_KEY",
    "UsageSample",
    "node_usage_of",
    "source_usage_script",
    "usage_script",
]

CPU_KEY = "usage.fumarole.io/cpu"
MEMORY_KEY = "usage.fumarole.io/memory"
TIME_KEY = "usage.fumarole.io/metrics-time"
SCRIPT_KEY = "usage.fumarole.io/script"
_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_DURATION_RE = re.compile(rf"{_NUMBER}|(?:{_NUMBER}(?:ms|s|m|h))+")
_PART_RE = re.compile(rf"({_NUMBER})(ms|s|m|h)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}

UsageSample = tuple[int, float, float]
"""(offset ms, cpu %, memory %) of a usage script."""


def _annotations(e: Entry) -> dict[str, str]:
    meta = e.doc.mapping(e.obj.get("metadata"), "metadata")
    return e.doc.str_map(meta.get("annotations"), "metadata.annotations")


def _percent(e: Entry, text: str, path: str) -> float:
    try:
        value = float(text)
    except ValueError:
        e.doc.fail(path, f"expected a percentage (a number >= 0), got {text!r}")
    if not math.isfinite(value) or value < 0:
        e.doc.fail(path, f"expected a percentage (a number >= 0), got {text!r}")
    return value


def node_usage_of(e: Entry) -> NodeUsage | None:
    """The usage annotations of a Node entry, or None when it has none."""
    ann = _annotations(e)
    has_cpu, has_mem = CPU_KEY in ann, MEMORY_KEY in ann
    if not has_cpu and not has_mem:
        if TIME_KEY in ann:
            e.doc.fail(f"metadata.annotations[{TIME_KEY}]", f"needs {CPU_KEY} and {MEMORY_KEY}")
        return None
    if has_cpu != has_mem:
        missing = MEMORY_KEY if has_cpu else CPU_KEY
        e.doc.fail(f"metadata.annotations[{missing}]", "required with the other usage annotation")
    cpu = _percent(e, ann[CPU_KEY], f"metadata.annotations[{CPU_KEY}]")
    mem = _percent(e, ann[MEMORY_KEY], f"metadata.annotations[{MEMORY_KEY}]")
    when: float | None = None
    if TIME_KEY in ann:
        when = e.doc.timestamp(ann[TIME_KEY], f"metadata.annotations[{TIME_KEY}]")
    return NodeUsage(cpu={NODE_METRICS_PERIOD: cpu}, memory={NODE_METRICS_PERIOD: mem}, metrics_time=when)


def _offset_ms(e: Entry, text: str, path: str) -> int:
    if _DURATION_RE.fullmatch(text) is None:
        e.doc.fail(path, f"bad offset {text!r}: expected a duration such as 0s, 90s, 2m30s, 1500ms")
    if _PART_RE.search(text) is None:
        return round(float(text) * 1000)
    return round(sum(float(n) * _UNIT_MS[u] for n, u in _PART_RE.findall(text)))


def usage_script(e: Entry) -> list[UsageSample]:
    """The `usage.fumarole.io/script` timeline of a Node entry ([] without one)."""
    text = _annotations(e).get(SCRIPT_KEY)
    if text is None:
        return []
    path = f"metadata.annotations[{SCRIPT_KEY}]"
    out: list[UsageSample] = []
    for i, part in enumerate(p.strip() for p in text.split(";")):
        if not part:
            continue
        where = f"{path} entry {i + 1}"
        words = part.split()
        at = _offset_ms(e, words[0], where)
        values: dict[str, float] = {}
        for w in words[1:]:
            key, eq, value = w.partition("=")
            if not eq or key not in ("cpu", "memory"):
                e.doc.fail(where, f"expected cpu=N memory=N after the offset, got {w!r}")
            values[key] = _percent(e, value, f"{where} {key}")
        if set(values) != {"cpu", "memory"}:
            e.doc.fail(where, "needs both cpu=N and memory=N")
        if out and at < out[-1][0]:
            e.doc.fail(where, f"offset {words[0]} is before the entry before it")
        out.append((at, values["cpu"], values["memory"]))
    return out


def source_usage_script(file: str, index: int, obj: Any) -> list[UsageSample]:
    """`usage_script` of a Node read from `file` (document `index`); [] for other objects."""
    if not isinstance(obj, dict) or obj.get("kind") != "Node":
        return []
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    name = name if isinstance(name, str) else ""
    return usage_script(Entry(Doc(file, index, f"Node {name}"), "", "Node", name, "", obj))
