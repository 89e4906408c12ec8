"""Tests for daemon.scheduler.model.quantity: k8s quantity acceptance, values, rounding, rendering."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fumarole.daemon.scheduler.model.quantity import (
    QuantityError,
    format_quantity,
    milli_value,
    parse_quantity,
    whole_value,
)

KI = 1024
MAX_BINARY = 2**63 - 1
NANO = Fraction(1, 10**9)

DECIMAL_SUFFIXES = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
BINARY_SUFFIXES = {
    "Ki": KI,
    "Mi": KI**2,
    "Gi": KI**3,
    "Ti": KI**4,
    "Pi": KI**5,
    "Ei": KI**6,
}

# Cases from apimachinery's TestQuantityParse table, with the values it expects.
K8S_TABLE: list[tuple[str, Fraction]] = [
    ("0", Fraction(0)),
    ("0n", Fraction(0)),
    ("0u", Fraction(0)),
    ("0m", Fraction(0)),
    ("0Ki", Fraction(0)),
    ("0k", Fraction(0)),
    ("0Mi", Fraction(0)),
    ("0M", Fraction(0)),
    ("0Gi", Fraction(0)),
    ("0G", Fraction(0)),
    ("0Ti", Fraction(0)),
    ("0T", Fraction(0)),
    ("1", Fraction(1)),
    ("1Ki", Fraction(1024)),
    ("8Ki", Fraction(8 * KI)),
    ("7Mi", Fraction(7 * KI**2)),
    ("6Gi", Fraction(6 * KI**3)),
    ("5Ti", Fraction(5 * KI**4)),
    ("4Pi", Fraction(4 * KI**5)),
    ("3Ei", Fraction(3 * KI**6)),
    ("10Ti", Fraction(10 * KI**4)),
    ("100Ti", Fraction(100 * KI**4)),
    ("5n", Fraction(5, 10**9)),
    ("4u", Fraction(4, 10**6)),
    ("3m", Fraction(3, 10**3)),
    ("9", Fraction(9)),
    ("8k", Fraction(8000)),
    ("50k", Fraction(50000)),
    ("7M", Fraction(7 * 10**6)),
    ("6G", Fraction(6 * 10**9)),
    ("5T", Fraction(5 * 10**12)),
    ("40T", Fraction(40 * 10**12)),
    ("300T", Fraction(300 * 10**12)),
    ("2P", Fraction(2 * 10**15)),
    ("1E", Fraction(10**18)),
    ("1E-3", Fraction(1, 1000)),
    ("1e3", Fraction(1000)),
    ("1E6", Fraction(10**6)),
    ("1e9", Fraction(10**9)),
    ("1E12", Fraction(10**12)),
    ("1e15", Fraction(10**15)),
    ("1E18", Fraction(10**18)),
    ("1e14", Fraction(10**14)),
    ("1e13", Fraction(10**13)),
    ("100.035k", Fraction(100035)),
    ("0.001", Fraction(1, 1000)),
    ("0.0005k", Fraction(1, 2)),
    ("0.005", Fraction(5, 1000)),
    ("0.05", Fraction(5, 100)),
    ("0.5", Fraction(1, 2)),
    ("0.00050k", Fraction(1, 2)),
    ("0.00500", Fraction(5, 1000)),
    ("0.05000", Fraction(5, 100)),
    ("0.50000", Fraction(1, 2)),
    ("0.5e0", Fraction(1, 2)),
    ("0.5e-1", Fraction(5, 100)),
    ("0.5e-2", Fraction(5, 1000)),
    ("10.035M", Fraction(10035000)),
    ("1.2e3", Fraction(1200)),
    ("1.3E+6", Fraction(1300000)),
    ("1.40e9", Fraction(14 * 10**8)),
    ("1.53E12", Fraction(153 * 10**10)),
    ("1.6e15", Fraction(16 * 10**14)),
    ("1.7E18", Fraction(17 * 10**17)),
    ("9.01", Fraction(901, 100)),
    ("8.1k", Fraction(8100)),
    ("7.123456M", Fraction(7123456)),
    ("6.987654321G", Fraction(6987654321)),
    ("5.444T", Fraction(5444 * 10**9)),
    ("40.1T", Fraction(401 * 10**11)),
    ("300.2T", Fraction(3002 * 10**11)),
    ("2.5P", Fraction(25 * 10**14)),
    ("1.01E", Fraction(101 * 10**16)),
    # things that saturate or round
    ("3.001n", 4 * NANO),
    ("1.1E-9", 2 * NANO),
    ("0.0000000001", NANO),
    ("0.0000000005", NANO),
    ("0.00000000050", NANO),
    ("0.5e-9", NANO),
    ("0.9n", NANO),
    ("0.00000012345", 124 * NANO),
    ("0.00000012354", 124 * NANO),
    ("9Ei", Fraction(MAX_BINARY)),
    ("9223372036854775807Ki", Fraction(MAX_BINARY)),
    ("12E", Fraction(12 * 10**18)),
    # fractional binary
    ("100.035Ki", Fraction(10243584, 100)),
    ("0.5Mi", Fraction(KI**2 // 2)),
    ("0.05Gi", Fraction(536870912, 10)),
    ("0.025Ti", Fraction(274877906944, 10)),
    # "things written by trolls"
    ("0.000000000001Ki", 2 * NANO),
    (".001", Fraction(1, 1000)),
    (".0001k", Fraction(1, 10)),
    ("1.", Fraction(1)),
    ("1.G", Fraction(10**9)),
]

# Inputs apimachinery refuses (its own invalid list, plus more).
INVALID = [
    "",
    "1.1.M",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    " 1",
    "1 ",
    "1 Gi",
    "1\tGi",
    "1\n",
    "1.5.5",
    "1gi",
    "1KB",
    "1K",
    "1Kb",
    "--1",
    "+-1",
    "-+1",
    "1e",
    "1E+",
    "1e1.5",
    "1ee3",
    "1e3Ki",
    "1Mi3",
    "1_000",
    "\u0661",  # ARABIC-INDIC DIGIT ONE: not an ASCII digit
    "0x10",
    "1e99999999999999999999",  # exponent does not fit in int64
    "Pi",  # digitless numbers are refused on apimachinery's slow path only
    "Ei",
    "-Ei",
    "e-10",
    "nan",
    "inf",
]


# -------------------------------------------------------------------------------------------
# parsing: the apimachinery table


@pytest.mark.parametrize(("text", "expected"), K8S_TABLE)
def test_parse_matches_apimachinery_table(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(("text", "expected"), K8S_TABLE)
def test_signed_forms_of_the_table(text: str, expected: Fraction) -> None:
    assert parse_quantity("+" + text) == expected
    assert parse_quantity("-" + text) == -expected


@pytest.mark.parametrize("text", INVALID)
def test_invalid_quantities_are_rejected_naming_the_text(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert repr(text) in str(info.value)
    assert info.value.text == text
    assert info.value.reason
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("1 Gi", "unexpected ' ' at offset 1"),
        ("1.5.5", "unexpected '.' at offset 3"),
        ("1KB", "unexpected 'B' at offset 2"),
        ("1e", "unknown suffix 'e'"),
        ("1gi", "unexpected 'g'"),
        ("1e99999999999999999999", "64 bits"),
        ("Ei", "no digits"),
        ("1e5000", "out of range"),
    ],
)
def test_error_messages_say_why(text: str, why: str) -> None:
    with pytest.raises(QuantityError, match="invalid quantity") as info:
        parse_quantity(text)
    assert why in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # apimachinery's scanner turns a missing number into zero on its fast path.
        ("-", Fraction(0)),
        ("+", Fraction(0)),
        (".", Fraction(0)),
        ("-.", Fraction(0)),
        ("m", Fraction(0)),
        ("Gi", Fraction(0)),
        ("Ti", Fraction(0)),
        ("e3", Fraction(0)),
        ("000", Fraction(0)),
        ("-0", Fraction(0)),
        ("0Ei", Fraction(0)),
        ("0e-20", Fraction(0)),
        ("5.", Fraction(5)),
        ("007", Fraction(7)),
        ("2e+2", Fraction(200)),
        ("2E-0", Fraction(2)),
        ("1e+03", Fraction(1000)),
        ("1E", Fraction(10**18)),
        ("18446744073709551616", Fraction(18446744073709551616)),  # decimals are not capped
        ("-8Ei", Fraction(-MAX_BINARY)),  # binary magnitude is capped
        ("1e-1000000", NANO),  # finer than nano rounds away from zero
        ("-1e-12", -NANO),
        ("1e4294967297", Fraction(10)),  # the exponent wraps to int32 as in apimachinery
    ],
)
def test_apimachinery_edge_cases(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


def test_ints_are_exact_and_floats_go_through_repr() -> None:
    assert parse_quantity(3) == 3
    assert parse_quantity(-(10**30)) == -(10**30)
    assert parse_quantity(0.5) == Fraction(1, 2)
    assert parse_quantity(0.1) == Fraction(1, 10)
    assert parse_quantity(1e-05) == Fraction(1, 100000)
    assert parse_quantity(2.5e16) == 25 * 10**15
    assert parse_quantity(-0.0) == 0
    assert parse_quantity(1e-12) == NANO


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, True, None, [1], b"1"])
def test_non_quantities_are_rejected(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_errors_are_not_cached_and_results_are_stable() -> None:
    for _ in range(2):
        with pytest.raises(QuantityError):
            parse_quantity("1KB")
    assert parse_quantity("1.5Gi") is parse_quantity("1.5Gi")


# -------------------------------------------------------------------------------------------
# parsing: properties


@given(
    n=st.integers(min_value=-(10**20), max_value=10**20),
    suffix=st.sampled_from(sorted(DECIMAL_SUFFIXES)),
)
def test_decimal_suffix_multiplies(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}") == n * DECIMAL_SUFFIXES[suffix]


@given(data=st.data(), suffix=st.sampled_from(sorted(BINARY_SUFFIXES)))
def test_binary_suffix_multiplies(data: st.DataObject, suffix: str) -> None:
    limit = MAX_BINARY // BINARY_SUFFIXES[suffix]
    n = data.draw(st.integers(min_value=-limit, max_value=limit))
    assert parse_quantity(f"{n}{suffix}") == n * BINARY_SUFFIXES[suffix]


@given(n=st.integers(min_value=1, max_value=10**6), suffix=st.sampled_from(sorted(BINARY_SUFFIXES)))
def test_binary_quantities_are_capped(n: int, suffix: str) -> None:
    expected = min(n * BINARY_SUFFIXES[suffix], MAX_BINARY)
    assert parse_quantity(f"{n}{suffix}") == expected
    assert parse_quantity(f"-{n}{suffix}") == -expected


@given(
    n=st.integers(min_value=-(10**12), max_value=10**12),
    exponent=st.integers(min_value=-9, max_value=40),
    letter=st.sampled_from(["e", "E"]),
    plus=st.booleans(),
)
def test_decimal_exponents(n: int, exponent: int, letter: str, plus: bool) -> None:
    sign = "+" if plus and exponent >= 0 else ""
    assert parse_quantity(f"{n}{letter}{sign}{exponent}") == n * Fraction(10) ** exponent


@given(
    whole=st.integers(min_value=0, max_value=10**9),
    frac=st.text(alphabet="0123456789", min_size=1, max_size=15),
    suffix=st.sampled_from(sorted(DECIMAL_SUFFIXES)),
    negative=st.booleans(),
)
@example(whole=0, frac="0000000001", suffix="", negative=False)
def test_fractional_decimals_round_up_to_nano(whole: int, frac: str, suffix: str, negative: bool) -> None:
    exact = Fraction(Decimal(f"{whole}.{frac}")) * DECIMAL_SUFFIXES[suffix]
    nanos = exact / NANO
    expected = math.ceil(nanos) * NANO
    sign = "-" if negative else ""
    got = parse_quantity(f"{sign}{whole}.{frac}{suffix}")
    assert got == (-expected if negative else expected)


# -------------------------------------------------------------------------------------------
# milli_value / whole_value


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        ("250n", 1, 1),
        ("1500m", 1500, 2),
        ("1", 1000, 1),
        ("0.5", 500, 1),
        ("100m", 100, 1),
        ("1.5Gi", 1536 * KI**2 * 1000, 1536 * KI**2),
        ("0", 0, 0),
        ("1n", 1, 1),
        ("1000001n", 2, 1),
        ("1000000n", 1, 1),
        ("-250n", -1, -1),  # apimachinery rounds negative values away from zero
        ("-1500m", -1500, -2),
        ("-1.5", -1500, -2),
        ("1E", 10**21, 10**18),
    ],
)
def test_milli_and_whole_values(text: str, milli: int, whole: int) -> None:
    assert milli_value(text) == milli
    assert whole_value(text) == whole


def test_milli_and_whole_values_of_numbers() -> None:
    assert milli_value(2) == 2000
    assert whole_value(2) == 2
    assert milli_value(0.25) == 250
    assert milli_value(0.0001) == 1
    assert whole_value(1.2) == 2
    assert whole_value(-1.2) == -2
    with pytest.raises(QuantityError):
        milli_value("1 cpu")
    with pytest.raises(QuantityError):
        whole_value(math.nan)


@given(n=st.integers(min_value=-(10**15), max_value=10**15))
def test_milli_value_of_milli_strings_is_exact(n: int) -> None:
    assert milli_value(f"{n}m") == n
    assert whole_value(f"{n}m") == (math.ceil(n / 1000) if n >= 0 else -math.ceil(-n / 1000))


# -------------------------------------------------------------------------------------------
# format_quantity


@pytest.mark.parametrize(
    ("amount", "milli", "expected"),
    [
        (28000, True, "28"),
        (500, True, "500m"),
        (1500, True, "1500m"),
        (0, True, "0"),
        (1, True, "1m"),
        (1000, True, "1"),
        (100_000, True, "100"),
        (2_000_000, True, "2k"),
        (2_500_000, True, "2500"),
        (10**21, True, "1E"),
        (10**24, True, "1e21"),
        (-1500, True, "-1500m"),
        (-28000, True, "-28"),
        (4 * KI**3, False, "4Gi"),
        (1536 * KI**2, False, "1536Mi"),
        (10**9, False, "1000000000"),
        (1000, False, "1000"),
        (1024, False, "1Ki"),
        (110, False, "110"),
        (0, False, "0"),
        (8 * KI**6, False, "9223372036854775808"),  # above the binary cap: plain integer
        (MAX_BINARY + 1 - KI**6, False, "7Ei"),
        (KI**7, False, str(KI**7)),
        (-2048, False, "-2Ki"),
        (Fraction(3 * KI), False, "3Ki"),
    ],
)
def test_format_examples(amount: int | Fraction, milli: bool, expected: str) -> None:
    assert format_quantity(amount, milli=milli) == expected


@pytest.mark.parametrize(
    ("amount", "milli", "expected"),
    [
        (1500.0, True, "1500m"),
        (1500.2, True, "1501m"),
        (0.1, True, "1m"),
        (0.5, False, "1"),
        (1.0, False, "1"),
        (1073741824.0, False, "1Gi"),
        (-0.5, False, "-1"),
        (-1500.2, True, "-1501m"),
        (Fraction(1, 3), True, "1m"),
        (0.0, True, "0"),
        (-0.0, False, "0"),
    ],
)
def test_format_rounds_fractions_up_away_from_zero(
    amount: float | Fraction, milli: bool, expected: str
) -> None:
    assert format_quantity(amount, milli=milli) == expected


@pytest.mark.parametrize("bad", [math.nan, math.inf, True, None, "1"])
def test_format_rejects_non_amounts(bad: object) -> None:
    with pytest.raises(QuantityError):
        format_quantity(bad, milli=True)  # type: ignore[arg-type]


@given(n=st.integers(min_value=-(10**30), max_value=10**30))
@example(n=0)
@example(n=10**24)
def test_milli_round_trip(n: int) -> None:
    text = format_quantity(n, milli=True)
    assert parse_quantity(text) * 1000 == n
    assert milli_value(text) == n


@given(
    n=st.one_of(
        st.integers(min_value=-(10**30), max_value=10**30),
        st.builds(
            lambda m, p: m * KI**p,
            st.integers(min_value=-(2**20), max_value=2**20),
            st.integers(min_value=0, max_value=7),
        ),
    )
)
@example(n=MAX_BINARY)
@example(n=MAX_BINARY + 1)
@example(n=-MAX_BINARY - 1)
def test_binary_round_trip(n: int) -> None:
    text = format_quantity(n, milli=False)
    assert parse_quantity(text) == n
    assert whole_value(text) == n


@given(n=st.integers(min_value=-(10**30), max_value=10**30).filter(bool))
def test_milli_formatting_is_canonical(n: int) -> None:
    text = format_quantity(n, milli=True)
    number = text.rstrip("numkMGTPE") if "e" not in text else text.split("e")[0]
    mantissa = int(number)
    # the largest suffix: the mantissa is not a whole multiple of 1000 unless "E" is exhausted
    suffix = text[len(number) :]
    assert mantissa % 1000 != 0 or suffix.startswith("e") or suffix == "E"
    assert suffix in {"m", "", "k", "M", "G", "T", "P", "E"} or suffix.startswith("e")
    # canonical text is a fixed point of parse -> format
    assert format_quantity(parse_quantity(text) * 1000, milli=True) == text


@given(n=st.integers(min_value=-(10**30), max_value=10**30).filter(bool))
def test_binary_formatting_is_canonical(n: int) -> None:
    text = format_quantity(n, milli=False)
    suffix = text[-2:] if text[-1:] == "i" else ""
    mantissa = int(text[: len(text) - len(suffix)])
    assert suffix in {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
    if abs(n) <= MAX_BINARY:
        assert mantissa % 1024 != 0 or suffix == "Ei"
    else:
        assert suffix == ""
    assert format_quantity(parse_quantity(text), milli=False) == text


@given(x=st.floats(min_value=-1e12, max_value=1e12, allow_nan=False))
def test_float_formatting_is_deterministic_ceil_of_repr(x: float) -> None:
    exact = Fraction(repr(x))
    expected = math.ceil(exact) if exact >= 0 else -math.ceil(-exact)
    assert parse_quantity(format_quantity(x, milli=True)) * 1000 == expected
    assert parse_quantity(format_quantity(x, milli=False)) == expected
