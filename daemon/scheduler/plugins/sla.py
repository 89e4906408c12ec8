"""The sla plugin (plugins/sla): jobs past their waiting time go first and are admitted and pipelined.

Also home of `parse_go_duration`, Go's time.ParseDuration, shared by the plugins that read
duration strings (sla, tdm, cdp).
"""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.framework import combinators as cb
from fumarole.daemon.scheduler.framework.session import Session
from fumarole.daemon.scheduler.model.job import JobInfo

NAME = "sla"
WAITING_TIME_ARG = "sla-waiting-time"
# PodGroup annotations read for a job's own waiting time, first valid one wins.
WAITING_TIME_ANNOTATIONS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")

NANOS_PER_SECOND = 1_000_000_000
_MAX_NANOS = (1 << 63) - 1
_UNIT_NANOS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek small letter mu
    "ms": 1_000_000,
    "s": NANOS_PER_SECOND,
    "m": 60 * NANOS_PER_SECOND,
    "h": 3600 * NANOS_PER_SECOND,
}


class GoDurationError(ValueError):
    """A string time.ParseDuration refuses."""


def _leading_digits(s: str) -> tuple[str, str]:
    i = 0
    while i < len(s) and "0" <= s[i] <= "9":
        i += 1
    return s[:i], s[i:]


def parse_go_duration(text: str) -> int:
    """time.ParseDuration: `[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+` or "0", in nanoseconds.

    Units ns, us (µs, μs), ms, s, m, h; a fraction is scaled with float arithmetic and truncated
    as Go does; the total must fit an int64.
    """
    s = text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise GoDurationError(f"time: invalid duration {text!r}")
    total = 0
    while s:
        if not (s[0] == "." or "0" <= s[0] <= "9"):
            raise GoDurationError(f"time: invalid duration {text!r}")
        whole, s = _leading_digits(s)
        value = int(whole) if whole else 0
        if value > 1 << 63:
            raise GoDurationError(f"time: invalid duration {text!r}")
        frac_digits = ""
        has_frac = False
        if s and s[0] == ".":
            frac_digits, s = _leading_digits(s[1:])
            has_frac = bool(frac_digits)
        if not whole and not has_frac:
            raise GoDurationError(f"time: invalid duration {text!r}")
        i = 0
        while i < len(s) and not (s[i] == "." or "0" <= s[i] <= "9"):
            i += 1
        if i == 0:
            raise GoDurationError(f"time: missing unit in duration {text!r}")
        unit_text, s = s[:i], s[i:]
        unit = _UNIT_NANOS.get(unit_text)
        if unit is None:
            raise GoDurationError(f"time: unknown unit {unit_text!r} in duration {text!r}")
        if value > (1 << 63) // unit:
            raise GoDurationError(f"time: invalid duration {text!r}")
        value *= unit
        if frac_digits:
            # leadingFraction: digits past int64 precision are consumed but ignored.
            f, scale = 0, 1.0
            for ch in frac_digits:
                if f > _MAX_NANOS // 10:
                    break
                nxt = f * 10 + int(ch)
                if nxt > 1 << 63:
                    break
                f, scale = nxt, scale * 10
            value += int(float(f) * (float(unit) / scale))
            if value > 1 << 63:
                raise GoDurationError(f"time: invalid duration {text!r}")
        total += value
        if total > 1 << 63:
            raise GoDurationError(f"time: invalid duration {text!r}")
    if neg:
        return -total
    if total > _MAX_NANOS:
        raise GoDurationError(f"time: invalid duration {text!r}")
    return total


def to_nanos(seconds: float) -> int:
    """A virtual-time instant (seconds) as integer nanoseconds, for exact comparisons."""
    return round(seconds * NANOS_PER_SECOND)


def job_waiting_time(job: JobInfo) -> tuple[int | None, list[str]]:
    """The job's own waiting time in ns from its PodGroup annotations, and warnings for bad values.

    `volcano.sh/sla-waiting-time` first; when absent, unparsable or not positive, the bare
    `sla-waiting-time` annotation (api/job_info.go extractWaitingTime).
    """
    warnings: list[str] = []
    for key in WAITING_TIME_ANNOTATIONS:
        raw = job.annotations.get(key)
        if raw is None:
            continue
        try:
            value = parse_go_duration(raw)
        except GoDurationError as e:
            warnings.append(f"sla: job {job.uid}: annotation {key}={raw!r}: {e}; ignored")
            continue
        if value <= 0:
            warnings.append(f"sla: job {job.uid}: annotation {key}={raw!r} is not positive; ignored")
            continue
        return value, warnings
    return None, warnings


class SlaPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        # The global waiting time in ns (None: not set or invalid).
        self.waiting_time: int | None = None
        self.job_waiting: dict[str, int | None] = {}

    def parse_arguments(self, warnings: list[str]) -> None:
        if WAITING_TIME_ARG not in self.arguments:
            return
        raw = self.arguments[WAITING_TIME_ARG]
        text = raw if isinstance(raw, str) else ""
        try:
            value = parse_go_duration(text)
        except GoDurationError:
            value = 0
        if value <= 0:
            warnings.append(
                f"sla: {WAITING_TIME_ARG} {raw!r} is not a positive Go duration such as '1h30m'; ignored"
            )
            return
        self.waiting_time = value

    def waiting_of(self, job: JobInfo) -> int | None:
        own = self.job_waiting.get(job.uid)
        return own if own is not None else self.waiting_time

    def on_session_open(self, ssn: Session) -> None:
        self.parse_arguments(ssn.warnings)
        for uid in sorted(ssn.jobs):
            value, warnings = job_waiting_time(ssn.jobs[uid])
            self.job_waiting[uid] = value
            ssn.warnings.extend(warnings)
        now = to_nanos(ssn.now)

        def job_order(l: JobInfo, r: JobInfo) -> int:
            lw = self.waiting_of(l)
            rw = self.waiting_of(r)
            if lw is None:
                return 0 if rw is None else 1
            if rw is None:
                return -1
            ldue = to_nanos(l.creation) + lw
            rdue = to_nanos(r.creation) + rw
            if ldue < rdue:
                return -1
            if ldue > rdue:
                return 1
            return 0

        def permit_when_expired(job: JobInfo) -> int:
            wait = self.waiting_of(job)
            if wait is None or now - to_nanos(job.creation) < wait:
                return cb.ABSTAIN
            return cb.PERMIT

        ssn.register(cb.JOB_ORDER, NAME, job_order)
        ssn.register(cb.JOB_ENQUEUEABLE, NAME, permit_when_expired)
        ssn.register(cb.JOB_PIPELINED, NAME, permit_when_expired)

    def on_session_close(self, ssn: Session) -> None:
        return None


def new(arguments: dict[str, Any]) -> SlaPlugin:
    return SlaPlugin(arguments)
