"""What of a pod is logged: everything the scheduler reads, without the fields that carry secrets.

A pod's manifest goes into the event log (`pod.upserted`) and out of the REST API
(`GET /v1/events`); whoever can read either must not learn the pod's secrets.  Kept: everything
Volcano's scheduler and the Kubernetes scheduling plugins it embeds read from a pod, which is
also everything Fumarole reads: metadata (names, uid, labels, annotations, owner references,
creation and deletion times), the spec's scheduler name, node name and selector, affinity,
tolerations, topology spread constraints, priority and preemption policy, scheduling gates,
overhead, volumes (the volume predicates read them; they name Secrets and claims, never hold
their values) and, of each container (`containers`, `initContainers`, `ephemeralContainers`), its
name, image, resources, ports, restart policy (a sidecar init container) and every other field
not listed below; and the status.

Dropped, from each container: `env` values (`value`, `valueFrom`: each variable keeps its name
only), `args` and `command` (command lines often carry passwords and tokens), the probes
(`livenessProbe`, `readinessProbe`, `startupProbe`) and `lifecycle` hooks (exec commands, HTTP
headers such as `Authorization`).  `envFrom` is kept: it names ConfigMaps and Secrets, never
their contents.  From the metadata: the annotation `kubectl.kubernetes.io/last-applied-configuration`
(the whole manifest as applied, env values included).  Volcano's scheduler reads none of these
(pkg/scheduler: no `Env`, `Command`, `Args`, probe or lifecycle reads), so decisions are the same.

`redact_pod(manifest)` is pure: it returns the manifest itself when there is nothing to drop (the
common case costs a few lookups) and otherwise a copy that shares every part it does not change.
A field of an unexpected shape is left as it is, except `env`, dropped whole when it is not a list
of maps (nothing reads it).  `redact_event(event)` applies it to a `pod.upserted` event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from fumarole.store.events import PodUpserted

__all__ = [
    "CONTAINER_LISTS",
    "DROPPED_ANNOTATIONS",
    "DROPPED_CONTAINER_FIELDS",
    "redact_event",
    "redact_pod",
]

CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
DROPPED_CONTAINER_FIELDS = ("args", "command", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle")
DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)

_DROP_FIELDS = frozenset(DROPPED_CONTAINER_FIELDS)
_DROP_ANNOTATIONS = frozenset(DROPPED_ANNOTATIONS)

E = TypeVar("E")


def redact_pod(manifest: dict[str, Any]) -> dict[str, Any]:
    """The pod manifest as logged (see the module notes); `manifest` itself is never changed."""
    out: dict[str, Any] | None = None
    spec = manifest.get("spec")
    if spec.__class__ is dict:
        new_spec = _spec(spec)
        if new_spec is not spec:
            out = dict(manifest)
            out["spec"] = new_spec
    meta = manifest.get("metadata")
    if meta.__class__ is dict:
        ann = meta.get("annotations")
        if ann.__class__ is dict and not _DROP_ANNOTATIONS.isdisjoint(ann):
            if out is None:
                out = dict(manifest)
            kept = {k: v for k, v in ann.items() if k not in _DROP_ANNOTATIONS}
            out["metadata"] = {**meta, "annotations": kept}
    return manifest if out is None else out


def redact_event(event: E) -> E:
    """`event` with its pod manifest redacted when it is a `pod.upserted` (else `event` itself)."""
    if isinstance(event, PodUpserted):
        m = redact_pod(event.manifest)
        if m is not event.manifest:
            return msgspec.structs.replace(event, manifest=m)
    return event


def _spec(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] | None = None
    for key in CONTAINER_LISTS:
        cs = spec.get(key)
        if cs is None or cs.__class__ is not list:
            continue
        for c in cs:
            if c.__class__ is dict and (c.get("env") is not None or not _DROP_FIELDS.isdisjoint(c)):
                break
        else:
            continue  # nothing to drop in these containers
        new = [_container(c) if isinstance(c, Mapping) else c for c in cs]
        if any(a is not b for a, b in zip(new, cs, strict=True)):
            if out is None:
                out = dict(spec)
            out[key] = new
    return spec if out is None else out


def _container(c: Mapping[str, Any]) -> Mapping[str, Any]:
    env = c.get("env")
    env_plain = env is None or (
        isinstance(env, list) and all(isinstance(v, Mapping) and v.keys() <= {"name"} for v in env)
    )
    if env_plain and _DROP_FIELDS.isdisjoint(c):
        return c
    out = {k: v for k, v in c.items() if k not in _DROP_FIELDS}
    if not env_plain:
        assert env is not None
        if isinstance(env, list) and all(isinstance(v, Mapping) for v in env):
            out["env"] = [{"name": v["name"]} if "name" in v else {} for v in env]
        else:
            del out["env"]
    return out
