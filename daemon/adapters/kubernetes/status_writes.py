"""Provisional status bodies (replaced by the fidelity branch)."""

from __future__ import annotations

from typing import Any

from store.events import PodGroupStatusChanged, QueueFiguresRecorded


def podgroup_status_body(e: PodGroupStatusChanged, now: str) -> dict[str, Any]:
    conditions = [
        {
            "type": c.type,
            "status": c.status,
            "transitionID": c.transition_id,
            "lastTransitionTime": now,
            "reason": c.reason,
            "message": c.message,
        }
        for c in e.conditions
    ]
    status: dict[str, Any] = {"phase": e.phase, "conditions": conditions}
    for k in ("running", "succeeded", "failed"):
        v = getattr(e, k)
        status[k] = v if v else None
    return status


def _norm(s: dict[str, Any]) -> tuple[Any, ...]:
    conds = tuple(
        sorted(
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
            for c in s.get("conditions") or ()
        )
    )
    return (s.get("phase"), conds, *(s.get(k) or 0 for k in ("running", "succeeded", "failed")))


def podgroup_status_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return _norm(a) == _norm(b)


def queue_status_bodies(e: QueueFiguresRecorded) -> dict[str, dict[str, Any]]:
    return {name: {"allocated": dict(f.allocated)} for name, f in e.queues.items()}


def queue_status_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return dict(a.get("allocated") or {}) == dict(b.get("allocated") or {})
