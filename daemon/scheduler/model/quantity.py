"""Kubernetes resource quantities: exact parsing, k8s rounding, and canonical rendering."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "QuantityError",
    "format_quantity",
    "milli_value",
    "parse_quantity",
    "whole_value",
]

# Acceptance follows k8s.io/apimachinery/pkg/api/resource ParseQuantity exactly:
#
#   <quantity>        ::= <signedNumber><suffix>
#   <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
#   <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
#   <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
#   <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
#   <decimalExponent> ::= "e" <signedInt> | "E" <signedInt>
#
# plus the quirks of its hand-written scanner, which this module reproduces on purpose:
#   * the number may have no digits at all ("", "+", "-", ".", "-." before a suffix), which
#     means zero: "-", "m", "Gi" and "e3" parse as 0, while "" is rejected; a digitless
#     number is rejected only where apimachinery takes its slow path ("Pi", "Ei", and
#     decimal scales below 1e-9 such as "e-10");
#   * "1." and "1.G" are accepted;
#   * "E" alone is the exa suffix; "e"/"E" followed by a signed integer is an exponent, and
#     the exponent is truncated to int32 the way apimachinery does;
#   * the value keeps full precision down to 1e-9 and a finer non-zero value is rounded
#     away from zero to the next nano ("0.9n" is 1n, "1e-12" is 1n);
#   * a binarySI quantity is capped in magnitude at 2**63 - 1 ("8Ei" and "9Ei" parse as
#     2**63 - 1); decimal quantities are not capped.
# Deliberate differences: a decimal scale beyond 10**_MAX_SCALE and a number with more than
# _MAX_DIGITS digits are rejected (apimachinery accepts "1e2000000000", whose value no
# scheduler can use, and Python caps int() of long digit strings).
_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)0*(?P<num>[0-9]*)(?:\.(?P<frac>[0-9]*))?(?P<suffix>[eEinumkKMGTP]*[+-]?[0-9]*)",
    re.ASCII,
)
_EXPONENT_RE = re.compile(r"[eE](?P<exp>[+-]?[0-9]+)", re.ASCII)

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_FOR_DECIMAL_EXPONENT: dict[int, str] = {exp: sfx for sfx, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIX_BY_POWER: tuple[str, ...] = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")

_NANO = 9
_MAX_BINARY = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
_MAX_SCALE = 1000
_MAX_DIGITS = 1000
_CACHE_SIZE = 8192


class QuantityError(ValueError):
    """A value that is not a valid Kubernetes quantity; the message names the text and why."""

    def __init__(self, text: object, reason: str) -> None:
        self.text = text
        self.reason = reason
        super().__init__(f"invalid quantity {text!r}: {reason}")


def parse_quantity(value: str | int | float) -> Fraction:
    """Return the exact value of a Kubernetes quantity as apimachinery's ParseQuantity holds it.

    Strings follow the Kubernetes grammar (see the module notes: nano rounding away from zero,
    the binarySI cap at 2**63 - 1, and apimachinery's accepted oddities). An int is exact.
    A float is read through its shortest repr, so 0.5 is "0.5" and 1e-05 is "1e-05"; NaN and
    infinities are rejected. Booleans and other types raise QuantityError.
    """
    if isinstance(value, str):
        return _parse_string(value)
    if isinstance(value, bool):
        raise QuantityError(value, "a boolean is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return _parse_string(_float_text(value))
    raise QuantityError(value, f"expected str, int or float, got {type(value).__name__}")


def milli_value(value: str | int | float) -> int:
    """Return the quantity in milli-units as Quantity.MilliValue() does: ceil(q * 1000).

    Rounding is "up" in apimachinery's sense, away from zero: "250n" is 1, "-250n" is -1.
    Unlike Go, the result is an unbounded Python int and never overflows.
    """
    if isinstance(value, str):
        return _milli_string(value)
    return _round_up(parse_quantity(value) * 1000)


def whole_value(value: str | int | float) -> int:
    """Return the quantity in whole units as Quantity.Value() does: rounded up away from zero.

    "1500m" is 2, "-1500m" is -2, "1n" is 1.
    """
    if isinstance(value, str):
        return _whole_string(value)
    return _round_up(parse_quantity(value))


def format_quantity(amount: int | float | Fraction, *, milli: bool) -> str:
    """Render an amount the way Kubernetes would print it, so that parsing it gives it back.

    milli=True: `amount` counts milli-units (cpu millicores, scalar resources in milli-units)
    and renders in DecimalSI canonical form, the largest power-of-1000 suffix that keeps an
    integer mantissa: 28000 -> "28", 500 -> "500m", 1500 -> "1500m", 2_000_000 -> "2k",
    0 -> "0"; past "E" the form is "<n>e<exp>" like apimachinery.
    milli=False: `amount` is a plain count (bytes, pods) and renders in BinarySI form with the
    largest of Ki Mi Gi Ti Pi Ei that divides it exactly: 4 * 2**30 -> "4Gi",
    1.5 * 2**30 -> "1536Mi"; otherwise, and below 1024, the plain integer: 10**9 ->
    "1000000000", 1000 -> "1000" (apimachinery would print "1k" there; decimal suffixes are
    never produced). A magnitude above 2**63 - 1 is also printed as a plain integer, because
    a binarySI quantity that large would be capped when parsed back.

    Rounding rule: a float is first read through its shortest repr (0.1 is exactly 1/10), an
    int or Fraction is taken as is; a non-integer amount is then rounded up to a whole number
    of units (milli-units for milli=True, units for milli=False), away from zero like
    apimachinery's RoundUp: 1500.2 -> "1501m", 0.5 (milli=False) -> "1", -0.5 -> "-1".
    """
    units = _round_up(_exact_amount(amount))
    if units == 0:
        return "0"
    if milli:
        return _format_decimal(units, -3)
    return _format_binary(units)


# ---------------------------------------------------------------------------------------------
# parsing


@lru_cache(maxsize=_CACHE_SIZE)
def _parse_string(text: str) -> Fraction:
    match = _QUANTITY_RE.fullmatch(text)
    if text == "" or match is None:
        raise QuantityError(text, _shape_error(text))
    num, frac, suffix = match["num"], match["frac"] or "", match["suffix"]
    negative = match["sign"] == "-"
    # "0*" swallowed leading zeros; the number had digits if anything before the suffix did.
    number_end = match.start("suffix")
    has_digits = any("0" <= ch <= "9" for ch in text[:number_end])

    binary_power = _BINARY_SUFFIXES.get(suffix)
    decimal_exponent = _DECIMAL_SUFFIXES.get(suffix)
    if binary_power is None and decimal_exponent is None:
        decimal_exponent = _parse_exponent(text, suffix)

    if not has_digits:
        # apimachinery's fast path turns a digitless number into zero; its slow path
        # (BinarySI at Pi and above, decimal scales finer than nano) refuses it.
        if (binary_power is not None and binary_power >= 50) or (
            decimal_exponent is not None and decimal_exponent < -_NANO
        ):
            raise QuantityError(text, "unable to parse numeric part of quantity: no digits")
        return Fraction(0)

    digits = num + frac
    if len(digits) > _MAX_DIGITS:
        raise QuantityError(text, f"more than {_MAX_DIGITS} digits")
    mantissa = int(digits) if digits else 0
    if mantissa == 0:
        return Fraction(0)
    scale = -len(frac)

    if binary_power is not None:
        exact = Fraction(mantissa << binary_power, 10 ** len(frac))
        magnitude = _round_to_nano(exact)
        if magnitude > _MAX_BINARY:
            magnitude = Fraction(_MAX_BINARY)
        return -magnitude if negative else magnitude

    assert decimal_exponent is not None
    scale += decimal_exponent
    if scale >= -_NANO:
        if scale > _MAX_SCALE:
            raise QuantityError(text, f"exponent out of range (value beyond 1e{_MAX_SCALE})")
        magnitude = Fraction(mantissa * 10**scale) if scale >= 0 else Fraction(mantissa, 10**-scale)
    else:
        # Finer than nano: round the magnitude up to the next nano. Clamping a tiny scale
        # keeps the value inside (0, 1n), which rounds to 1n all the same.
        scale = max(scale, -_NANO - len(str(mantissa)) - 1)
        magnitude = _round_to_nano(Fraction(mantissa, 10**-scale))
    return -magnitude if negative else magnitude


def _shape_error(text: str) -> str:
    if text == "":
        return "empty string"
    prefix = _QUANTITY_RE.match(text)
    offset = prefix.end() if prefix is not None else 0
    if offset >= len(text):
        return "expected <signed number><suffix> such as 500m, 1.5Gi or 2e3"
    return (
        f"unexpected {text[offset]!r} at offset {offset}; "
        "expected <signed number><suffix> such as 500m, 1.5Gi or 2e3"
    )


def _parse_exponent(text: str, suffix: str) -> int:
    """Interpret a non-table suffix as apimachinery does: e/E then a signed int64, kept as int32."""
    match = _EXPONENT_RE.fullmatch(suffix)
    if match is None:
        raise QuantityError(
            text,
            f"unknown suffix {suffix!r} (expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)",
        )
    exponent = int(match["exp"])
    if not _INT64_MIN <= exponent <= -_INT64_MIN - 1:
        raise QuantityError(text, f"exponent {match['exp']!r} does not fit in 64 bits")
    # apimachinery converts the parsed int64 exponent with int32(...), which wraps.
    return (exponent + (1 << 31)) % (1 << 32) - (1 << 31)


def _round_to_nano(magnitude: Fraction) -> Fraction:
    """Round a non-negative value up to a whole number of nano-units."""
    nanos = magnitude * 10**_NANO
    if nanos.denominator == 1:
        return magnitude
    return Fraction(-(-nanos.numerator // nanos.denominator), 10**_NANO)


@lru_cache(maxsize=_CACHE_SIZE)
def _milli_string(text: str) -> int:
    return _round_up(_parse_string(text) * 1000)


@lru_cache(maxsize=_CACHE_SIZE)
def _whole_string(text: str) -> int:
    return _round_up(_parse_string(text))


# ---------------------------------------------------------------------------------------------
# rounding and rendering


def _round_up(value: Fraction) -> int:
    """Round to an integer away from zero (apimachinery's "round up")."""
    if value.denominator == 1:
        return value.numerator
    quotient = -(-abs(value.numerator) // value.denominator)
    return quotient if value > 0 else -quotient


def _float_text(value: float) -> str:
    if not math.isfinite(value):
        raise QuantityError(value, "not a finite number")
    return repr(value)


def _exact_amount(amount: int | float | Fraction) -> Fraction:
    if isinstance(amount, bool):
        raise QuantityError(amount, "a boolean is not an amount")
    if isinstance(amount, Fraction):
        return amount
    if isinstance(amount, int):
        return Fraction(amount)
    if isinstance(amount, float):
        return Fraction(_float_text(amount))
    raise QuantityError(amount, f"expected int, float or Fraction, got {type(amount).__name__}")


def _format_decimal(mantissa: int, exponent: int) -> str:
    """DecimalSI canonical form of mantissa * 10**exponent (mantissa non-zero)."""
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    shift = exponent % 3
    mantissa *= 10**shift
    exponent -= shift
    suffix = _SUFFIX_FOR_DECIMAL_EXPONENT.get(exponent)
    if suffix is None:
        suffix = f"e{exponent}"
    return f"{mantissa}{suffix}"


def _format_binary(count: int) -> str:
    """BinarySI canonical form of a non-zero integer, or the plain integer."""
    if abs(count) > _MAX_BINARY:
        return str(count)
    power = 0
    while power < len(_BINARY_SUFFIX_BY_POWER) - 1 and count % 1024 == 0:
        count //= 1024
        power += 1
    return f"{count}{_BINARY_SUFFIX_BY_POWER[power]}"
