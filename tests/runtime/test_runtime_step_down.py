"""What makes a leader of a shared log step down rather than fail: a leading section stopped by a
refused write (FencedError), alone or with the other writes in flight that failed with it, and
nothing else (daemon/runtime/shared_log.py `refusal_in`).  The step-down itself runs against a
real PostgreSQL server in tests/e2e/test_e2e_pg_faults.py and tests/e2e/test_e2e_postgres.py."""

from __future__ import annotations

from fumarole.daemon.runtime.shared_log import refusal_in
from fumarole.store.log import FencedError, LogError

REFUSED = FencedError("stale leader: an append of epoch 1 refused, the current epoch is 2")


def test_a_refused_write_alone_or_nested_is_a_lost_term() -> None:
    assert refusal_in(REFUSED) is REFUSED
    nested = BaseExceptionGroup("leading", [ExceptionGroup("writer", [REFUSED])])
    assert refusal_in(nested) is REFUSED


def test_other_writes_failing_with_it_are_part_of_the_same_lost_term() -> None:
    group = ExceptionGroup("leading", [LogError("write failed"), ExceptionGroup("w", [REFUSED])])
    assert refusal_in(group) is REFUSED


def test_anything_else_is_not_mistaken_for_a_lost_term() -> None:
    assert refusal_in(LogError("the database is gone")) is None
    assert refusal_in(ExceptionGroup("leading", [REFUSED, ValueError("a bug")])) is None
    assert refusal_in(ExceptionGroup("leading", [OSError(28, "No space left on device")])) is None
