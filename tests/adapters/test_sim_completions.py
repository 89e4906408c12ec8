"""The simulator's completion heap: after every step of a run with evictions and recreated pods,
the next completion and the due times equal those computed afresh from the running pods."""

from __future__ import annotations

from test_sim_bundled import RECLAIM_PREEMPT_CONF

from fumarole.daemon.adapters.simulator import Simulator
from fumarole.daemon.adapters.simulator.driver import Driver
from fumarole.daemon.scheduler.framework.conf import parse_conf


def _afresh(sim: Simulator) -> list[tuple[int, str]]:
    """Every running pod's completion (start + duration), sorted: what each advance used to compute."""
    return sorted((start + sim._duration(sim._pods[k]), k) for k, start in sim._started.items())


def test_sim_completion_heap_equals_a_fresh_sort_after_every_step() -> None:
    sim = Simulator.bundled()
    driver = Driver(sim, parse_conf(RECLAIM_PREEMPT_CONF))
    driver.start()
    evicted = 0
    while not sim.drained():
        driver.step()
        evicted = sum(driver.summary.evictions.values())
        fresh = _afresh(sim)
        assert sim._completions() == fresh
        assert sim._next_completion() == (fresh[0] if fresh else None)
    assert evicted > 0 and driver.summary.cycles > 100
