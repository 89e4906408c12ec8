"""PodDisruptionBudgets reach the daemon's sessions: simulator listing -> events -> projection -> snapshot."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.adapters.simulator import Simulator
from fumarole.daemon.cache import Projection, decode_projection, encode_projection, state_image
from fumarole.store.events import PodDisruptionBudgetDeleted, PodDisruptionBudgetUpserted

PDB: dict[str, Any] = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "keep-two", "namespace": "team"},
    "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 2},
    "status": {"disruptionsAllowed": 1},
}
NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
}


def test_simulator_lists_pdbs_and_projection_hands_them_to_sessions() -> None:
    sim = Simulator([NODE, PDB], [])
    events = sim.initial_events_sync()
    assert any(isinstance(e, PodDisruptionBudgetUpserted) and e.name == "keep-two" for e in events)
    p = Projection()
    for i, ev in enumerate(events, 1):
        p.fold(i, ev)
    snap = p.freeze()
    pdbs = snap.namespaces["team"].pdbs
    assert [(b.name, b.disruptions_allowed) for b in pdbs] == [("keep-two", 1)]
    assert pdbs[0].selector == {"matchLabels": {"app": "web"}}
    # Snapshots of the projection keep them.
    again = decode_projection(encode_projection(p))
    assert state_image(again) == state_image(p)
    assert [b.name for b in again.freeze().namespaces["team"].pdbs] == ["keep-two"]
    p.fold(len(events) + 1, PodDisruptionBudgetDeleted(namespace="team", name="keep-two"))
    team = p.freeze().namespaces.get("team")
    assert team is None or team.pdbs == []
