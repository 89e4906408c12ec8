"""Simulator restart: resuming from a log cut at any batch boundary finishes like the uninterrupted run."""

from __future__ import annotations

import msgspec
import pytest

from fumarole.daemon.adapters.simulator import Simulator
from fumarole.daemon.adapters.simulator.driver import Driver
from fumarole.daemon.runtime.cycle import comparable
from fumarole.daemon.scheduler.framework.conf import parse_conf
from fumarole.daemon.scheduler.framework.registry import ACTIONS
from fumarole.store.events import (
    BindDecided,
    BindFailed,
    BindSucceeded,
    CycleClosed,
    CycleOpened,
    EvictDecided,
    EvictFailed,
    EvictSucceeded,
    ResyncCompleted,
)
from fumarole.store.events.base import EventBase

CONF = """\
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

pytestmark = pytest.mark.skipif(
    not {"preempt", "reclaim"} <= set(ACTIONS), reason="preempt/reclaim actions not registered"
)


def cluster() -> list[dict]:
    objs: list[dict] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i}"},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
        }
        for i in range(3)
    ]
    for name, weight in (("gold", 3), ("scrap", 1)):
        objs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": weight},
            }
        )
    for name, value in (("hi", 1000), ("lo", 1)):
        objs.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    return objs


def job(name: str, queue: str, at: int, pc: str, replicas: int, min_av: int, dur: int) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": queue, "annotations": {"fumarole.io/submit-at": f"{at}s"}},
        "spec": {
            "queue": queue,
            "minAvailable": min_av,
            "priorityClassName": pc,
            "tasks": [
                {
                    "name": "w",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": {"fumarole.io/duration": f"{dur}s"}},
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
                    },
                }
            ],
        },
    }


def workload() -> list[dict]:
    return [
        job("fill-a", "scrap", 0, "lo", 6, 1, 120),
        job("fill-b", "scrap", 0, "lo", 6, 1, 100),
        job("gang", "gold", 20, "lo", 4, 4, 40),
        job("small", "gold", 25, "lo", 2, 1, 60),
        job("urgent", "gold", 30, "hi", 3, 3, 30),
        job("late", "scrap", 50, "lo", 2, 2, 20),
    ]


def run_reference() -> Driver:
    d = Driver(Simulator(cluster(), workload()), parse_conf(CONF))
    d.run(max_cycles=2000)
    return d


def test_the_small_scenario_evicts_and_recreates() -> None:
    d = run_reference()
    assert sum(d.summary.evictions.values()) > 0, d.summary
    s = d.sim.stats()
    assert s.recreated == s.evictions > 0
    assert s.succeeded == 23 and s.pending == 0 and s.running == 0


def normalize(e: EventBase) -> EventBase:
    e = comparable(e)  # measured timings are not part of a decision
    if isinstance(e, CycleOpened):
        return msgspec.structs.replace(e, watermark=0)
    if isinstance(e, BindSucceeded | BindFailed | EvictSucceeded | EvictFailed):
        return msgspec.structs.replace(e, decision_seq=0)
    return e


def cut_points(d: Driver) -> list[int]:
    bounds = d.batches[:-1]
    picks = set(bounds[:: max(1, len(bounds) // 6)])
    # right after a cycle whose decisions were logged but not yet forwarded, and mid-forwarding
    for i, b in enumerate(bounds):
        if isinstance(d.log[b - 1], CycleClosed) and any(
            isinstance(e, EvictDecided) for e in d.log[bounds[i - 1] : b]
        ):
            picks.add(b)
            if i + 1 < len(bounds):
                picks.add(bounds[i + 1])
            break
    return sorted(picks)


def test_resume_from_any_cut_equals_the_uninterrupted_run() -> None:
    ref = run_reference()
    cuts = cut_points(ref)
    assert len(cuts) >= 6
    for cut in cuts:
        prefix = ref.log[:cut]
        restarted = Driver.restore(Simulator(cluster(), workload()), parse_conf(CONF), prefix)
        listing_end = next(
            i for i in range(cut, len(restarted.log)) if isinstance(restarted.log[i], ResyncCompleted)
        )
        restarted.run(max_cycles=2000)
        # log positions shift by the relisting: compare with watermarks and decision seqs blanked
        after = [normalize(e) for e in restarted.log[listing_end + 1 :]]
        assert after == [normalize(e) for e in ref.log[cut:]], f"cut at {cut}"
        assert restarted.sim.stats() == ref.sim.stats(), f"cut at {cut}"


def test_forwarding_after_restart_is_idempotent() -> None:
    ref = run_reference()
    # cut after a cycle's decisions and the first outcome: the restarted driver re-forwards the
    # rest, and re-forwarding the already answered one again changes nothing.
    for i, e in enumerate(ref.log):
        if isinstance(e, BindDecided):
            first_bind = i
            break
    cycle_end = next(b for b in ref.batches if b > first_bind)
    after_one = next(b for b in ref.batches if b > cycle_end)
    sim = Simulator(cluster(), workload())
    d = Driver.restore(sim, parse_conf(CONF), ref.log[:after_one])
    binds_before = sim.stats().binds
    decision = ref.log[first_bind]
    assert isinstance(decision, BindDecided)
    seq = first_bind + 1  # log sequences start at 1
    outcome, facts = sim.apply_sync(seq, decision)
    assert facts == [] and outcome.decision_seq == seq
    assert sim.stats().binds == binds_before
    assert any(isinstance(e, CycleOpened) for e in d.log)
