"""Resource arithmetic and comparisons against Volcano's definitions (api/resource_info.go).

Part 1: hypothesis properties against a straightforward reference written here from Volcano's
definitions.  Part 2: the observable cases of Volcano's resource_info_test.go tables.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fumarole.daemon.scheduler.model.resources import (
    MIN_RESOURCE,
    Default,
    Resource,
    exceeded_part,
    share,
)

ZERO, INF = Default.ZERO, Default.INFINITY
NAMES = ["pods", "nvidia.com/gpu", "hugepages-1Gi", "example.com/foo"]
MAXF = float("inf")


# --------------------------------------------------------------------------- reference
def ref_le(l: float, r: float) -> bool:
    return l < r or abs(l - r) < MIN_RESOURCE


def ref_less_equal(a: Resource, b: Resource, default: Default) -> bool:
    if not ref_le(a.cpu, b.cpu) or not ref_le(a.memory, b.memory):
        return False
    if default is INF and any(n not in a.scalars for n in b.scalars):
        return False
    for n, v in a.scalars.items():
        if n not in b.scalars:
            if default is INF:
                continue
            rv = 0
        else:
            rv = b.scalars[n]
        if not ref_le(v, rv):
            return False
    return True


def ref_with_dimension(a: Resource, b: Resource, req: Resource) -> tuple[bool, set[str]]:
    bad = set()
    if req.cpu > 0 and a.cpu > b.cpu:
        bad.add("cpu")
    if req.memory > 0 and a.memory > b.memory:
        bad.add("memory")
    if a.scalars:
        for n, q in req.scalars.items():
            if n == "pods":
                continue
            if q > 0 and a.scalars.get(n, 0) > b.scalars.get(n, 0):
                bad.add(n)
    return not bad, bad


def ref_partly_with_dimension(a: Resource, b: Resource, req: Resource) -> tuple[bool, set[str]]:
    ok = set()
    if req.cpu > 0 and ref_le(a.cpu, b.cpu):
        ok.add("cpu")
    if req.memory > 0 and ref_le(a.memory, b.memory):
        ok.add("memory")
    for n, q in req.scalars.items():
        if n == "pods":
            continue
        if q > 0 and ref_le(a.scalars.get(n, 0), b.scalars.get(n, 0)):
            ok.add(n)
    return bool(ok), ok


def ref_diff(a: Resource, b: Resource, default: Default) -> tuple[dict, dict]:
    inc: dict[str, float] = {}
    dec: dict[str, float] = {}
    if a.cpu > b.cpu:
        inc["cpu"] = a.cpu - b.cpu
    else:
        dec["cpu"] = b.cpu - a.cpu
    if a.memory > b.memory:
        inc["memory"] = a.memory - b.memory
    else:
        dec["memory"] = b.memory - a.memory
    fill = 0 if default is ZERO else -1
    for n in set(a.scalars) | set(b.scalars):
        lq = a.scalars.get(n, fill)
        rq = b.scalars.get(n, fill)
        if lq == -1:
            inc[n] = lq
        elif rq == -1:
            dec[n] = rq
        elif lq > rq:
            inc[n] = lq - rq
        else:
            dec[n] = rq - lq
    return inc, dec


def as_dict(r: Resource, keep_zero: bool = False) -> dict[str, float]:
    d = {"cpu": r.cpu, "memory": r.memory, **r.scalars}
    return d if keep_zero else {k: v for k, v in d.items() if v != 0}


def nz(d: dict) -> dict:
    return {k: v for k, v in d.items() if v != 0}


# --------------------------------------------------------------------------- strategies
# Values are multiples of 0.05 so that the 0.1 tolerance is exercised (a difference of 0.05
# is "equal", 0.15 is not).
amount = st.integers(0, 4000).map(lambda x: x / 20)
scalar_maps = st.dictionaries(st.sampled_from(NAMES), amount, max_size=4)
resources = st.builds(Resource, amount, amount, scalar_maps)
int_resources = st.builds(
    Resource,
    st.integers(0, 10**6),
    st.integers(0, 10**12),
    st.dictionaries(st.sampled_from(NAMES), st.integers(0, 10**6), max_size=4),
)


@settings(max_examples=200, deadline=None)
@given(int_resources, int_resources)
def test_add_then_sub_is_identity(a: Resource, b: Resource) -> None:
    got = a.clone().add(b).sub(b)
    assert got == a
    # add does not touch the right operand
    assert b == b.clone()


@settings(max_examples=200, deadline=None)
@given(int_resources, int_resources)
def test_sub_then_add_follows_volcano_nil_scalar_rule(a: Resource, b: Resource) -> None:
    got = a.clone().sub(b).add(b)
    if a.scalars:
        assert got == a
    else:
        # Volcano's sub skips scalars when the left side has no scalar map: the scalars of b
        # survive the round trip.
        expected = Resource(a.cpu, a.memory, b.scalars)
        assert got == expected


@settings(max_examples=300, deadline=None)
@given(resources, resources)
def test_less_equal_matches_reference(a: Resource, b: Resource) -> None:
    for d in (ZERO, INF):
        assert a.less_equal(b, d) is ref_less_equal(a, b, d), d


@settings(max_examples=200, deadline=None)
@given(int_resources, int_resources)
def test_less_equal_of_a_sum(a: Resource, b: Resource) -> None:
    total = a.clone().add(b)
    assert a.less_equal(total, ZERO)
    assert b.less_equal(total, ZERO)
    assert a.less_equal(a, ZERO)
    assert a.less_equal(a, INF)


@settings(max_examples=300, deadline=None)
@given(resources, resources, resources)
def test_less_equal_with_dimension_matches_reference(a: Resource, b: Resource, req: Resource) -> None:
    ok, names = a.less_equal_with_dimension(b, req)
    rok, rnames = ref_with_dimension(a, b, req)
    assert ok is rok
    assert set(names) == rnames
    assert len(names) == len(set(names))


@settings(max_examples=300, deadline=None)
@given(resources, resources, resources)
def test_less_equal_partly_with_dimension_matches_reference(a: Resource, b: Resource, req: Resource) -> None:
    ok, names = a.less_equal_partly_with_dimension(b, req)
    rok, rnames = ref_partly_with_dimension(a, b, req)
    assert ok is rok
    assert set(names) == rnames


@settings(max_examples=300, deadline=None)
@given(resources, resources)
def test_diff_matches_reference(a: Resource, b: Resource) -> None:
    for d in (ZERO, INF):
        inc, dec = a.diff(b, d)
        rinc, rdec = ref_diff(a, b, d)
        assert nz(as_dict(inc)) == nz(rinc), d
        assert nz(as_dict(dec)) == nz(rdec), d


@settings(max_examples=200, deadline=None)
@given(int_resources, int_resources)
def test_exceeded_part_is_positive_part_over_union(a: Resource, b: Resource) -> None:
    got = as_dict(exceeded_part(a, b))
    names = {"cpu", "memory"} | set(a.scalars) | set(b.scalars)
    ad, bd = as_dict(a, True), as_dict(b, True)
    expected = {n: ad.get(n, 0) - bd.get(n, 0) for n in names if ad.get(n, 0) - bd.get(n, 0) > 0}
    assert got == expected


@settings(max_examples=200, deadline=None)
@given(resources, resources)
def test_min_dimension_resource_matches_definition(a: Resource, b: Resource) -> None:
    for d in (ZERO, INF):
        got = a.clone().min_dimension_resource(b, d)
        assert got.cpu == min(a.cpu, b.cpu)
        assert got.memory == min(a.memory, b.memory)
        # the left side keeps its scalar names; none is added from the right
        assert set(got.scalars) == set(a.scalars)
        for n, v in a.scalars.items():
            if n in b.scalars:
                assert got.scalars[n] == min(v, b.scalars[n])
            elif d is ZERO:
                assert got.scalars[n] == 0
            else:
                assert got.scalars[n] == v


@settings(max_examples=200, deadline=None)
@given(resources)
def test_is_empty_and_resource_names(a: Resource) -> None:
    non_pods = [v for n, v in a.scalars.items() if n != "pods"]
    expected_empty = a.cpu < 0.1 and a.memory < 0.1 and all(v < 0.1 for v in non_pods)
    assert a.is_empty() is expected_empty
    expected_names = {n for n, v in as_dict(a, True).items() if v >= 0.1}
    assert set(a.resource_names()) == expected_names
    # pods is ignored by is_empty only, never by resource_names
    with_pods = a.clone()
    with_pods.scalars["pods"] = 5
    assert with_pods.is_empty() is expected_empty
    assert "pods" in with_pods.resource_names()


@given(st.floats(0, 1e6, allow_nan=False), st.floats(0, 1e6, allow_nan=False))
def test_share_definition(l: float, r: float) -> None:
    if r == 0:
        assert share(l, r) == (0.0 if l == 0 else 1.0)
    else:
        assert share(l, r) == pytest.approx(l / r)


# --------------------------------------------------------------------------- worked rules
def test_tolerance_of_one_tenth() -> None:
    assert Resource(1000.05).less_equal(Resource(1000))
    assert Resource(1000, 1000.09).less_equal(Resource(1000, 1000))
    assert not Resource(1000.2).less_equal(Resource(1000))
    assert Resource(0, 0, {"nvidia.com/gpu": 1000.05}).less_equal(Resource(0, 0, {"nvidia.com/gpu": 1000}))
    assert Resource(1000.05).equal(Resource(1000))
    assert not Resource(1000.2).equal(Resource(1000))


def test_less_equal_missing_scalar_rules() -> None:
    gpu = Resource(1, 1, {"nvidia.com/gpu": 1000})
    plain = Resource(1, 1)
    # Zero: a scalar missing on the right counts as 0
    assert not gpu.less_equal(plain, ZERO)
    # Infinity: a scalar missing on the right is unlimited ...
    assert gpu.less_equal(plain, INF)
    # ... but a scalar present on the right and absent on the left makes it false
    assert not plain.less_equal(gpu, INF)
    assert plain.less_equal(gpu, ZERO)


def test_less_equal_with_dimension_only_requested_dims_pods_ignored_strict() -> None:
    used = Resource(3000, 8 * 1024**3, {"pods": 50, "nvidia.com/gpu": 2000})
    cap = Resource(2000, 4 * 1024**3, {"pods": 10, "nvidia.com/gpu": 4000})
    # only memory requested: cpu over cap does not matter
    ok, names = used.less_equal_with_dimension(cap, Resource(0, 1))
    assert (ok, names) == (False, ["memory"])
    # only gpu and pods requested: pods is ignored, gpu fits
    ok, names = used.less_equal_with_dimension(cap, Resource(0, 0, {"pods": 1, "nvidia.com/gpu": 1000}))
    assert (ok, names) == (True, [])
    # strict: no tolerance (1000.05 > 1000 fails here though LessEqual accepts it)
    ok, names = Resource(1000.05).less_equal_with_dimension(Resource(1000), Resource(1))
    assert (ok, names) == (False, ["cpu"])
    # nothing requested: always true
    assert Resource(10**9).less_equal_with_dimension(Resource(), Resource()) == (True, [])


def test_less_equal_partly_with_dimension() -> None:
    a = Resource(3000, 1024, {"nvidia.com/gpu": 1000})
    b = Resource(2000, 2048, {"nvidia.com/gpu": 500})
    ok, names = a.less_equal_partly_with_dimension(b, Resource(1, 1, {"nvidia.com/gpu": 1, "pods": 1}))
    assert ok and names == ["memory"]
    ok, names = a.less_equal_partly_with_dimension(b, Resource(1, 0, {"nvidia.com/gpu": 1}))
    assert not ok and names == []
    assert a.less_equal_partly_with_dimension(b, None) == (False, [])


def test_diff_with_infinity_marker() -> None:
    a = Resource(1000, 2000, {"scalar.test/scalar1": 1000})
    b = Resource(2000, 1000)
    inc, dec = a.diff(b, INF)
    assert as_dict(inc) == {"memory": 1000}
    assert as_dict(dec) == {"cpu": 1000, "scalar.test/scalar1": -1}
    inc, dec = b.diff(a, INF)
    assert as_dict(inc) == {"cpu": 1000, "scalar.test/scalar1": -1}
    assert as_dict(dec) == {"memory": 1000}


def test_exceeded_part_none_and_scalars() -> None:
    left = Resource(5000, 100, {"nvidia.com/gpu": 3000, "pods": 2})
    right = Resource(2000, 200, {"nvidia.com/gpu": 1000, "example.com/foo": 7})
    assert as_dict(exceeded_part(left, right)) == {"cpu": 3000, "nvidia.com/gpu": 2000, "pods": 2}
    assert exceeded_part(left, None) is left
    assert exceeded_part(None, right) == Resource()


def test_min_dimension_resource_right_has_no_scalars() -> None:
    a = Resource(4000, 4000, {"scalar.test/scalar1": 1000, "hugepages-test": 2000})
    got = a.clone().min_dimension_resource(Resource(MAXF, 2000), ZERO)
    assert as_dict(got, True) == {"cpu": 4000, "memory": 2000, "scalar.test/scalar1": 0, "hugepages-test": 0}
    got = a.clone().min_dimension_resource(Resource(MAXF, 2000), INF)
    assert as_dict(got, True) == {
        "cpu": 4000,
        "memory": 2000,
        "scalar.test/scalar1": 1000,
        "hugepages-test": 2000,
    }


def test_is_empty_ignores_pods_only() -> None:
    assert Resource(0, 0, {"pods": 1}).is_empty()
    assert Resource(0.05, 0.05, {"pods": 3, "nvidia.com/gpu": 0.05}).is_empty()
    assert not Resource(0, 0, {"pods": 1, "nvidia.com/gpu": 1}).is_empty()
    assert not Resource(0.1).is_empty()


def test_resource_names_order_and_threshold() -> None:
    r = Resource(0.1, 0.09, {"zz/x": 1, "pods": 1, "aa/y": 0.05, "hugepages-1Gi": 3})
    assert r.resource_names() == ["cpu", "hugepages-1Gi", "pods", "zz/x"]


# --------------------------------------------------------------------------- Volcano's tables
S1, HP = "scalar.test/scalar1", "hugepages-test"


def RS(cpu: float = 0, mem: float = 0, scalars: dict[str, float] | None = None) -> Resource:
    return Resource(cpu, mem, scalars or {})


def test_new_resource_table() -> None:
    assert Resource.from_resource_list({}) == Resource()
    r = Resource.from_resource_list(
        {
            "cpu": "4m",
            "memory": "2000",
            "scalar.test/scalar1": "1",
            "hugepages-test": "2",
            "ephemeral-storage": "3",
        }
    )
    assert as_dict(r) == {"cpu": 4, "memory": 2000, S1: 1000, HP: 2000, "ephemeral-storage": 3000}
    # pods is a whole count, count/* quota names are ignored
    r = Resource.from_resource_list({"pods": "110", "count/pods": "5"})
    assert as_dict(r) == {"pods": 110}


def test_set_max_resource_table() -> None:
    r = RS()
    r.set_max_resource(RS(4000, 2000, {S1: 1, HP: 2}))
    assert as_dict(r) == {"cpu": 4000, "memory": 2000, S1: 1, HP: 2}
    r = RS(4000, 4000, {S1: 1, HP: 2})
    r.set_max_resource(RS(4000, 2000, {S1: 4, HP: 5}))
    assert as_dict(r) == {"cpu": 4000, "memory": 4000, S1: 4, HP: 5}


@pytest.mark.parametrize(
    ("res", "name", "expected"),
    [
        (RS(), "cpu", True),
        (RS(4000, 4000, {S1: 4, HP: 5}), "cpu", False),
        (RS(4000, 4000, {S1: 0, HP: 5}), S1, True),
    ],
)
def test_is_zero_table(res: Resource, name: str, expected: bool) -> None:
    assert res.is_zero(name) is expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (RS(), RS(4000, 2000, {S1: 1, HP: 2}), {"cpu": 4000, "memory": 2000, S1: 1, HP: 2}),
        (
            RS(4000, 4000, {S1: 1, HP: 2}),
            RS(4000, 2000, {S1: 4, HP: 5}),
            {"cpu": 8000, "memory": 6000, S1: 5, HP: 7},
        ),
        (
            RS(4000, 4000, {S1: 1}),
            RS(4000, 2000, {S1: 4, HP: 5}),
            {"cpu": 8000, "memory": 6000, S1: 5, HP: 5},
        ),
    ],
)
def test_add_table(a: Resource, b: Resource, expected: dict) -> None:
    assert as_dict(a.add(b)) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (RS(4000, 2000, {S1: 1, HP: 2}), RS(), {"cpu": 4000, "memory": 2000, S1: 1, HP: 2}),
        (
            RS(4000, 4000, {S1: 1000, HP: 2000}),
            RS(3000, 2000, {S1: 500, HP: 1000}),
            {"cpu": 1000, "memory": 2000, S1: 500, HP: 1000},
        ),
    ],
)
def test_sub_table(a: Resource, b: Resource, expected: dict) -> None:
    assert as_dict(a.sub(b)) == expected


DIFF_ZERO = [
    (RS(), RS(), {}, {}),
    (RS(1000, 2000), RS(), {"cpu": 1000, "memory": 2000}, {}),
    (RS(), RS(1000, 2000), {}, {"cpu": 1000, "memory": 2000}),
    (RS(1000, 2000, {S1: 1000}), RS(2000, 1000), {"memory": 1000, S1: 1000}, {"cpu": 1000}),
    (RS(2000, 1000), RS(1000, 2000, {S1: 1000}), {"cpu": 1000}, {"memory": 1000, S1: 1000}),
    (RS(1000, 2000, {S1: 3000}), RS(2000, 1000, {S1: 1000}), {"memory": 1000, S1: 2000}, {"cpu": 1000}),
]


@pytest.mark.parametrize(("a", "b", "inc", "dec"), DIFF_ZERO)
def test_diff_zero_table(a: Resource, b: Resource, inc: dict, dec: dict) -> None:
    i, d = a.diff(b, ZERO)
    assert as_dict(i) == inc
    assert as_dict(d) == dec


BIG_A = RS(4000, 4000, {S1: 1000, HP: 2000})
BIG_B = RS(8000, 8000, {S1: 4000, HP: 5000})
LESS_ZERO = [
    (RS(), RS(), False),
    (RS(), RS(4000, 2000, {S1: 1000, HP: 2000}), True),
    (BIG_A, BIG_B, True),
    (RS(4000, 4000, {S1: 5000, HP: 2000}), BIG_B, False),
    (RS(9000, 4000, {S1: 1000, HP: 2000}), BIG_B, False),
]
LESS_INF = [
    (RS(1000, 1000, {S1: 1000, HP: 2000}), RS(2000, 2000, {HP: 3000}), True),
    (RS(1000, 1000, {HP: 1000}), RS(2000, 2000, {S1: 1000, HP: 2000}), False),
    (RS(1000, 1000, {HP: 2000}), RS(2000, 2000, {S1: 1000, HP: 2000}), False),
]


@pytest.mark.parametrize(("a", "b", "expected"), LESS_ZERO)
def test_less_zero_table(a: Resource, b: Resource, expected: bool) -> None:
    assert a.less(b, ZERO) is expected


@pytest.mark.parametrize(("a", "b", "expected"), LESS_INF)
def test_less_infinity_table(a: Resource, b: Resource, expected: bool) -> None:
    assert a.less(b, INF) is expected


FULL = RS(4000, 2000, {S1: 1000, HP: 2000})
LE_ZERO = [
    (RS(), RS(), True),
    (RS(), FULL, True),
    (FULL, RS(), False),
    (BIG_A, BIG_B, True),
    (RS(4000, 8000, {S1: 1000, HP: 2000}), BIG_B, True),
    (RS(4000, 4000, {S1: 4000, HP: 2000}), BIG_B, True),
    (RS(4000, 4000, {S1: 5000, HP: 2000}), BIG_B, False),
    (RS(9000, 4000, {S1: 1000, HP: 2000}), BIG_B, False),
]
LE_INF = [
    (RS(), RS(), True),
    (RS(), FULL, False),
    (FULL, RS(), False),
    (RS(4000, 2000), FULL, False),
    (FULL, RS(4000, 2000), True),
]


@pytest.mark.parametrize(("a", "b", "expected"), LE_ZERO)
def test_less_equal_zero_table(a: Resource, b: Resource, expected: bool) -> None:
    assert a.less_equal(b, ZERO) is expected


@pytest.mark.parametrize(("a", "b", "expected"), LE_INF)
def test_less_equal_infinity_table(a: Resource, b: Resource, expected: bool) -> None:
    assert a.less_equal(b, INF) is expected


LE_DIM = [
    (RS(5000, 4000), RS(4000, 2000, {S1: 1000}), RS(1000), False, ["cpu"]),
    (RS(3000, 3000), RS(4000, 2000), RS(0, 1000), False, ["memory"]),
    (RS(4, 4000), RS(), RS(), True, []),
    (
        RS(4, 4000, {"nvidia.com/gpu": 1}),
        RS(8, 8000),
        RS(4, 2000, {"nvidia.com/gpu": 1}),
        False,
        ["nvidia.com/gpu"],
    ),
    (
        RS(10, 4000, {"nvidia.com/gpu": 1}),
        RS(100, 8000, {"nvidia.com/A100": 1}),
        RS(10, 4000, {"nvidia.com/gpu": 0, "nvidia.com/A100": 1, "scalar": 1}),
        True,
        [],
    ),
    (
        RS(110, 4000, {"nvidia.com/gpu": 1, "nvidia.com/A100": 1, "scalar": 1}),
        RS(100, 8000, {"nvidia.com/A100": 1, "scalar": 1}),
        RS(0, 4000, {"nvidia.com/gpu": 0, "nvidia.com/A100": 1, "scalar": 1}),
        True,
        [],
    ),
]


@pytest.mark.parametrize(("a", "b", "req", "ok", "names"), LE_DIM)
def test_less_equal_with_dimension_table(
    a: Resource, b: Resource, req: Resource, ok: bool, names: list
) -> None:
    got_ok, got_names = a.less_equal_with_dimension(b, req)
    assert got_ok is ok
    assert sorted(got_names) == sorted(names)


def test_less_equal_with_dimension_nil_cases() -> None:
    # req nil: LessEqualWithResourcesName(rr, Zero)
    assert RS().less_equal_with_dimension(RS(), None) == (True, [])
    ok, names = RS(5000, 4000).less_equal_with_dimension(RS(), None)
    assert not ok and sorted(names) == ["cpu", "memory"]
    # rr nil: false with the left's resource names
    ok, names = RS(5000, 0, {"nvidia.com/gpu": 1000}).less_equal_with_dimension(None, RS(1))
    assert not ok and sorted(names) == ["cpu", "nvidia.com/gpu"]


PART_ZERO = [
    (RS(), RS(), False),
    (RS(), RS(2000, 2000, {S1: 1000, HP: 2000}), True),
    (RS(2000, 2000, {S1: 1000, HP: 2000}), RS(), False),
    (RS(2000, 2000, {S1: 1000, HP: 2000}), RS(4000, 2000, {S1: 1000, HP: 2000}), True),
    (RS(2000, 2000, {S1: 1000, HP: 2000}), RS(2000, 4000, {S1: 1000, HP: 2000}), True),
    (RS(2000, 2000, {S1: 1000, HP: 2000}), RS(2000, 2000, {S1: 2000, HP: 2000}), True),
    (RS(2000, 2000, {HP: 2000}), RS(2000, 2000, {S1: 1000, HP: 2000}), True),
    (RS(4000, 4000, {S1: 1000, HP: 2000}), RS(2000, 2000, {S1: 1000, HP: 2000}), False),
    (RS(2000, 2000, {S1: 1000, HP: 2000}), RS(2000, 2000, {HP: 2000}), False),
]


@pytest.mark.parametrize(("a", "b", "expected"), PART_ZERO)
def test_less_partly_zero_table(a: Resource, b: Resource, expected: bool) -> None:
    assert a.less_partly(b, ZERO) is expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (RS(2000, 2000, {HP: 2000}), RS(2000, 2000, {S1: 1000, HP: 2000}), False),
        (RS(2000, 2000, {S1: 1000, HP: 2000}), RS(2000, 2000, {HP: 2000}), True),
    ],
)
def test_less_partly_infinity_table(a: Resource, b: Resource, expected: bool) -> None:
    assert a.less_partly(b, INF) is expected


LEP_ZERO = [
    (RS(), RS(), True),
    (RS(), RS(2000, 2000, {S1: 1000, HP: 2000}), True),
    (RS(2000, 2000, {S1: 1000, HP: 2000}), RS(), False),
    (RS(2000, 2000, {S1: 1000, HP: 2000}), RS(4000, 2000, {S1: 1000, HP: 2000}), True),
    (RS(2000, 2000, {S1: 1000, HP: 2000}), RS(2000, 4000, {S1: 1000, HP: 2000}), True),
    (RS(2000, 2000, {S1: 1000, HP: 2000}), RS(2000, 2000, {S1: 2000, HP: 2000}), True),
    (RS(2000, 2000, {HP: 2000}), RS(2000, 2000, {S1: 1000, HP: 2000}), True),
    (RS(4000, 4000, {S1: 1000, HP: 2000}), RS(2000, 2000, {S1: 1000, HP: 2000}), True),
    (RS(2000, 2000, {S1: 1000, HP: 2000}), RS(2000, 2000, {HP: 2000}), True),
]


@pytest.mark.parametrize(("a", "b", "expected"), LEP_ZERO)
def test_less_equal_partly_zero_table(a: Resource, b: Resource, expected: bool) -> None:
    assert a.less_equal_partly(b, ZERO) is expected


def test_less_equal_partly_infinity_table() -> None:
    assert RS(2000, 2000, {HP: 2000}).less_equal_partly(RS(2000, 2000, {S1: 1000, HP: 2000}), INF)
    assert RS(2000, 2000, {S1: 1000, HP: 2000}).less_equal_partly(RS(2000, 2000, {HP: 2000}), INF)
    # all dims strictly greater: nothing is partly <=
    assert not RS(5000, 5000, {HP: 3000}).less_equal_partly(RS(2000, 2000, {HP: 2000}), INF)


G = "nvidia.com/gpu"
LEPD = [
    (RS(1000), RS(2000), None, False, []),
    (RS(3000), RS(2000), RS(4000), False, []),
    (RS(1000), RS(2000), RS(500), True, ["cpu"]),
    (RS(0, 1024), RS(0, 1024), RS(0, 512), True, ["memory"]),
    (RS(0, 0, {G: 2}), RS(0, 0, {G: 4}), RS(0, 0, {G: 1}), True, [G]),
    (RS(0, 0, {G: 4}), RS(0, 0, {G: 4}), RS(0, 0, {G: 2}), True, [G]),
    (RS(3000, 2048, {G: 5}), RS(2000, 1024, {G: 4}), RS(1000, 512, {G: 1}), False, []),
    (
        RS(0, 0, {"rdma": 2, "fpga": 2}),
        RS(0, 0, {"rdma": 2}),
        RS(1000, 512, {"rdma": 1, "fpga": 1, G: 2}),
        True,
        ["cpu", "memory", "rdma", G],
    ),
    (
        RS(0, 0, {"rdma": 1, "fpga": 2, G: 2}),
        RS(0, 0, {"rdma": 2, "fpga": 2}),
        RS(1000, 512, {G: 2, "rdma": 1, "fpga": 1}),
        True,
        ["cpu", "memory", "rdma", "fpga"],
    ),
]


@pytest.mark.parametrize(("a", "b", "req", "ok", "names"), LEPD)
def test_less_equal_partly_with_dimension_table(
    a: Resource, b: Resource, req: Resource | None, ok: bool, names: list
) -> None:
    got_ok, got_names = a.less_equal_partly_with_dimension(b, req)
    assert got_ok is ok
    assert sorted(got_names) == sorted(names)


@pytest.mark.parametrize(
    ("a", "b", "req", "ok", "names"),
    [
        (RS(1000), RS(500), None, False, []),
        (RS(2000), RS(1000), RS(1000), True, ["cpu"]),
        (RS(0, 0, {G: 2}), RS(0, 0, {G: 1}), RS(0, 0, {G: 1}), True, [G]),
        (RS(2000, 2048), RS(1000, 1024), RS(1000, 1024), True, ["cpu", "memory"]),
        (RS(1000, 2048), RS(1000, 1024), RS(1000), False, []),
        (RS(1000, 1024), RS(2000, 2048), RS(1000, 1024), False, []),
        (RS(0, 0, {G: 2}), None, RS(0, 0, {G: 1}), True, [G]),
    ],
)
def test_greater_partly_with_dimension_table(
    a: Resource, b: Resource | None, req: Resource | None, ok: bool, names: list
) -> None:
    got_ok, got_names = a.greater_partly_with_dimension(b, req)
    assert got_ok is ok
    assert sorted(got_names) == sorted(names)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (RS(), RS(), True),
        (RS(2000, 2000, {}), RS(2000, 2000, {S1: 0}), True),
        (RS(2000, 2000, {HP: 2000}), RS(2000, 2000, {HP: 2000}), True),
        (RS(), RS(2000, 4000, {S1: 1000, HP: 2000}), False),
    ],
)
def test_equal_table(a: Resource, b: Resource, expected: bool) -> None:
    assert a.equal(b, ZERO) is expected


MIN_ZERO = [
    (
        RS(4000, 2000, {S1: 1, HP: 2}),
        RS(3000, 2000, {S1: 0, HP: 0}),
        {"cpu": 3000, "memory": 2000, S1: 0, HP: 0},
    ),
    (
        RS(4000, 4000, {S1: 1000, HP: 2000}),
        RS(5000, 2000, {S1: 0, HP: 3000}),
        {"cpu": 4000, "memory": 2000, S1: 0, HP: 2000},
    ),
    (RS(4000, 2000, {S1: 1, HP: 2}), RS(3000, 2000, {S1: 0}), {"cpu": 3000, "memory": 2000, S1: 0, HP: 0}),
    (RS(4000, 4000, {S1: 1000, HP: 2000}), RS(MAXF, 2000), {"cpu": 4000, "memory": 2000, S1: 0, HP: 0}),
]


@pytest.mark.parametrize(("a", "b", "expected"), MIN_ZERO)
def test_min_dimension_zero_table(a: Resource, b: Resource, expected: dict) -> None:
    assert as_dict(a.min_dimension_resource(b, ZERO), True) == expected


def test_min_dimension_infinity_table() -> None:
    got = RS(4000, 2000, {S1: 1, HP: 2}).min_dimension_resource(RS(3000, 2000, {S1: 0}), INF)
    assert as_dict(got, True) == {"cpu": 3000, "memory": 2000, S1: 0, HP: 2}


LEWN_ZERO = [
    (RS(), RS(), []),
    (RS(), FULL, []),
    (FULL, RS(), ["cpu", "memory", S1, HP]),
    (BIG_A, BIG_B, []),
    (RS(4000, 4000, {S1: 5000, HP: 2000}), BIG_B, [S1]),
    (RS(9000, 4000, {S1: 1000, HP: 2000}), BIG_B, ["cpu"]),
]


@pytest.mark.parametrize(("a", "b", "expected"), LEWN_ZERO)
def test_less_equal_with_names_zero_table(a: Resource, b: Resource, expected: list) -> None:
    ok, names = a.less_equal_with_names(b, ZERO)
    assert sorted(names) == sorted(expected)
    assert ok is (not expected)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(RS(), RS(), []), (RS(), FULL, []), (FULL, RS(), ["cpu", "memory"])],
)
def test_less_equal_with_names_infinity_table(a: Resource, b: Resource, expected: list) -> None:
    ok, names = a.less_equal_with_names(b, INF)
    assert sorted(names) == sorted(expected)
    assert ok is (not expected)


def test_multi_and_fit_delta() -> None:
    r = RS(1000, 2000, {G: 3000}).multi(0.5)
    assert as_dict(r) == {"cpu": 500, "memory": 1000, G: 1500}
    free = RS(4000, 4000, {G: 1000})
    free.fit_delta(RS(1000, 0, {G: 2000}))
    assert math.isclose(free.cpu, 4000 - 1000 - 0.1)
    assert free.memory == 4000  # not requested: untouched
    assert math.isclose(free.scalars[G], 1000 - 2000 - 0.1)


def test_scalar_resource_names_from_resource_list() -> None:
    r = Resource.from_resource_list(
        {
            "example.com/foo": "2",
            "hugepages-2Mi": "4Mi",
            "attachable-volumes-aws-ebs": "39",
            "requests.example.com/foo": "1",  # a quota name, not a resource
            "storage": "1Gi",  # unprefixed native names other than cpu/memory/pods/ephemeral-storage
            "count/pods": "3",
        }
    )
    assert as_dict(r) == {
        "example.com/foo": 2000,
        "hugepages-2Mi": 4 * 1024 * 1024 * 1000,
        "attachable-volumes-aws-ebs": 39000,
    }


def test_kubernetes_io_prefixed_names_are_scalar_resources() -> None:
    r = Resource.from_resource_list({"kubernetes.io/batch-cpu": "1000", "example.kubernetes.io/x": "1"})
    assert as_dict(r) == {"kubernetes.io/batch-cpu": 1000000, "example.kubernetes.io/x": 1000}
