"""PriorityClass objects, and the built-in classes that exist unless given."""

from __future__ import annotations

from fumarole.daemon.manifests.objects import Entry
from fumarole.daemon.scheduler.model.queue import PriorityClassInfo

BUILTIN_PRIORITY_CLASSES = (
    PriorityClassInfo("system-cluster-critical", 2000000000, False, "PreemptLowerPriority"),
    PriorityClassInfo("system-node-critical", 2000001000, False, "PreemptLowerPriority"),
)


def decode_priority_class(e: Entry) -> PriorityClassInfo:
    """A PriorityClass: value (required), globalDefault, preemptionPolicy."""
    d, o = e.doc, e.obj
    if "value" not in o:
        d.fail("value", "required")
    pc = PriorityClassInfo(
        e.name,
        d.integer(o.get("value"), "value", 0),
        bool(d.boolean(o.get("globalDefault"), "globalDefault")),
        d.string(o.get("preemptionPolicy"), "preemptionPolicy") or "PreemptLowerPriority",
    )
    return pc
