"""status_writes.py: the Queue and PodGroup status bodies and Volcano's comparisons of them."""

from __future__ import annotations

import json

from fumarole.daemon.adapters.kubernetes.status_writes import (
    podgroup_status_body,
    podgroup_status_equal,
    queue_status_bodies,
    queue_status_equal,
)
from fumarole.daemon.scheduler.model.resources import Resource, resource_list
from fumarole.store.events import (
    PodGroupConditionRecord,
    PodGroupStatusChanged,
    QueueFigures,
    QueueFiguresRecorded,
)

NOW = "2026-01-02T03:04:05Z"
EARLIER = "2025-12-31T23:59:59Z"


def test_resource_list_is_convert_res2_res_list() -> None:
    assert resource_list(Resource()) == {"cpu": "0", "memory": "0"}  # cpu and memory always
    got = resource_list(Resource(12_000, 1000, {"pods": 2000, "nvidia.com/gpu": 2000, "example.com/x": 0}))
    # memory below 1024 prints in DecimalSI ("1k"); pods is a DecimalSI count; a zero sum is left out
    assert got == {"cpu": "12", "memory": "1k", "nvidia.com/gpu": "2", "pods": "2k"}
    assert list(got) == sorted(got)  # Go's encoding/json writes a map's keys sorted
    assert resource_list(Resource(1500, 1536 * 2**20, {"pods": 1024})) == {
        "cpu": "1500m",
        "memory": "1536Mi",
        "pods": "1024",
    }


def test_queue_bodies_are_the_written_figure_for_every_queue() -> None:
    e = QueueFiguresRecorded(
        cycle=3,
        queues={
            "qa": QueueFigures(
                allocated={"cpu": "3"}, status_allocated={"cpu": "1", "memory": "1Gi", "pods": "1"}
            ),
            "root": QueueFigures(status_allocated={"cpu": "1", "memory": "1Gi", "pods": "1"}),
            "default": QueueFigures(status_allocated={"cpu": "0", "memory": "0"}),
            "old": QueueFigures(allocated={"cpu": "2"}),  # recorded before the figure existed
        },
    )
    assert queue_status_bodies(e) == {
        "default": {"allocated": {"cpu": "0", "memory": "0"}},
        "qa": {"allocated": {"cpu": "1", "memory": "1Gi", "pods": "1"}},
        "root": {"allocated": {"cpu": "1", "memory": "1Gi", "pods": "1"}},
    }


def test_queue_status_equal_is_semantic_deep_equal_of_allocated() -> None:
    ours = {"allocated": {"cpu": "1", "memory": "1Gi"}}
    assert queue_status_equal(ours, {"allocated": {"cpu": "1000m", "memory": "1073741824"}, "state": "Open"})
    assert not queue_status_equal(ours, {"allocated": {"cpu": "2", "memory": "1Gi"}})
    assert not queue_status_equal(ours, {"allocated": {"cpu": "1", "memory": "1Gi", "pods": "0"}})  # names
    assert not queue_status_equal({"allocated": {"cpu": "0", "memory": "0"}}, {"state": "Open"})
    assert queue_status_equal({"allocated": {}}, {"allocated": None})  # nil and empty lists are equal
    assert not queue_status_equal(ours, {"allocated": {"cpu": "one", "memory": "1Gi"}})


def _changed(*conditions: PodGroupConditionRecord, **kw: object) -> PodGroupStatusChanged:
    fields: dict[str, object] = {"cycle": 7, "namespace": "ns", "name": "pg", "phase": "Running"}
    fields.update(kw)
    return PodGroupStatusChanged(conditions=conditions, **fields)  # type: ignore[arg-type]


SCHEDULED = PodGroupConditionRecord(
    type="Scheduled",
    status="True",
    reason="tasks in gang are ready to be scheduled",
    transition_id="session-7",
)
OLD_UNSCHEDULABLE = PodGroupConditionRecord(
    type="Unschedulable",
    status="True",
    reason="NotEnoughResources",
    message="2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable",
    transition_id="session-3",
)


def test_podgroup_body_leaves_out_what_go_omits() -> None:
    body = podgroup_status_body(_changed(SCHEDULED, running=2), NOW)
    assert body == {
        "phase": "Running",
        "conditions": [
            {
                "type": "Scheduled",
                "status": "True",
                "transitionID": "session-7",
                "lastTransitionTime": NOW,
                "reason": "tasks in gang are ready to be scheduled",
            }  # no "message": it is empty (omitempty)
        ],
        "running": 2,  # succeeded and failed are zero: omitted
    }
    assert list(body["conditions"][0]) == ["type", "status", "transitionID", "lastTransitionTime", "reason"]
    assert podgroup_status_body(_changed(phase=""), NOW) == {}


def test_a_carried_condition_keeps_its_time_and_a_condition_set_again_gets_now() -> None:
    current = podgroup_status_body(_changed(OLD_UNSCHEDULABLE, phase="Inqueue"), EARLIER)
    body = podgroup_status_body(_changed(OLD_UNSCHEDULABLE, SCHEDULED, running=2), NOW, current)
    times = [c["lastTransitionTime"] for c in body["conditions"]]
    assert times == [EARLIER, NOW]
    # the same condition set again by a later session (new transition id): the session's time
    again = PodGroupConditionRecord(
        type="Unschedulable",
        status="True",
        reason=OLD_UNSCHEDULABLE.reason,
        message=OLD_UNSCHEDULABLE.message,
        transition_id="session-7",
    )
    assert podgroup_status_body(_changed(again), NOW, current)["conditions"][0]["lastTransitionTime"] == NOW
    assert (
        podgroup_status_body(_changed(OLD_UNSCHEDULABLE), NOW)["conditions"][0]["lastTransitionTime"] == NOW
    )


def test_podgroup_status_equal_ignores_times_and_transition_ids() -> None:
    ours = podgroup_status_body(_changed(SCHEDULED, running=2), NOW)
    from_api = json.loads(json.dumps(ours))
    from_api["conditions"][0].update(lastTransitionTime=EARLIER, transitionID="session-99")
    from_api["minMember"] = 3  # not a PodGroupStatus field: Go drops it
    assert podgroup_status_equal(ours, from_api)
    assert podgroup_status_equal(ours, ours)
    assert podgroup_status_equal({}, {"phase": None, "conditions": [], "running": 0})  # missing = empty
    for field, value in [("phase", "Inqueue"), ("running", 3), ("succeeded", 1), ("failed", 1)]:
        assert not podgroup_status_equal(ours, {**from_api, field: value}), field
    for field in ("type", "status", "reason", "message"):
        other = json.loads(json.dumps(from_api))
        other["conditions"][0][field] = "changed"
        assert not podgroup_status_equal(ours, other), field
    reordered = podgroup_status_body(_changed(OLD_UNSCHEDULABLE, SCHEDULED), NOW)
    swapped = {**reordered, "conditions": list(reversed(reordered["conditions"]))}
    assert not podgroup_status_equal(reordered, swapped)  # compared position by position
    assert not podgroup_status_equal(ours, {**from_api, "conditions": []})
