"""A PodGroup upsert whose status has no conditions keeps the conditions the scheduler wrote."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.cache import Projection
from fumarole.store.events import PodGroupConditionRecord, PodGroupStatusChanged, PodGroupUpserted

COND = PodGroupConditionRecord(type="Scheduled", status="True", reason="ready", transition_id="session-1")


def _pg(status: dict[str, Any] | None) -> PodGroupUpserted:
    manifest: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {"minMember": 1},
    }
    if status is not None:
        manifest["status"] = status
    return PodGroupUpserted(namespace="ns", name="pg", manifest=manifest)


def _status(p: Projection) -> tuple[str, list[str], int]:
    job = p.freeze().jobs["ns/pg"]
    return job.status.phase, [c.type for c in job.status.conditions], job.status.succeeded


def test_source_without_conditions_keeps_the_schedulers_conditions() -> None:
    p = Projection()
    p.fold(1, _pg({"phase": "Pending"}))
    p.fold(
        2,
        PodGroupStatusChanged(
            cycle=1, namespace="ns", name="pg", phase="Running", running=1, conditions=(COND,)
        ),
    )
    assert _status(p) == ("Running", ["Scheduled"], 0)
    # The simulator marks the group Completed without conditions: phase and counts change, conditions stay.
    p.fold(3, _pg({"phase": "Completed", "succeeded": 1}))
    assert _status(p) == ("Completed", ["Scheduled"], 1)
    # A relisting of the same object changes nothing.
    p.fold(4, _pg({"phase": "Completed", "succeeded": 1}))
    assert _status(p) == ("Completed", ["Scheduled"], 1)
    # A source that reports conditions (the API server's copy) wins.
    p.fold(5, _pg({"phase": "Completed", "succeeded": 1, "conditions": []}))
    assert _status(p) == ("Completed", [], 1)
