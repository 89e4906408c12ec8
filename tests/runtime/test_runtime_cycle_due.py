"""The live loop runs a cycle when a fact came after the last cycle's watermark: one folded while
an idle cycle ran is not missed (it used to wait for the 60 s refresh), the cycles' own events
never make one due, and the refresh runs one regardless."""

from __future__ import annotations

from fumarole.daemon.runtime.live_loop import IDLE_REFRESH_S, CycleDue
from fumarole.store.events import ClockAdvanced, CycleClosed, CycleOpened, PodUpserted


def _pod(name: str) -> PodUpserted:
    return PodUpserted(namespace="ns", name=name, manifest={"metadata": {"name": name}})


def test_a_fact_folded_while_an_idle_cycle_ran_makes_the_next_cycle_due() -> None:
    due = CycleDue()
    assert due.due(0.0)  # no cycle yet
    due.note(10, _pod("a"))
    due.note(11, ClockAdvanced(at_ms=1000))  # the cycle's clock advance: watermark 11
    due.note(12, _pod("b"))  # arrives while the cycle runs
    due.note(13, CycleOpened(cycle=1, watermark=11, now_ms=1000, conf_hash="", trace_id=""))
    due.note(14, CycleClosed(cycle=1))
    due.ran(11, decided=False, at=1.0)
    assert due.due(2.0)  # pod b came after the watermark


def test_only_the_cycles_own_events_leave_an_idle_cluster_quiet_until_the_refresh() -> None:
    due = CycleDue()
    due.note(10, _pod("a"))
    due.note(11, ClockAdvanced(at_ms=1000))
    due.note(12, CycleOpened(cycle=1, watermark=11, now_ms=1000, conf_hash="", trace_id=""))
    due.note(13, CycleClosed(cycle=1))
    due.ran(11, decided=False, at=1.0)
    assert not due.due(2.0)
    assert due.due(1.0 + IDLE_REFRESH_S)
    due.ran(11, decided=True, at=3.0)  # a cycle that decided something: the next one runs
    assert due.due(4.0)
    due.ran(11, decided=False, at=5.0)
    due.reset()  # leading again after a relisting
    assert due.due(6.0)
