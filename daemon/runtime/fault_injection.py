"""Test-only fault injection for the crash-safety tests, read from FUMAROLE_TEST_* variables.

Never set these in production.  `FUMAROLE_TEST_CRASH_AFTER_COMMITS=N`: the daemon exits at once
with status 137 (as if killed with SIGKILL) right after its Nth append in this process has
committed, before anything else runs.  `FUMAROLE_TEST_DISPATCH_BATCH=N`: the dispatcher reads at
most N log rows per batch, so one cycle's outcomes are committed in several transactions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "CRASH_AFTER_COMMITS",
    "CRASH_EXIT_STATUS",
    "DISPATCH_BATCH",
    "CrashAfterCommits",
    "FaultInjection",
]

CRASH_AFTER_COMMITS = "FUMAROLE_TEST_CRASH_AFTER_COMMITS"
DISPATCH_BATCH = "FUMAROLE_TEST_DISPATCH_BATCH"
CRASH_EXIT_STATUS = 137  # what a shell reports for a process killed by SIGKILL


class CrashAfterCommits:
    """A writer listener (called once per committed append) that ends the process at the Nth call."""

    def __init__(self, commits: int) -> None:
        self.commits = commits
        self.seen = 0

    def __call__(self, folded_seq: int) -> None:
        self.seen += 1
        if self.seen >= self.commits:
            os._exit(CRASH_EXIT_STATUS)


@dataclass(frozen=True, slots=True)
class FaultInjection:
    crash_after_commits: int | None = None
    dispatch_batch: int | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> FaultInjection:
        """Read the variables; ValueError naming the variable for anything but a positive integer."""
        return cls(_positive(env, CRASH_AFTER_COMMITS), _positive(env, DISPATCH_BATCH))


def _positive(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ValueError(f"{name}={raw!r}: expected a positive integer (a test-only setting)")
    return int(raw)
