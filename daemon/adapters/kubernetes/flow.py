"""Flow control toward the API server: an adaptive in-flight limit and priority slots.

The sink keeps as many calls in flight as the API server can take, and no more, so that what
stops it is the server's own limits (its max-in-flight and priority-and-fairness queues, a 429
with Retry-After, rising latency), never a fixed number of ours.  Two parts:

`AdaptiveLimit` is the controller, pure (no I/O, the clock is an argument): it starts at
`initial` calls in flight and, after every answer, moves the limit as the *gradient* algorithm of
Netflix's concurrency-limits library (GradientLimit) does: a short exponential average of the
answers' latency against the baseline, the least latency seen lately (a minimum that drifts up
by 1/`long_window` per answer, so an old best is forgotten); while the short average stays
within `tolerance` times the baseline (calls are not queueing, at the server or in our own event
loop) the limit grows by about its square root per answer, smoothed; when latency rises the limit
shrinks by the ratio, so it settles where latency is about `tolerance` (4) times the unloaded
one.  The tolerance is wide and the floor (`minimum`, 16) high on purpose: on a machine the API
server shares, our own event loop's delays move the latency too, and measured on the real server
16 to 64 calls in flight all saturate it while fewer than 16 leave it idle.
Overload signals — 429 (too many requests; the server's flow control said so), 5xx, timeouts
and connection errors — cut the limit at once by `backoff` (at most once per round trip, as TCP's
congestion control does), and a 429's `Retry-After` pauses new calls until then.  The limit only
grows while the calls in flight use at least half of it (an idle sink proves nothing about the
server).  Every call in flight is a connection (HTTP/1.1 keep-alive), and a new connection costs
both sides about six ordinary calls of CPU (TLS), so the ceiling is low by default
(`kube_concurrency_max` 128; docs/kubernetes.md has the measurements).

`PrioritySlots` hands out the slots: a call waits for a free slot under the current limit; when a
slot frees, the waiter with the lowest `(priority, order)` gets it, so binds and evictions (lane
0) always go before status writes (lane 1), pod conditions (lane 2) and Events (lane 3), and within
a lane older decisions (lower log seq) go first.  Waiters are served in that order even when a
lower-priority call could start: the lower lanes only ever use slots the higher lanes leave free.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

LANE_DECISIONS = 0  # binds and evictions (and the reads they need)
LANE_STATUS = 1  # PodGroup and Queue status
LANE_CONDITIONS = 2  # pods' PodScheduled conditions (why a pod waits)
LANE_EVENTS = 3  # core/v1 Events


@dataclass(slots=True)
class AdaptiveLimit:
    """Calls in flight the API server is trusted with now (see the module notes)."""

    initial: float = 32.0
    minimum: float = 16.0
    maximum: float = 128.0
    tolerance: float = 4.0  # latency may reach this many times the baseline before shrinking
    backoff: float = 0.7  # the cut on an overload signal
    smoothing: float = 0.2  # how far each round trip moves the limit toward the gradient's figure
    short_window: int = 10  # answers in the short latency average
    long_window: int = 200  # the baseline (least latency) drifts up by half of 2/(this+1) per answer
    limit: float = 0.0
    short_rtt: float = 0.0
    long_rtt: float = 0.0
    last_cut: float = -math.inf
    paused_until: float = 0.0
    samples: int = 0
    cuts: int = 0

    def __post_init__(self) -> None:
        if not self.limit:
            self.limit = min(self.maximum, max(self.minimum, self.initial))

    @property
    def slots(self) -> int:
        return int(self.limit)

    def answered(self, rtt: float, in_flight: int, now: float) -> None:
        """A call answered normally after `rtt` seconds with `in_flight` calls (itself included) out."""
        self.samples += 1
        a_short = 2.0 / (self.short_window + 1)
        a_long = 2.0 / (self.long_window + 1)
        if self.samples == 1:
            self.short_rtt = self.long_rtt = rtt
            return
        self.short_rtt += a_short * (rtt - self.short_rtt)
        self.long_rtt = min(self.long_rtt * (1 + a_long / 2), rtt)  # the drifting minimum
        if in_flight < self.limit / 2:
            return  # not using what we have: no evidence for more
        gradient = max(0.5, min(1.0, self.tolerance * self.long_rtt / max(self.short_rtt, 1e-9)))
        target = self.limit * gradient + math.sqrt(self.limit)
        self.limit = max(
            self.minimum,
            min(self.maximum, self.limit * (1 - self.smoothing) + target * self.smoothing),
        )

    def overloaded(self, now: float, retry_after: float | None = None) -> None:
        """The server said it is overloaded (429, 5xx) or did not answer: cut, and maybe pause."""
        if retry_after is not None and retry_after > 0:
            self.paused_until = max(self.paused_until, now + min(retry_after, 60.0))
        if now - self.last_cut < max(self.short_rtt, 0.05):
            return  # one cut per round trip: the answers of the same window tell the same story
        self.last_cut = now
        self.cuts += 1
        self.limit = max(self.minimum, self.limit * self.backoff)


@dataclass(order=True, slots=True)
class _Waiter:
    priority: int
    order: int
    tie: int
    granted: bool = field(default=False, compare=False)
    event: anyio.Event = field(default_factory=anyio.Event, compare=False)
    gone: bool = field(default=False, compare=False)


class PrioritySlots:
    """Slots under an `AdaptiveLimit`, granted in `(priority, order)` order (module notes)."""

    def __init__(self, limit: AdaptiveLimit, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.clock = clock
        self.in_flight = 0
        self.peak = 0
        self._waiters: list[_Waiter] = []
        self._tie = itertools.count()

    async def acquire(self, priority: int, order: int = 0) -> None:
        """Wait for a slot; the caller must `release` it exactly once."""
        while True:
            pause = self.limit.paused_until - self.clock()
            if pause > 0:
                await anyio.sleep(pause)
                continue
            if self.in_flight < self.limit.slots and not self._ahead_of(priority, order):
                self._take()
                return
            w = _Waiter(priority, order, next(self._tie))
            heapq.heappush(self._waiters, w)
            try:
                await w.event.wait()
            except BaseException:
                w.gone = True
                if w.granted:  # granted as it was cancelled: hand the slot on
                    self.in_flight -= 1
                    self._grant()
                raise
            if w.granted:
                if self.limit.paused_until > self.clock():
                    self.in_flight -= 1  # paused meanwhile: wait again
                    continue
                return

    def _ahead_of(self, priority: int, order: int) -> bool:
        while self._waiters and self._waiters[0].gone:
            heapq.heappop(self._waiters)
        return bool(self._waiters) and (self._waiters[0].priority, self._waiters[0].order) <= (
            priority,
            order,
        )

    def _take(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def _grant(self) -> None:
        while self._waiters and self.in_flight < self.limit.slots:
            w = heapq.heappop(self._waiters)
            if w.gone:
                continue
            w.granted = True
            self._take()
            w.event.set()

    def release(self, rtt: float, *, overloaded: bool = False, retry_after: float | None = None) -> None:
        """A call ended after `rtt` seconds; `overloaded` when the answer was an overload signal."""
        now = self.clock()
        if overloaded:
            self.limit.overloaded(now, retry_after)
        else:
            self.limit.answered(rtt, self.in_flight, now)
        self.in_flight -= 1
        self._grant()
