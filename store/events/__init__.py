"""The event vocabulary: every observed fact, decision and outcome the log can hold.

Events are frozen msgspec Structs in one tagged union (`Event`), encoded as msgpack maps
with the tag in the `type` field and the schema version in `v`.  `EVENT_TYPES` maps each
tag to its class; `OBSERVED`, `DECISIONS` and `OUTCOMES` name the three families.
"""

from __future__ import annotations

from fumarole.store.events.base import EventBase
from fumarole.store.events.cluster import (
    UPSERT_KINDS,
    ClockAdvanced,
    HyperNodeDeleted,
    HyperNodeUpserted,
    NamespaceDeleted,
    NamespaceUpserted,
    NodeDeleted,
    NodeUpserted,
    NodeUsageObserved,
    NumatopologyDeleted,
    NumatopologyUpserted,
    ObservedEvent,
    PodDeleted,
    PodDisruptionBudgetDeleted,
    PodDisruptionBudgetUpserted,
    PodGroupDeleted,
    PodGroupUpserted,
    PodUpserted,
    PriorityClassDeleted,
    PriorityClassUpserted,
    QueueDeleted,
    QueueUpserted,
    ResourceQuotaDeleted,
    ResourceQuotaUpserted,
    ResyncCompleted,
    ResyncStarted,
    upserted,
)
from fumarole.store.events.decisions import (
    BindDecided,
    CalloutCall,
    CalloutsRecorded,
    ConfigurationRecorded,
    ConfigurationRejected,
    CycleClosed,
    CycleOpened,
    DecisionEvent,
    EvictDecided,
    JobExplained,
    PendingReason,
    PipelineDecided,
    PodGroupConditionRecord,
    PodGroupStatusChanged,
    QueueFigures,
    QueueFiguresRecorded,
)
from fumarole.store.events.outcomes import (
    BindFailed,
    BindSucceeded,
    EvictFailed,
    EvictSucceeded,
    OutcomeEvent,
)

Event = ObservedEvent | DecisionEvent | OutcomeEvent

OBSERVED: tuple[type[EventBase], ...] = (
    NodeUpserted,
    NodeDeleted,
    PodUpserted,
    PodDeleted,
    PodGroupUpserted,
    PodGroupDeleted,
    QueueUpserted,
    QueueDeleted,
    PriorityClassUpserted,
    PriorityClassDeleted,
    ResourceQuotaUpserted,
    ResourceQuotaDeleted,
    PodDisruptionBudgetUpserted,
    PodDisruptionBudgetDeleted,
    NamespaceUpserted,
    NamespaceDeleted,
    HyperNodeUpserted,
    HyperNodeDeleted,
    NodeUsageObserved,
    NumatopologyUpserted,
    NumatopologyDeleted,
    ResyncStarted,
    ResyncCompleted,
    ClockAdvanced,
)
DECISIONS: tuple[type[EventBase], ...] = (
    ConfigurationRecorded,
    ConfigurationRejected,
    CycleOpened,
    CalloutsRecorded,
    BindDecided,
    EvictDecided,
    PipelineDecided,
    PodGroupStatusChanged,
    JobExplained,
    QueueFiguresRecorded,
    CycleClosed,
)
OUTCOMES: tuple[type[EventBase], ...] = (BindSucceeded, BindFailed, EvictSucceeded, EvictFailed)


def _tag(cls: type[EventBase]) -> str:
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


EVENT_TYPES: dict[str, type[EventBase]] = {_tag(c): c for c in (*OBSERVED, *DECISIONS, *OUTCOMES)}


def event_type(event: EventBase) -> str:
    """The tag of an event instance (what the log stores in its `type` column)."""
    return _tag(type(event))


__all__ = [
    "DECISIONS",
    "EVENT_TYPES",
    "OBSERVED",
    "OUTCOMES",
    "UPSERT_KINDS",
    "BindDecided",
    "BindFailed",
    "BindSucceeded",
    "CalloutCall",
    "CalloutsRecorded",
    "ClockAdvanced",
    "ConfigurationRecorded",
    "ConfigurationRejected",
    "CycleClosed",
    "CycleOpened",
    "DecisionEvent",
    "Event",
    "EventBase",
    "EvictDecided",
    "EvictFailed",
    "EvictSucceeded",
    "HyperNodeDeleted",
    "HyperNodeUpserted",
    "JobExplained",
    "NamespaceDeleted",
    "NamespaceUpserted",
    "NodeDeleted",
    "NodeUpserted",
    "NodeUsageObserved",
    "NumatopologyDeleted",
    "NumatopologyUpserted",
    "ObservedEvent",
    "OutcomeEvent",
    "PendingReason",
    "PipelineDecided",
    "PodDeleted",
    "PodDisruptionBudgetDeleted",
    "PodDisruptionBudgetUpserted",
    "PodGroupConditionRecord",
    "PodGroupDeleted",
    "PodGroupStatusChanged",
    "PodGroupUpserted",
    "PodUpserted",
    "PriorityClassDeleted",
    "PriorityClassUpserted",
    "QueueDeleted",
    "QueueFigures",
    "QueueFiguresRecorded",
    "QueueUpserted",
    "ResourceQuotaDeleted",
    "ResourceQuotaUpserted",
    "ResyncCompleted",
    "ResyncStarted",
    "event_type",
    "upserted",
]
