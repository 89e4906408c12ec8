"""KeptSum (framework/kept_sum.py): a kept sum equals the cold sum of its parts, scalar names
included, and says when it cannot stand in for it."""

from __future__ import annotations

from fumarole.daemon.scheduler.framework.kept_sum import KeptSum, exact
from fumarole.daemon.scheduler.model.resources import Resource


def cold(parts: list[Resource]) -> Resource:
    total = Resource()
    for p in parts:
        total.add(p)
    return total


def test_parts_replaced_and_dropped_leave_the_cold_sum_with_its_scalar_names() -> None:
    a, b = object(), object()
    s = KeptSum()
    s.put("x", a, "Inqueue", Resource(1000, 2048, {"gpu": 0}))
    s.put("y", b, "Inqueue", Resource(500, 1024))
    assert s.holds("x", a, "Inqueue") and not s.holds("x", b, "Inqueue") and not s.holds("x", a, "Running")
    # A name held at 0 stays, as adding the part would leave it.
    assert (s.total.cpu, s.total.memory, s.total.scalars) == (1500, 3072, {"gpu": 0})
    s.put("x", a, "Running", None)  # the job's part is now nothing: its name leaves with it
    assert (s.total.cpu, s.total.memory, s.total.scalars) == (500, 1024, {})
    s.put("z", a, "Inqueue", Resource(2000, 0, {"pods": 3}))
    s.keep_only(["z"])
    expected = cold([Resource(2000, 0, {"pods": 3})])
    assert (s.total.cpu, s.total.memory, s.total.scalars) == (expected.cpu, expected.memory, expected.scalars)
    assert set(s.parts) == {"z"} and s.usable()


def test_the_part_kept_is_a_copy() -> None:
    r = Resource(1000, 0, {"pods": 1})
    s = KeptSum()
    s.put("x", object(), "", r)
    r.cpu, r.scalars["pods"] = 5, 7  # the job's own figure changes in place later
    s.keep_only([])
    assert (s.total.cpu, s.total.scalars) == (0, {})


def test_not_usable_with_two_scalar_names_or_past_two_to_the_53() -> None:
    s = KeptSum()
    s.put("x", object(), "", Resource(1, 1, {"a": 1}))
    assert s.usable()
    s.put("y", object(), "", Resource(1, 1, {"b": 1}))
    assert not s.usable()  # a cold sum's name order may differ from the kept one's
    big = KeptSum()
    big.put("x", object(), "", Resource(float(2**53), 0))
    assert not big.usable()


def test_exact_parts_are_non_negative_integers() -> None:
    assert exact(Resource(1000, 2**30, {"pods": 2}))
    assert not exact(Resource(0.5, 0))
    assert not exact(Resource(0, 0, {"gpu": -1}))
