"""Session node copies kept across sessions (NodeDerived.session_copies): a copy nothing changed
is used again, one a session wrote to (or of a node the snapshot replaced) is not."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_snapshot, mk_task

from fumarole.daemon.scheduler.framework.run import run_session
from fumarole.daemon.scheduler.model.node import NodeInfo
from fumarole.daemon.scheduler.model.node_derived import NodeDerived
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskStatus


def _snapshot() -> ClusterSnapshot:
    job = mk_job("j", min_available=1)
    mk_task(job, "j-0", status=TaskStatus.RUNNING, node="n0")
    snap = mk_snapshot([mk_node(f"n{i}", cpu="8") for i in range(3)], [job])
    snap.derived = NodeDerived()
    return snap


def _copies(snap: ClusterSnapshot, conf_actions: str = "backfill") -> list[NodeInfo | None]:
    """Run a session (it releases its copies at the end) and read the copies kept per node."""
    run_session(snap, mk_conf(conf_actions, ["priority", "gang"], ["predicates", "nodeorder"]))
    assert snap.derived is not None
    return snap.derived.kept_copies()


def test_untouched_copies_are_used_again_and_changed_nodes_get_new_ones() -> None:
    snap = _snapshot()
    first = _copies(snap)
    assert all(c is not None and c is not n for c, n in zip(first, snap.nodes, strict=True))
    again = _copies(snap)
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert [c.index for c in again if c is not None] == [0, 1, 2]  # numbered afresh by the table
    snap.nodes[1] = snap.nodes[1].clone()  # the freeze replaces a changed node
    third = _copies(snap)
    assert third[0] is first[0] and third[2] is first[2] and third[1] is not first[1]


def test_a_copy_a_session_wrote_to_is_not_used_again() -> None:
    snap = _snapshot()
    job = mk_job("p", min_available=1)
    mk_task(job, "p-0", cpu="1")
    snap.jobs[job.uid] = job
    before = _copies(snap, "backfill")  # backfill places best-effort pods only: nothing placed
    assert all(a is b for a, b in zip(_copies(snap, "backfill"), before, strict=True))
    after = _copies(snap, "allocate")  # the pod is placed: the session wrote to its node's copy
    touched = [
        a.name
        for a, n in zip(after, snap.nodes, strict=True)
        if a is not None and not a.is_untouched_copy_of(n)
    ]
    assert len(touched) == 1
    again = _copies(snap, "backfill")
    assert [a is b for a, b in zip(again, after, strict=True)] == [n.name not in touched for n in snap.nodes]
