"""Simulator inputs: the cluster file and the workload file (manifests with submit times and durations).

A workload is ordinary manifests (any file `fumarole.daemon.manifests.load_objects` reads) of three
kinds: batch.volcano.sh Job, scheduling.volcano.sh PodGroup and v1 Pod.  Two annotations
drive the simulation:

* `fumarole.io/submit-at` on a Job, PodGroup or Pod: when it is created, as a duration from
  the start of the simulation ("0s", "90s", "2m30s", "1500ms"; a bare number is seconds).
  Default 0s.  A Pod naming a workload PodGroup (`scheduling.k8s.io/group-name`) and carrying
  no submit-at of its own is created together with its PodGroup.
* `fumarole.io/duration`: how long a pod runs once bound, after which it Succeeds.  Looked
  up on the pod (for a Job: its task template's metadata), then on its Job or PodGroup.
  A pod without one is an error.

The cluster file holds Node, Queue, PriorityClass, Namespace and ResourceQuota objects.
Errors are `fumarole.daemon.manifests.ManifestError`s naming file, document, object and field.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fumarole.daemon.manifests import ManifestError, build_snapshot, expand_job
from fumarole.daemon.manifests.redaction import redact_pod

__all__ = [
    "CLUSTER_KINDS",
    "DURATION_KEY",
    "INCARNATION_KEY",
    "SUBMISSION_KEY",
    "SUBMIT_AT_KEY",
    "WORKLOAD_KINDS",
    "Source",
    "Submission",
    "format_duration",
    "iso_time",
    "load_workload",
    "parse_duration",
    "validate_cluster",
]

Obj = dict[str, Any]
Source = tuple[str, int, Mapping[str, Any]]
"""(file, document index, object) as daemon.manifests.load_objects yields them."""

SUBMIT_AT_KEY = "fumarole.io/submit-at"
DURATION_KEY = "fumarole.io/duration"
SUBMISSION_KEY = "fumarole.io/submission"
"""Set by the simulator on every object it creates: the index of the submission (for resume)."""
INCARNATION_KEY = "fumarole.io/incarnation"
"""Set by the simulator on a Volcano Job pod recreated after an eviction: 1, 2, ..."""
GROUP_NAME_KEY = "scheduling.k8s.io/group-name"

CLUSTER_KINDS = (
    "HyperNode",
    "Namespace",
    "Node",
    "Numatopology",
    "PodDisruptionBudget",
    "PriorityClass",
    "Queue",
    "ResourceQuota",
)
WORKLOAD_KINDS = ("Job", "PodGroup", "Pod")

_DURATION_RE = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ms|s|m|h)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_duration(value: Any) -> int:
    """Milliseconds of a duration: "90s", "1m30s", "1.5h", "250ms", or a number of seconds.

    Raises ValueError with a message saying what is accepted.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 90s or 2m30s, got {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"must not be negative, got {value!r}")
        return round(value * 1000)
    if not isinstance(value, str):
        raise ValueError(f"expected a duration such as 90s or 2m30s, got {type(value).__name__}")
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        return parse_duration(number)
    if not text or _DURATION_RE.sub("", text) != "":
        raise ValueError(f"bad duration {value!r}: expected e.g. 90s, 2m30s, 1500ms or 1h")
    total = 0.0
    for m in re.finditer(r"([0-9.]+)(ms|s|m|h)", text):
        total += float(m.group(1)) * _UNIT_MS[m.group(2)]
    return round(total)


def format_duration(ms: int) -> str:
    """The shortest exact text parse_duration reads back: "90s", "1500ms"."""
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def iso_time(at_ms: int) -> str:
    """The RFC 3339 timestamp of a virtual time (virtual time 0 is the Unix epoch)."""
    t = _EPOCH + timedelta(milliseconds=at_ms)
    frac = f".{at_ms % 1000:03d}" if at_ms % 1000 else ""
    return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"


@dataclass(frozen=True, slots=True)
class Submission:
    """Objects created together at `at_ms`: a PodGroup (if any) first, then its pods."""

    index: int
    at_ms: int
    label: str
    objects: tuple[Obj, ...]
    source: tuple[str, int]


def _fail(src: Source, label: str, field: str, reason: str) -> ManifestError:
    return ManifestError(src[0], reason, document=src[1], obj=label, field=field)


