"""Exact decimal text -> float64 conversion inside numba kernels.

:func:`parse_decimal` reads one number from a byte array and returns the float64 that
Python's ``float()`` returns for the same text, bit for bit, or reports that it cannot take
it (the caller then converts the record another way). It never returns an approximation.

The digits are gathered into a 64-bit integer mantissa ``w`` (at most 19 significant
digits; more is refused) and a power of ten ``q``: the value is ``w * 10**q``. Two exact
conversions are tried in turn:

1. Clinger's fast path: if ``w < 2**53`` and ``|q| <= 22``, both ``w`` and ``10**|q|`` are
   float64 numbers and one IEEE multiplication or division rounds the exact product once,
   correctly.
2. The Eisel-Lemire algorithm (Lemire, "Number Parsing at a Gigabyte per Second", 2021; the
   formulation of Go's ``strconv``): ``w``, shifted to its top bit, times the 128-bit
   truncation of ``10**q`` gives the top bits of the exact product; when those bits cannot
   decide the rounding (the truncation error could reach the rounding bit, or the value is a
   tie) the next step decides. Subnormal results and overflow are refused.
3. A value that is exactly ``m * 2**q`` (``-27 <= q < 0`` and ``5**-q`` divides ``w``, as
   for every float32 printed in full): ``float(m)`` rounds once, the power of two is exact.
   Anything else is refused.

The 128-bit powers of ten are computed once at import from Python integers (exact).

Two grammars, chosen by the caller:

* JSON numbers: ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``. An integer literal
  converts as ``float(int(text))`` (what a JSON decoder gives for ``-0`` is ``0.0``);
* CSV fields (a subset of what ``float()`` accepts): ``[+-]?`` digits with an optional
  ``.`` and at least one digit, then an optional exponent (leading zeros allowed; no
  spaces, underscores, ``inf`` or ``nan``: those are refused).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["parse_decimal", "POW10_MIN", "POW10_MAX"]

#: Range of decimal exponents the 128-bit table covers (outside it: refused).
POW10_MIN = -348
POW10_MAX = 347
_MAX_DIGITS = 19  # significant digits that always fit an unsigned 64-bit integer


def _pow10_table() -> tuple[np.ndarray, np.ndarray]:
    """High and low 64-bit halves of the 128-bit truncated mantissas of 10**q."""
    hi = np.empty(POW10_MAX - POW10_MIN + 1, dtype=np.uint64)
    lo = np.empty_like(hi)
    for i, q in enumerate(range(POW10_MIN, POW10_MAX + 1)):
        if q >= 0:
            v = 10 ** q
            bits = v.bit_length()
            v = v >> (bits - 128) if bits > 128 else v << (128 - bits)
        else:
            p = 10 ** -q
            v = (1 << (127 + p.bit_length())) // p
            if v.bit_length() > 128:
                v >>= v.bit_length() - 128
        hi[i] = v >> 64
        lo[i] = v & ((1 << 64) - 1)
    return hi, lo


_POW10_HI, _POW10_LO = _pow10_table()
_EXACT_POW10 = np.array([10.0 ** i for i in range(23)], dtype=np.float64)
# 2**e for every exponent a normal float64 built from a 53-bit integer mantissa needs.
_POW2_MIN = -1074
_POW2 = np.array([np.ldexp(1.0, e) for e in range(_POW2_MIN, 972)], dtype=np.float64)

_POW5 = np.array([5 ** i for i in range(28)], dtype=np.uint64)
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U3 = np.uint64(3)
_U9 = np.uint64(9)
_U32 = np.uint64(32)
_U53 = np.uint64(53)
_U63 = np.uint64(63)
_MASK32 = np.uint64(0xFFFFFFFF)
_LOW9 = np.uint64(0x1FF)
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_TWO53 = np.uint64(1 << 53)
_TEN = np.uint64(10)


@njit(cache=True, nogil=True, inline="always")
def _mul64(a: np.uint64, b: np.uint64) -> tuple[np.uint64, np.uint64]:
    """The 128-bit product of two unsigned 64-bit integers, as (high, low)."""
    a_lo, a_hi = a & _MASK32, a >> _U32
    b_lo, b_hi = b & _MASK32, b >> _U32
    p0 = a_lo * b_lo
    p1 = a_lo * b_hi
    p2 = a_hi * b_lo
    p3 = a_hi * b_hi
    mid = (p0 >> _U32) + (p1 & _MASK32) + (p2 & _MASK32)
    low = (p0 & _MASK32) | (mid << _U32)
    high = p3 + (p1 >> _U32) + (p2 >> _U32) + (mid >> _U32)
    return high, low


@njit(cache=True, nogil=True, inline="always")
def _leading_zeros(w: np.uint64) -> int:
    n = 0
    for shift in (32, 16, 8, 4, 2, 1):
        if w >> np.uint64(64 - shift) == _U0:
            w = w << np.uint64(shift)
            n += shift
    return n


@njit(cache=True, nogil=True, inline="always")
def _eisel_lemire(w: np.uint64, q: int) -> tuple[float, bool]:
    """``w * 10**q`` correctly rounded (``w > 0``), or ``(0, False)`` if undecided."""
    if q < POW10_MIN or q > POW10_MAX:
        return 0.0, False
    clz = _leading_zeros(w)
    w = w << np.uint64(clz)
    exp2 = ((217706 * q) >> 16) + 64 + 1023 - clz
    index = q - POW10_MIN
    x_hi, x_lo = _mul64(w, _POW10_HI[index])
    if x_hi & _LOW9 == _LOW9 and x_lo + w < w:
        y_hi, y_lo = _mul64(w, _POW10_LO[index])
        merged_hi, merged_lo = x_hi, x_lo + y_hi
        if merged_lo < x_lo:
            merged_hi += _U1
        if merged_hi & _LOW9 == _LOW9 and merged_lo == _ALL_ONES and y_lo + w < w:
            return 0.0, False
        x_hi, x_lo = merged_hi, merged_lo
    msb = x_hi >> _U63
    mantissa = x_hi >> (msb + _U9)
    exp2 -= 1 - int(msb)
    if x_lo == _U0 and x_hi & _LOW9 == _U0 and mantissa & _U3 == _U1:
        return 0.0, False  # exactly halfway: the truncated bits cannot tell the tie
    mantissa += mantissa & _U1
    mantissa >>= _U1
    if mantissa >> _U53 != _U0:
        mantissa >>= _U1
        exp2 += 1
    if exp2 <= 0 or exp2 >= 0x7FF:
        return 0.0, False  # subnormal or overflow
    # mantissa holds 53 bits with the leading one: value = mantissa * 2**(exp2 - 1075).
    return float(mantissa) * _POW2[exp2 - 1075 - _POW2_MIN], True


@njit(cache=True, nogil=True, inline="always")
def _dyadic(w: np.uint64, q: int) -> tuple[float, bool]:
    """``w * 10**q`` when it is exactly ``m * 2**q`` (``-27 <= q < 0`` and ``5**-q``
    divides ``w``): ``m`` converts with one correct rounding, the power of two is exact.
    These are the values Eisel-Lemire cannot decide (a tie in its truncated bits), common
    in float32 data printed in full."""
    if q >= 0 or q < -27:
        return 0.0, False
    five = _POW5[-q]
    if w % five != _U0:
        return 0.0, False
    return float(w // five) * _POW2[q - _POW2_MIN], True


@njit(cache=True, nogil=True, inline="always")
def _gather_digits(buf: np.ndarray, i: int, end: int, w: np.uint64, digits: int
                   ) -> tuple[int, np.uint64, int, bool]:
    """Append the decimal digits from ``buf[i]`` on to ``w`` (``digits`` significant so
    far; leading zeros are not significant). False past 19 significant digits."""
    while i < end and 48 <= buf[i] <= 57:
        d = buf[i] - 48
        if digits > 0 or d != 0:
            if digits == _MAX_DIGITS:
                return i, w, digits, False
            w = w * _TEN + np.uint64(d)
            digits += 1
        i += 1
    return i, w, digits, True


@njit(cache=True, nogil=True, inline="always")
def parse_decimal(buf: np.ndarray, i: int, end: int, json: bool) -> tuple[float, int, bool]:
    """Parse the number starting at ``buf[i]`` (stopping before ``end``).

    Parameters
    ----------
    buf : ndarray of uint8
        The text.
    i, end : int
        First byte of the number; the number must end before ``end``.
    json : bool
        JSON number grammar if True, else the CSV field grammar (see the module docstring).

    Returns
    -------
    value : float
        ``float(text)`` of the number read, bit-identical.
    next : int
        Index just after the number (the caller checks what follows).
    ok : bool
        False if the text is not a number of the grammar, has more than 19 significant
        digits, or its conversion is one this function refuses; ``value`` is then 0.
    """
    negative = False
    if i < end and buf[i] == 45:  # '-'
        negative = True
        i += 1
    elif not json and i < end and buf[i] == 43:  # '+'
        i += 1
    start = i
    i, w, digits, ok = _gather_digits(buf, i, end, _U0, 0)
    if not ok:
        return 0.0, i, False
    q = 0
    n_int = i - start
    if json and (n_int == 0 or (n_int > 1 and buf[start] == 48)):
        return 0.0, i, False  # JSON: no leading zeros, at least one integer digit
    integer_literal = True
    n_frac = 0
    if i < end and buf[i] == 46:  # '.'
        integer_literal = False
        i += 1
        frac_start = i
        i, w, digits, ok = _gather_digits(buf, i, end, w, digits)
        if not ok:
            return 0.0, i, False
        n_frac = i - frac_start
        q -= n_frac
        if json and n_frac == 0:
            return 0.0, i, False
    if n_int + n_frac == 0:
        return 0.0, i, False
    if i < end and (buf[i] == 101 or buf[i] == 69):  # 'e' / 'E'
        integer_literal = False
        i += 1
        exp_negative = False
        if i < end and (buf[i] == 43 or buf[i] == 45):
            exp_negative = buf[i] == 45
            i += 1
        exp_start = i
        e = 0
        while i < end and 48 <= buf[i] <= 57:
            if e < 100000:  # beyond the table anyway; keeps e from overflowing
                e = e * 10 + (buf[i] - 48)
            i += 1
        if i == exp_start:
            return 0.0, i, False
        q += -e if exp_negative else e
    if w == _U0:
        if negative and not (json and integer_literal):
            return -0.0, i, True
        return 0.0, i, True
    if w < _TWO53 and -22 <= q <= 22:
        value = float(w)
        value = value * _EXACT_POW10[q] if q >= 0 else value / _EXACT_POW10[-q]
    else:
        value, ok = _eisel_lemire(w, q)
        if not ok:
            value, ok = _dyadic(w, q)
            if not ok:
                return 0.0, i, False
    return (-value if negative else value), i, True
