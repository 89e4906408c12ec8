"""Outcomes: what an adapter's sink reported after acting on a decision (by the decision's seq).

`superseded` (BindFailed, EvictFailed; False when absent, so older logs decode unchanged): the sink
did not act because another replica led since the decision was made (leader election); folded
exactly as a failure (the decision is reverted, the pod decided again) but not one.
"""

from __future__ import annotations

from fumarole.store.events.base import EventBase


class BindSucceeded(EventBase, frozen=True, tag="outcome.bind_succeeded"):
    decision_seq: int
    namespace: str
    name: str
    node: str


class BindFailed(EventBase, frozen=True, tag="outcome.bind_failed"):
    decision_seq: int
    namespace: str
    name: str
    node: str
    reason: str
    superseded: bool = False


class EvictSucceeded(EventBase, frozen=True, tag="outcome.evict_succeeded"):
    decision_seq: int
    namespace: str
    name: str


class EvictFailed(EventBase, frozen=True, tag="outcome.evict_failed"):
    decision_seq: int
    namespace: str
    name: str
    reason: str
    superseded: bool = False


OutcomeEvent = BindSucceeded | BindFailed | EvictSucceeded | EvictFailed
