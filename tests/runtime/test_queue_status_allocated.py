"""The Queue `status.allocated` a cycle records (QueueFigures.status_allocated) is Volcano's
session-close figure (framework/session.go updateQueueStatus), not the queue-share plugin's.

Volcano counts the tasks Allocated, Binding, Bound or Running; proportion's own `allocated`
also counts the tasks it pipelined in the session (its allocate handler sees them), which the
session close does not write.  Every queue of the session is written: `root` (the sum) and an
idle `default` (zeros) included.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from fumarole_sched_kit import mk_conf, mk_job, mk_node, mk_queue, mk_snapshot, mk_task

from fumarole.daemon.runtime.cycle import decide
from fumarole.daemon.scheduler.model.snapshot import ClusterSnapshot
from fumarole.daemon.scheduler.model.task import TaskStatus
from fumarole.store.events import QueueFiguresRecorded

S = TaskStatus
CONF = mk_conf("enqueue, allocate", ["priority", "gang"], ["proportion"])


def _pipelining_cluster() -> ClusterSnapshot:
    """n1 has 4 cpu: 1 running and 2 releasing (queue qb); qa's job gets 1 cpu bound on the idle
    cpu and its 2-cpu task pipelined onto what the releasing pod frees."""
    other = mk_job("other", "qb", min_available=1, phase="Running")
    mk_task(other, "other-0", "2", "1Gi", status=S.RELEASING, node="n1")
    mk_task(other, "other-1", "1", "1Gi", status=S.RUNNING, node="n1")
    j = mk_job("j", "qa", min_available=1, phase="Inqueue")
    mk_task(j, "j-0", "1", "1Gi")
    mk_task(j, "j-1", "2", "1Gi")
    queues = [mk_queue("root"), mk_queue("qa"), mk_queue("qb"), mk_queue("default")]
    return mk_snapshot([mk_node("n1", "4", "8Gi")], [other, j], queues)


def test_a_pipelined_task_counts_for_proportion_but_not_in_the_written_allocated() -> None:
    out = decide(_pipelining_cluster(), CONF, cycle=1, watermark=0, conf_hash="h")
    assert out.result.binds == {"default/j-0": "n1"}
    assert out.result.pipelined == {"default/j-1": "n1"}
    [rec] = [e for e in out.events if isinstance(e, QueueFiguresRecorded)]
    qa = rec.queues["qa"]
    assert qa.allocated["cpu"] == "3"  # the plugin's figure: bound 1 + pipelined 2 (its decisions)
    assert qa.status_allocated == {"cpu": "1", "memory": "1Gi", "pods": "1"}  # what Volcano writes
    # qb: the running task only (a Releasing task is not in AllocatedStatus).
    assert rec.queues["qb"].status_allocated == {"cpu": "1", "memory": "1Gi", "pods": "1"}
    # root holds the sum; the idle default queue is written with zeros; neither has plugin figures.
    assert rec.queues["root"].status_allocated == {"cpu": "2", "memory": "2Gi", "pods": "2"}
    assert rec.queues["default"].status_allocated == {"cpu": "0", "memory": "0"}
    assert rec.queues["default"].allocated == {} and rec.queues["default"].deserved == {}


def test_the_written_figures_are_recorded_again_only_when_they_change() -> None:
    first = decide(_pipelining_cluster(), CONF, cycle=1, watermark=0, conf_hash="h")
    [rec] = [e for e in first.events if isinstance(e, QueueFiguresRecorded)]
    again = decide(
        _pipelining_cluster(), CONF, cycle=2, watermark=0, conf_hash="h", previous_queues=rec.queues
    )
    assert not [e for e in again.events if isinstance(e, QueueFiguresRecorded)]


def test_without_a_queue_share_plugin_the_written_figures_are_still_recorded() -> None:
    """Volcano's session close writes the queues' allocated whatever plugins are configured."""
    out = decide(_pipelining_cluster(), mk_conf("allocate", ["gang"]), cycle=1, watermark=0, conf_hash="h")
    [rec] = [e for e in out.events if isinstance(e, QueueFiguresRecorded)]
    assert sorted(rec.queues) == ["default", "qa", "qb", "root"]
    assert rec.queues["qa"].status_allocated["cpu"] == "1"
    assert rec.queues["qa"].deserved == {}
