"""The bundled sample drains under the real scheduling core, with reclaim and preemption happening."""

from __future__ import annotations

from pathlib import Path

import pytest

from fumarole.daemon.adapters.simulator import Simulator
from fumarole.daemon.adapters.simulator.driver import Driver
from fumarole.daemon.manifests import build_snapshot
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.registry import ACTIONS
from fumarole.store.events import EvictDecided, PodGroupUpserted, PodUpserted

DEFAULT_CONF = Path("daemon/examples/default-conf.yaml")
RECLAIM_PREEMPT_CONF = """\
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def test_bundled_sample_shape() -> None:
    sim = Simulator.bundled()
    snap = build_snapshot(sim.objects())
    assert 8 <= len(snap.nodes) <= 16
    weights = {q.name: q.weight for q in snap.queues.values() if q.name in ("prod", "dev", "batch")}
    assert weights == {"prod": 4, "dev": 2, "batch": 1}
    assert snap.queues["prod"].reclaimable is False
    assert {"high-priority", "low-priority"} <= set(snap.priority_classes)
    subs = sim.submissions
    assert 30 <= len(subs) <= 60
    sizes = {sum(1 for o in s.objects if o["kind"] == "Pod") for s in subs}
    assert min(sizes) == 1 and max(sizes) == 8
    durations = {o["metadata"]["annotations"]["fumarole.io/duration"] for s in subs for o in s.objects[1:]}
    assert all(20 <= int(d[:-1]) <= 300 for d in durations)
    assert subs[-1].at_ms <= 6 * 60_000


def test_bundled_sample_drains_with_the_default_conf() -> None:
    conf = parse_conf(DEFAULT_CONF.read_text(), source=str(DEFAULT_CONF))
    d = Driver(Simulator.bundled(), conf)
    d.run(max_cycles=5000)
    s = d.sim.stats()
    assert s.submitted == s.submissions == 50
    assert s.pending == 0 and s.running == 0 and s.succeeded == s.pods
    assert s.podgroups_completed == 50
    assert s.bind_failures == 0
    completed = [e for e in d.log if isinstance(e, PodGroupUpserted) and e.manifest.get("status")]
    assert len(completed) == 50
    # virtual time jumped: far fewer cycles than virtual seconds
    assert d.summary.cycles < s.now_ms // 2000


@pytest.mark.skipif(not {"preempt", "reclaim"} <= set(ACTIONS), reason="preempt/reclaim not registered")
def test_bundled_sample_reclaims_and_preempts_and_still_drains() -> None:
    d = Driver(Simulator.bundled(), parse_conf(RECLAIM_PREEMPT_CONF))
    d.run(max_cycles=5000)
    assert d.summary.evictions.get("reclaim", 0) > 0, d.summary
    assert d.summary.evictions.get("preempt", 0) > 0, d.summary
    evictions = [e for e in d.log if isinstance(e, EvictDecided)]
    reclaimed_queues = {e.queue for e in evictions if e.action == "reclaim"}
    assert "prod" not in reclaimed_queues  # prod is not reclaimable
    s = d.sim.stats()
    assert s.evictions == len(evictions) and s.recreated == s.evictions  # every victim was a Volcano Job pod
    assert s.pending == 0 and s.running == 0 and s.succeeded == s.pods == 177
    assert s.bind_failures == 0
    # a recreated pod ran to completion under its new uid
    done = [e for e in d.log if isinstance(e, PodUpserted) and e.manifest["status"]["phase"] == "Succeeded"]
    assert any("fumarole.io/incarnation" in e.manifest["metadata"]["annotations"] for e in done)
