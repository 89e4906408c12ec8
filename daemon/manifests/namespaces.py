"""Namespace-scoped policy objects: Namespace (labels), ResourceQuota, PodDisruptionBudget."""

from __future__ import annotations

from fumarole.daemon.manifests.fields import quantity_text
from fumarole.daemon.manifests.objects import Entry
from fumarole.daemon.scheduler.model.queue import NamespaceInfo, PodDisruptionBudgetInfo, ResourceQuotaInfo


def decode_namespace(e: Entry) -> NamespaceInfo:
    """A Namespace: its name and labels (what namespaceSelectors read)."""
    return NamespaceInfo(
        e.name,
        e.doc.str_map(e.doc.mapping(e.obj.get("metadata"), "metadata").get("labels"), "metadata.labels"),
    )


def decode_resource_quota(e: Entry) -> ResourceQuotaInfo:
    """A ResourceQuota: hard (status.hard, else spec.hard) and used, kept as the quantities written."""
    d, o = e.doc, e.obj
    spec = d.mapping(o.get("spec"), "spec")
    status = d.mapping(o.get("status"), "status")
    spec_hard = quantity_text(d, spec.get("hard"), "spec.hard")
    hard = quantity_text(d, status.get("hard"), "status.hard") if "hard" in status else spec_hard
    return ResourceQuotaInfo(e.name, e.namespace, hard, quantity_text(d, status.get("used"), "status.used"))


def decode_pdb(e: Entry) -> PodDisruptionBudgetInfo:
    """policy/v1 PodDisruptionBudget: spec.selector (raw), status.disruptionsAllowed and disruptedPods."""
    d, o = e.doc, e.obj
    spec = d.mapping(o.get("spec"), "spec")
    status = d.mapping(o.get("status"), "status")
    selector = spec.get("selector")
    return PodDisruptionBudgetInfo(
        name=e.name,
        namespace=e.namespace,
        selector=None if selector is None else d.mapping(selector, "spec.selector"),
        disruptions_allowed=d.integer(status.get("disruptionsAllowed"), "status.disruptionsAllowed", 0),
        disrupted_pods=frozenset(d.mapping(status.get("disruptedPods"), "status.disruptedPods")),
    )
