"""The simulator adapter: an in-process Volcano cluster on a virtual clock, and its workload format."""

from __future__ import annotations

from fumarole.daemon.adapters.simulator.engine import SOURCE_NAME, SimStats, Simulator
from fumarole.daemon.adapters.simulator.workload import (
    DURATION_KEY,
    SUBMIT_AT_KEY,
    Submission,
    format_duration,
    parse_duration,
)

__all__ = [
    "DURATION_KEY",
    "SOURCE_NAME",
    "SUBMIT_AT_KEY",
    "SimStats",
    "Simulator",
    "Submission",
    "format_duration",
    "parse_duration",
]
