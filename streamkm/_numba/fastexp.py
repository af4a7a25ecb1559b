"""A vectorisable exp for non-positive arguments (kernel values exp(-gamma * distance)).

libm's exp is an opaque call that stops LLVM from vectorising the kernel loops; this one is
branch-free arithmetic. exp(x) = 2^t * exp(r) with t = round(x / ln 2) and
|r| <= ln(2)/2 (Cody-Waite reduction with a two-part ln 2), exp(r) by its degree-13 Taylor
polynomial (truncation error below 1e-17), and 2^t built from its IEEE-754 exponent bits.
Maximum relative error against numpy's exp: a few units in the last place. Arguments below
-708 are clamped there, so results below about 3.3e-308 are not produced (0 would be exact).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_MIN_ARG = -708.0


@njit(cache=True, inline="always")
def exp_mantissa_and_exponent(x):  # pragma: no cover - compiled
    """exp(x) for x <= 0 as (exp(r), exponent bits of 2^t); multiply them to finish."""
    if x < _MIN_ARG:
        x = _MIN_ARG
    t = np.floor(x * _LOG2E + 0.5)
    r = (x - t * _LN2_HI) - t * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return p, (np.int64(t) + 1023) << 52


@njit(cache=True)
def exp_nonpositive(values, scratch):  # pragma: no cover - compiled
    """values[i] <- exp(values[i]) in place for a 1-D float array of non-positive values.

    ``scratch`` is an int64 buffer at least as long as ``values``.
    """
    n = values.shape[0]
    for i in range(n):
        p, bits = exp_mantissa_and_exponent(np.float64(values[i]))
        values[i] = p
        scratch[i] = bits
    scale = scratch[:n].view(np.float64)
    for i in range(n):
        values[i] = values[i] * scale[i]
    return values