def _kind_label(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    kind = obj.get("kind")
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name")
    ns = meta.get("namespace") or "default"
    kind_s = kind if isinstance(kind, str) else ""
    name_s = name if isinstance(name, str) else ""
    ns_s = ns if isinstance(ns, str) else "default"
    return kind_s, ns_s, name_s, f"{kind_s} {ns_s}/{name_s}" if kind_s else ""


def validate_cluster(objects: Sequence[Source]) -> list[Source]:
    """The cluster objects, checked to be of cluster kinds and well formed (build_snapshot's checks)."""
    out: list[Source] = []
    for src in objects:
        kind, _, name, _ = _kind_label(src[2])
        if kind not in CLUSTER_KINDS:
            raise _fail(
                src,
                f"{kind} {name}" if kind else "",
                "kind",
                f"{kind or 'an object without kind'} does not belong in the cluster file "
                f"(expected one of {', '.join(CLUSTER_KINDS)}); put jobs and pods in the workload",
            )
        out.append(src)
    build_snapshot(out)
    return out


def _annotation(src: Source, label: str, meta: Mapping[str, Any], path: str, key: str) -> Any:
    ann = meta.get("annotations")
    if ann is None:
        return None
    if not isinstance(ann, Mapping):
        raise _fail(src, label, f"{path}.annotations", "expected a mapping")
    return ann.get(key)


def _duration_of(src: Source, label: str, meta: Mapping[str, Any], path: str, key: str) -> int | None:
    raw = _annotation(src, label, meta, path, key)
    if raw is None:
        return None
    try:
        return parse_duration(raw)
    except ValueError as e:
        raise _fail(src, label, f"{path}.annotations.{key}", str(e)) from None


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _stamp(obj: Obj, at_ms: int, index: int, duration_ms: int | None = None) -> Obj:
    """A copy ready to create: no status (pods Pending), creationTimestamp, submission annotation.

    Only what it changes is copied (the top level and `metadata`); the rest is shared with `obj`.
    A submission's objects are templates: the simulator copies each one whole as it creates the
    object (`Simulator._submit`), so nothing downstream holds them.  (A deep copy here cost
    ~1 s of a 2,000-node workload's start-up.)
    """
    out = dict(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = dict(meta)
    meta = _meta(out)
    meta.setdefault("namespace", "default")
    meta["creationTimestamp"] = iso_time(at_ms)
    ann = meta.get("annotations")
    ann = dict(ann) if isinstance(ann, Mapping) else {}
    ann[SUBMISSION_KEY] = str(index)
    if duration_ms is not None:
        ann[DURATION_KEY] = format_duration(duration_ms)
    meta["annotations"] = dict(sorted(ann.items()))
    out.pop("status", None)
    if out.get("kind") == "Pod":
        meta.setdefault("uid", f"{meta['namespace']}-{meta.get('name')}")
        out["status"] = {"phase": "Pending"}
        return redact_pod(out)  # no secrets in the log (daemon/manifests/redaction.py)
    return out


def load_workload(
    cluster: Sequence[Source], workload: Sequence[Source], *, scheduler_names: Sequence[str] = ("volcano",)
) -> list[Submission]:
    """The workload's submissions in creation order (submit time, then position in the workload)."""
    pcs = [s for s in cluster if s[2].get("kind") == "PriorityClass"]
    entries: list[tuple[Source, str, str, str, Obj, int | None]] = []
    group_subs: dict[str, int] = {}
    for src in workload:
        kind, ns, name, label = _kind_label(src[2])
        if kind not in WORKLOAD_KINDS:
            raise _fail(
                src,
                label,
                "kind",
                f"{kind or 'an object without kind'} does not belong in the workload "
                f"(expected one of {', '.join(WORKLOAD_KINDS)}); put it in the cluster file",
            )
        meta = src[2].get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        at_raw = _annotation(src, label, meta, "metadata", SUBMIT_AT_KEY)
        at_ms: int | None = None
        if at_raw is not None:
            try:
                at_ms = parse_duration(at_raw)
            except ValueError as e:
                raise _fail(src, label, f"metadata.annotations.{SUBMIT_AT_KEY}", str(e)) from None
        obj = dict(src[2])
        entries.append((src, kind, ns, name, obj, at_ms))
        if kind == "PodGroup":
            group_subs[f"{ns}/{name}"] = len(entries) - 1

    # Every object well formed, names and uids unique: the snapshot builder's own checks,
    # run on the workload as written (so errors point at the user's file and field).
    build_snapshot([*cluster, *workload])

    # Pods joining a workload PodGroup's submission; everything else is its own submission.
    members: dict[int, list[int]] = {}
    heads: list[int] = []
    for i, (src, kind, ns, _name, obj, at_ms) in enumerate(entries):
        if kind == "Pod":
            spec = obj.get("spec")
            if isinstance(spec, Mapping) and spec.get("nodeName"):
                raise _fail(
                    src,
                    f"Pod {ns}/{entries[i][3]}",
                    "spec.nodeName",
                    "workload pods must not be bound already",
                )
            meta = obj.get("metadata")
            ann = meta.get("annotations") if isinstance(meta, Mapping) else None
            group = ann.get(GROUP_NAME_KEY) if isinstance(ann, Mapping) else None
            gi = group_subs.get(f"{ns}/{group}") if isinstance(group, str) else None
            if at_ms is None and gi is not None:
                members.setdefault(gi, []).append(i)
                continue
        heads.append(i)

    subs: list[Submission] = []
    for i in heads:
        src, kind, ns, name, obj, at_opt = entries[i]
        at_ms = at_opt or 0
        label = f"{kind} {ns}/{name}"
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        objects: list[Obj] = []
        if kind == "Job":
            job_default = _duration_of(src, label, meta, "metadata", DURATION_KEY)
            job = copy.deepcopy(obj)
            _meta(job)["creationTimestamp"] = iso_time(at_ms)
            job.pop("status", None)
            expanded = expand_job(src[0], src[1], job, priority_classes=pcs, scheduler_names=scheduler_names)
            task_paths = _task_duration_paths(job)
            for o in expanded:
                if o["kind"] != "Pod":
                    objects.append(_stamp(o, at_ms, len(subs)))
                    continue
                task = o["metadata"]["annotations"]["volcano.sh/task-spec"]
                path = task_paths.get(task, "spec.tasks")
                d = _duration_of(src, label, o["metadata"], path, DURATION_KEY)
                if d is None:
                    d = job_default
                if d is None:
                    raise _fail(
                        src,
                        label,
                        f"{path}.annotations.{DURATION_KEY}",
                        f"no pod duration: set {DURATION_KEY} on the task template or on the Job",
                    )
                objects.append(_stamp(o, at_ms, len(subs), d))
        elif kind == "PodGroup":
            group_default = _duration_of(src, label, meta, "metadata", DURATION_KEY)
            objects.append(_stamp(obj, at_ms, len(subs)))
            for j in members.get(i, []):
                psrc, _, pns, pname, pobj, _ = entries[j]
                plabel = f"Pod {pns}/{pname}"
                pmeta = pobj.get("metadata")
                pmeta = pmeta if isinstance(pmeta, Mapping) else {}
                d = _duration_of(psrc, plabel, pmeta, "metadata", DURATION_KEY)
                if d is None:
                    d = group_default
                if d is None:
                    raise _fail(
                        psrc,
                        plabel,
                        f"metadata.annotations.{DURATION_KEY}",
                        f"no pod duration: set {DURATION_KEY} on the pod or on PodGroup {ns}/{name}",
                    )
                objects.append(_stamp(pobj, at_ms, len(subs), d))
        else:
            d = _duration_of(src, label, meta, "metadata", DURATION_KEY)
            if d is None:
                raise _fail(
                    src, label, f"metadata.annotations.{DURATION_KEY}", f"no pod duration: set {DURATION_KEY}"
                )
            objects.append(_stamp(obj, at_ms, len(subs), d))
        subs.append(Submission(len(subs), at_ms, label, tuple(objects), (src[0], src[1])))

    subs.sort(key=lambda s: (s.at_ms, s.index))
    return subs


def _task_duration_paths(job: Obj) -> dict[str, str]:
    """Task name -> the path of its template metadata (for error messages)."""
    out: dict[str, str] = {}
    tasks = (job.get("spec") or {}).get("tasks") or []
    for i, t in enumerate(tasks):
        if isinstance(t, Mapping):
            name = t.get("name") or f"default{i}"
            out[str(name)] = f"spec.tasks[{i}].template.metadata"
    return out
