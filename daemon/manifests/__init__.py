"""Kubernetes/Volcano manifests -> the scheduler's model (a ClusterSnapshot); see snapshot.py."""

from daemon.manifests.snapshot import (
    BUILTIN_PRIORITY_CLASSES,
    SUPPORTED_KINDS,
    ManifestError,
    ObjectDecoder,
    build_snapshot,
    expand_job,
    load_objects,
    load_snapshot,
)

__all__ = [
    "BUILTIN_PRIORITY_CLASSES",
    "SUPPORTED_KINDS",
    "ManifestError",
    "ObjectDecoder",
    "build_snapshot",
    "expand_job",
    "load_objects",
    "load_snapshot",
]
