"""A whole session under Volcano's default configuration (unset flags on, as loaded from a file)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fumarole_sched_kit import add_tasks, mk_job, mk_node, mk_queue, mk_snapshot, rl

from fumarole.daemon.scheduler.framework.conf import DEFAULT_SCHEDULER_CONF, parse_conf
from fumarole.daemon.scheduler.framework.run import run_session


def test_three_queue_example_under_default_conf() -> None:
    queues = [
        mk_queue("queue-a", 2, capability=rl(cpu="50"), guarantee=rl(cpu="10")),
        mk_queue("queue-b", 3),
        mk_queue("queue-c", 5, guarantee=rl(cpu="20")),
        mk_queue("default"),
        mk_queue("root"),
    ]
    jobs = []
    for q, n in (("a", 8), ("b", 6), ("c", 3)):
        j = mk_job(f"job-{q}", f"queue-{q}", min_available=1, phase="Pending")
        add_tasks(j, n, "10", None, prefix=f"{q}-job")
        jobs.append(j)
    snap = mk_snapshot([mk_node("n1", "100", "400Gi")], jobs, queues)
    res = run_session(snap, parse_conf(DEFAULT_SCHEDULER_CONF))
    per_queue = {q: sum(1 for k in res.binds if k.startswith(f"default/{q}-job-")) for q in "abc"}
    assert per_queue == {"a": 2, "b": 4, "c": 3}
    assert [res.queues[f"queue-{q}"]["deserved"].cpu for q in "abc"] == pytest.approx([28000, 42000, 30000])
    # enqueue admitted every job (no minResources); binding leaves them Inqueue
    assert {pg.phase for pg in res.podgroups.values()} == {"Inqueue"}
    assert "default/a-job-2" in res.pending and "default/a-job-0" not in res.pending
