"""`store.events.upserted`: one mapping from a manifest's kind to its observed event."""

from __future__ import annotations

import pytest

from fumarole.store.events import (
    UPSERT_KINDS,
    NodeUpserted,
    PodDisruptionBudgetUpserted,
    PodUpserted,
    upserted,
)


def test_kinds_map_to_their_events() -> None:
    node = upserted({"kind": "Node", "metadata": {"name": "n1"}}, 5)
    assert isinstance(node, NodeUpserted) and node.name == "n1" and node.at_ms == 5
    pod = upserted({"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}})
    assert isinstance(pod, PodUpserted) and (pod.namespace, pod.name) == ("ns", "p")
    pdb = upserted({"kind": "PodDisruptionBudget", "metadata": {"name": "b"}})
    assert isinstance(pdb, PodDisruptionBudgetUpserted) and pdb.namespace == "default"
    assert "PodGroup" in UPSERT_KINDS and "ResourceQuota" in UPSERT_KINDS


def test_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'Deployment'"):
        upserted({"kind": "Deployment", "metadata": {"name": "d"}})
