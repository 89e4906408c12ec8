"""The test-only fault injection settings (daemon/runtime/fault_injection.py) are read strictly."""

from __future__ import annotations

import pytest

from fumarole.daemon.runtime.fault_injection import CRASH_AFTER_COMMITS, DISPATCH_BATCH, FaultInjection


def test_unset_or_empty_means_no_fault() -> None:
    assert FaultInjection.from_env({}) == FaultInjection()
    assert FaultInjection.from_env({CRASH_AFTER_COMMITS: ""}) == FaultInjection()


def test_positive_integers_are_read() -> None:
    got = FaultInjection.from_env({CRASH_AFTER_COMMITS: "7", DISPATCH_BATCH: "1"})
    assert got == FaultInjection(crash_after_commits=7, dispatch_batch=1)


@pytest.mark.parametrize("raw", ["0", "-1", "x", "1.5"])
def test_anything_else_is_an_error_naming_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match=f"{CRASH_AFTER_COMMITS}='{raw}'"):
        FaultInjection.from_env({CRASH_AFTER_COMMITS: raw})
