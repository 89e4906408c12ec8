"""Outcomes: what an adapter's sink reported after acting on a decision (by the decision's seq)."""

from __future__ import annotations

from store.events.base import EventBase


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


class EvictSucceeded(EventBase, frozen=True, tag="outcome.evict_succeeded"):
    decision_seq: int
    namespace: str
    name: str


class EvictFailed(EventBase, frozen=True, tag="outcome.evict_failed"):
    decision_seq: int
    namespace: str
    name: str
    reason: str


OutcomeEvent = BindSucceeded | BindFailed | EvictSucceeded | EvictFailed
