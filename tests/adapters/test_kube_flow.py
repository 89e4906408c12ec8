"""The sink's flow control (daemon/adapters/kubernetes/flow.py): the adaptive in-flight limit grows
while the server answers as fast as usual, shrinks when latency rises or the server says it is
overloaded (once per round trip), pauses on Retry-After, stays within its bounds; the priority
slots grant in (lane, order) order, hand a cancelled waiter's slot on, and honour a pause."""

from __future__ import annotations

import anyio
import pytest

from fumarole.daemon.adapters.kubernetes.flow import AdaptiveLimit, PrioritySlots


def _grow(limit: AdaptiveLimit, rtt: float, rounds: int, now: float = 0.0) -> float:
    for i in range(rounds):
        limit.answered(rtt, limit.slots, now + i * 0.001)
    return limit.limit


def test_limit_grows_while_latency_holds_and_stops_at_the_maximum() -> None:
    limit = AdaptiveLimit(initial=16, maximum=200)
    before = limit.limit
    after = _grow(limit, 0.010, 50)
    assert after > before * 2
    assert _grow(limit, 0.010, 5000) == 200


def test_an_idle_sink_proves_nothing_so_the_limit_holds() -> None:
    limit = AdaptiveLimit(initial=32)
    for i in range(500):
        limit.answered(0.010, 3, i * 0.001)  # 3 in flight of 32: not using it
    assert limit.limit == 32


def test_rising_latency_shrinks_the_limit() -> None:
    limit = AdaptiveLimit(initial=64, long_window=1000)
    _grow(limit, 0.010, 300)
    high = limit.limit
    _grow(limit, 0.200, 60)  # the server queues: twenty times slower
    assert limit.limit < high * 0.7


def test_overload_cuts_once_per_round_trip_and_retry_after_pauses() -> None:
    limit = AdaptiveLimit(initial=100, minimum=4)
    _grow(limit, 0.050, 20)
    start = limit.limit
    limit.overloaded(10.0)
    limit.overloaded(10.01)  # same round trip (rtt 50 ms): no second cut
    assert limit.limit == pytest.approx(start * 0.7)
    assert limit.cuts == 1
    limit.overloaded(10.2, retry_after=3)
    assert limit.limit == pytest.approx(start * 0.49)
    assert limit.paused_until == pytest.approx(13.2)
    for i in range(50):
        limit.overloaded(20 + i)
    assert limit.limit == 4  # never below the minimum


async def test_slots_are_granted_by_lane_then_order() -> None:
    slots = PrioritySlots(AdaptiveLimit(initial=1, minimum=1, maximum=1))
    await slots.acquire(0, 0)  # the one slot is taken
    got: list[tuple[int, int]] = []

    async def want(lane: int, order: int) -> None:
        await slots.acquire(lane, order)
        got.append((lane, order))
        await anyio.sleep(0)
        slots.release(0.001)

    async with anyio.create_task_group() as tg:
        for lane, order in [(3, 1), (1, 9), (0, 7), (1, 2), (0, 5)]:
            tg.start_soon(want, lane, order)
        await anyio.wait_all_tasks_blocked()
        slots.release(0.001)
    assert got == [(0, 5), (0, 7), (1, 2), (1, 9), (3, 1)]
    assert slots.in_flight == 0


@pytest.mark.parametrize("granted_first", [False, True])
async def test_a_cancelled_waiter_hands_its_slot_on(granted_first: bool) -> None:
    slots = PrioritySlots(AdaptiveLimit(initial=1, minimum=1, maximum=1))
    await slots.acquire(0)
    got: list[str] = []
    scopes: list[anyio.CancelScope] = []

    async def cancelled() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await slots.acquire(0)
            got.append("cancelled")
            slots.release(0.001)

    async def second() -> None:
        await slots.acquire(1)
        got.append("second")
        slots.release(0.001)

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancelled)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(second)
        await anyio.wait_all_tasks_blocked()
        if granted_first:  # the slot is granted to the first waiter, cancelled before it wakes
            slots.release(0.001)
            scopes[0].cancel()
        else:  # cancelled while waiting, then the slot frees
            scopes[0].cancel()
            await anyio.wait_all_tasks_blocked()
            slots.release(0.001)
    # Cancelled while waiting: the slot goes to the next waiter.  Granted before the cancellation
    # could land: anyio lets the grant win (the caller releases it); either way nothing leaks.
    assert got == (["cancelled", "second"] if granted_first else ["second"])
    assert slots.in_flight == 0


async def test_a_pause_holds_new_calls_until_retry_after() -> None:
    now = [0.0]
    slots = PrioritySlots(AdaptiveLimit(initial=4), clock=lambda: now[0])
    await slots.acquire(0)
    slots.release(0.01, overloaded=True, retry_after=0.05)
    assert slots.limit.paused_until == pytest.approx(0.05)
    started = anyio.Event()

    async def want() -> None:
        await slots.acquire(0)
        started.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(want)
        await anyio.sleep(0.01)
        assert not started.is_set()  # paused
        now[0] = 1.0  # the pause is over
        with anyio.fail_after(5):
            await started.wait()
