"""The event correlator against client-go's documented behaviour (tools/record/events_cache.go, v0.36.1).

A clock is injected: aggregation after 10 similar events within 10 minutes, the patch of an identical
event (count, lastTimestamp, message), the spam filter's 25-event burst then one event per 5
minutes per object, the 4096-entry LRU bound, and the body Volcano's recorder writes.
"""

from __future__ import annotations

from dataclasses import replace

from fumarole.daemon.adapters.kubernetes.events import (
    MAX_LRU_CACHE_ENTRIES,
    CoreEvent,
    EventCorrelator,
    EventRecorder,
    ObjectRef,
    event_name,
)

T0 = 1_790_000_000 * 1_000_000_000  # a whole second, in Unix nanoseconds
SECOND = 1_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def pod(name: str = "p", ns: str = "ns", uid: str = "u-1") -> ObjectRef:
    return ObjectRef.pod(ns, name, uid, "42")


def event(
    clock: Clock,
    message: str = "0/4 nodes are available",
    *,
    ref: ObjectRef | None = None,
    reason: str = "FailedScheduling",
    type_: str = "Warning",
    token: str = "",
) -> CoreEvent:
    ref = ref or pod()
    return CoreEvent(
        name=event_name(ref, clock.now, reason, token),
        namespace=ref.namespace,
        involved=ref,
        reason=reason,
        message=message,
        type=type_,
        first_ns=clock.now,
        last_ns=clock.now,
        reporting_controller="volcano",
        dedup_token=token,
    )


def test_the_body_is_what_volcanos_recorder_writes() -> None:
    clock = Clock()
    result = EventCorrelator(clock).correlate(
        event(clock, "Successfully assigned ns/p to n1", reason="Scheduled", type_="Normal")
    )
    assert result.action == "create" and result.event is not None
    assert result.path == "/api/v1/namespaces/ns/events"
    assert result.event.to_json() == {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": f"p.{T0:x}", "namespace": "ns"},
        "involvedObject": {
            "kind": "Pod",
            "namespace": "ns",
            "name": "p",
            "uid": "u-1",
            "apiVersion": "v1",
            "resourceVersion": "42",
        },
        "reason": "Scheduled",
        "message": "Successfully assigned ns/p to n1",
        "source": {"component": "volcano"},
        "firstTimestamp": "2026-09-21T14:13:20Z",
        "lastTimestamp": "2026-09-21T14:13:20Z",
        "count": 1,
        "type": "Normal",
        "eventTime": None,
        "reportingComponent": "volcano",
        "reportingInstance": "",
    }


def test_an_identical_event_patches_the_first_ones_count_and_last_timestamp() -> None:
    clock = Clock()
    c = EventCorrelator(clock)
    first = c.correlate(event(clock))
    assert first.action == "create" and first.event is not None
    for n in (2, 3):
        clock.now += 7 * SECOND
        again = c.correlate(event(clock))
        assert again.action == "patch" and again.event is not None
        assert again.event.name == first.event.name  # the Event created first
        assert again.path == f"/api/v1/namespaces/ns/events/{first.event.name}"
        assert again.event.first_ns == T0 and again.event.count == n
        assert again.patch == {
            "count": n,
            "lastTimestamp": "2026-09-21T14:13:" + str(20 + 7 * (n - 1)) + "Z",
            "message": "0/4 nodes are available",
        }
    # another message about the same pod is another Event
    assert c.correlate(event(clock, "another reason")).action == "create"


def test_the_tenth_similar_event_within_ten_minutes_is_combined() -> None:
    clock = Clock()
    c = EventCorrelator(clock)
    actions = []
    for i in range(9):
        clock.now += 60 * SECOND  # 9 minutes in all: within the window counted from the last one
        r = c.correlate(event(clock, f"message {i}"))
        actions.append(r.action)
    assert actions == ["create"] * 9
    clock.now += 60 * SECOND
    tenth = c.correlate(event(clock, "message 9"))
    assert tenth.action == "create" and tenth.event is not None
    assert tenth.event.message == "(combined from similar events): message 9"
    assert tenth.event.name == f"p.{clock.now:x}" and tenth.event.count == 1
    # as client-go's aggregate event: source and involved object kept, no reporting fields
    body = tenth.event.to_json()
    assert (body["reportingComponent"], body["reportingInstance"]) == ("", "")
    assert body["source"] == {"component": "volcano"} and body["involvedObject"]["name"] == "p"
    # the next similar event patches the combined one
    clock.now += SECOND
    eleventh = c.correlate(event(clock, "message 10"))
    assert eleventh.action == "patch" and eleventh.event is not None
    assert eleventh.event.name == tenth.event.name
    assert eleventh.patch == {
        "count": 2,
        "lastTimestamp": body["lastTimestamp"][:-3] + "21Z",
        "message": "(combined from similar events): message 10",
    }
    # another reason about the same pod is not similar
    other = c.correlate(event(clock, "message 11", reason="Evict"))
    assert other.action == "create" and other.event is not None and other.event.message == "message 11"


def test_similar_events_more_than_ten_minutes_apart_start_again() -> None:
    clock = Clock()
    c = EventCorrelator(clock)
    for i in range(9):
        c.correlate(event(clock, f"message {i}"))
    clock.now += 601 * SECOND
    r = c.correlate(event(clock, "message 9"))
    assert r.action == "create" and r.event is not None and r.event.message == "message 9"


def test_the_spam_filter_lets_25_through_then_one_per_five_minutes_per_object() -> None:
    clock = Clock()
    c = EventCorrelator(clock)
    actions = [c.correlate(event(clock)).action for _ in range(26)]
    assert actions == ["create"] + ["patch"] * 24 + ["skip"]
    # another object, or another type about the same object, has its own bucket
    assert c.correlate(event(clock, ref=pod("q", uid="u-2"))).action == "create"
    assert c.correlate(event(clock, type_="Normal", reason="Scheduled")).action == "create"
    clock.now += 299 * SECOND
    assert c.correlate(event(clock)).action == "skip"
    clock.now += SECOND  # 300 s: one token
    through = c.correlate(event(clock))
    assert through.action == "patch" and through.patch is not None
    assert through.patch["count"] == 28  # the skipped ones were counted (observed before the filter)
    assert c.correlate(event(clock)).action == "skip"
    clock.now += 600 * SECOND  # two tokens
    assert [c.correlate(event(clock)).action for _ in range(3)] == ["patch", "patch", "skip"]


def test_each_cache_keeps_at_most_4096_entries_least_recent_out() -> None:
    clock = Clock()
    c = EventCorrelator(clock)
    refs = [pod(f"p{i}", uid=f"u{i}") for i in range(MAX_LRU_CACHE_ENTRIES + 1)]
    assert c.correlate(event(clock, ref=refs[0])).action == "create"
    assert c.correlate(event(clock, ref=refs[0])).action == "patch"
    for ref in refs[1:]:
        c.correlate(event(clock, ref=ref))
    assert len(c.observed) == len(c.similar) == len(c.spam) == MAX_LRU_CACHE_ENTRIES
    # p0 was the least recently used: forgotten, its next event is a new Event
    assert c.correlate(event(clock, ref=refs[0])).action == "create"
    # the most recent one is still known
    assert c.correlate(event(clock, ref=refs[-1])).action == "patch"


def test_the_servers_answer_updates_the_state_without_rewinding_the_count() -> None:
    clock = Clock()
    c = EventCorrelator(clock)
    first = c.correlate(event(clock))
    assert first.event is not None
    second = c.correlate(event(clock))  # observed (count 2) before the create's answer came back
    assert second.event is not None and second.event.count == 2
    c.update_state(replace(first.event, resource_version="7"))  # the create's answer: count 1
    third = c.correlate(event(clock))
    assert third.patch is not None and third.patch["count"] == 3
    c.update_state(replace(first.event, count=9, resource_version="8"))  # a later server count
    assert c.correlate(event(clock)).patch == {
        "count": 10,
        "lastTimestamp": "2026-09-21T14:13:20Z",
        "message": "0/4 nodes are available",
    }


def test_a_dedup_token_names_the_event_from_uid_reason_and_token() -> None:
    clock = Clock()
    ref = pod()
    name = event_name(ref, T0, "Scheduled", "17/u-1")
    assert name == event_name(ref, T0 + 5 * SECOND, "Scheduled", "17/u-1")  # not the clock
    assert name.startswith("p.") and len(name) == len("p.") + 16
    assert name != event_name(ref, T0, "Scheduled", "18/u-1")
    assert name != event_name(ref, T0, "Evict", "17/u-1")
    assert name != event_name(replace(ref, uid="u-2"), T0, "Scheduled", "17/u-1")
    # a pod name that leaves no room for the suffix: a name still valid, still deterministic
    long_ref = replace(ref, name="x" * 250)
    assert event_name(long_ref, T0, "Scheduled", "t") == event_name(long_ref, T0 + 1, "Scheduled", "t")
    assert len(event_name(long_ref, T0, "Scheduled", "t")) == 36
    # a combined event made from a tokened one keeps the tokened name
    c = EventCorrelator(clock)
    for i in range(9):
        c.correlate(event(clock, f"m{i}"))
    combined = c.correlate(event(clock, "m9", token="t9"))
    assert combined.event is not None and combined.event.name == event_name(ref, 0, "FailedScheduling", "t9")


def test_the_recorder_names_events_with_strictly_increasing_nanoseconds() -> None:
    clock = Clock()  # a clock that does not move
    rec = EventRecorder(clock_ns=clock)
    assert rec.record(pod(), "Normal", "Scheduled", "a") and rec.record(pod(), "Normal", "Scheduled", "b")
    assert [e.name for e, _done in rec._queue] == [f"p.{T0:x}", f"p.{T0 + 1:x}"]
    assert not rec.record(pod(), "Info", "Scheduled", "c")  # not Normal or Warning: refused
