"""RTMM: duplicate-free random initial pairs by random integer triangular-matrix mapping (Li and He).

All N = n(n-1)/2 unordered pairs of n items are numbered; m distinct serial numbers are
sampled without replacement in O(m) and each is mapped to its pair in O(1), so no pair
repeats, no collision checks are needed and the cost does not depend on n.

Numbering (0-based here; the paper's serial number is ``e = s + 1`` and its pair is
``(i + 1, j + 1)``): pair (i, j), 0 <= i < j, has serial ``s = j (j - 1) / 2 + i``, and
``j = (isqrt(8 s + 1) + 1) // 2``, ``i = s - j (j - 1) / 2``. For n = 4, s = 0..5 gives
(0,1) (0,2) (1,2) (0,3) (1,3) (2,3). Integer arithmetic throughout: a float square root
gives invalid pairs (i == j) from n around 3e8.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from streamkm._core.validation import check_random_state
from streamkm.exceptions import ParameterError

__all__ = [
    "MAX_N_ITEMS",
    "pair_count",
    "pair_to_serial",
    "int_pairs",
    "pairs_to_serials",
    "rtmm_pairs",
    "serial_to_pair",
    "serials_to_pairs",
]

MAX_N_ITEMS = 2**63
"""Largest n accepted: item indices must fit in int64."""

# Up to this many items the serial numbers, and j (j + 1) / 2 for every valid j, fit in int64,
# so the vectorised int64 path is exact; beyond it the mapping uses Python integers.
_VECTOR_MAX_N_ITEMS = 2**32
_VECTOR_MAX_SERIAL = _VECTOR_MAX_N_ITEMS * (_VECTOR_MAX_N_ITEMS - 1) // 2 - 1


def _check_count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    return int(value)


def pair_count(n: int) -> int:
    """Number of unordered pairs of ``n`` items, n (n - 1) / 2, as an exact Python int."""
    n = _check_count(n, "n")
    if n < 0:
        raise ParameterError(f"n must be >= 0, got {n!r}")
    return n * (n - 1) // 2


def serial_to_pair(serial: int) -> tuple[int, int]:
    """The pair (i, j), 0 <= i < j, with 0-based serial number ``serial``.

    Exact for any non-negative integer (Python integer arithmetic).
    """
    s = _check_count(serial, "serial")
    if s < 0:
        raise ParameterError(f"serial must be >= 0, got {serial!r}")
    j = (math.isqrt(8 * s + 1) + 1) // 2
    return s - j * (j - 1) // 2, j


def pair_to_serial(i: int, j: int) -> int:
    """The 0-based serial number j (j - 1) / 2 + i of the pair (i, j), 0 <= i < j."""
    i = _check_count(i, "i")
    j = _check_count(j, "j")
    if not 0 <= i < j:
        raise ParameterError(f"a pair must satisfy 0 <= i < j, got (i, j) = ({i!r}, {j!r})")
    return j * (j - 1) // 2 + i


def _triangular(j: np.ndarray) -> np.ndarray:
    """j (j - 1) / 2 elementwise for int64 0 <= j <= 2^32 (the product is exact in uint64)."""
    ju = j.view(np.uint64)
    return ((ju * (ju - np.uint64(1))) >> np.uint64(1)).view(np.int64)


def serials_to_pairs(serials: Any) -> np.ndarray:
    """Map 0-based serial numbers to pairs, vectorised.

    Parameters
    ----------
    serials : array-like of int, shape (m,)
        Non-negative serial numbers. Values above the int64 range may be given as Python ints.

    Returns
    -------
    ndarray of int64, shape (m, 2)
        Row k is the pair (i, j), i < j, with serial number ``serials[k]``.
    """
    s = np.asarray(serials)
    if s.ndim != 1:
        raise ParameterError(f"serials must be 1-D, got shape {s.shape!r}")
    if s.size == 0:
        return np.empty((0, 2), dtype=np.int64)
    if s.dtype == object or s.dtype == np.uint64:
        values = [int(v) for v in s]
        if min(values) < 0:
            raise ParameterError(f"serials must be >= 0, got {min(values)!r}")
        if max(values) > _VECTOR_MAX_SERIAL:
            return np.array([serial_to_pair(v) for v in values], dtype=np.int64)
        s = np.array(values, dtype=np.int64)
    elif not np.issubdtype(s.dtype, np.integer):
        raise ParameterError(f"serials must be integers, got dtype {s.dtype!s}")
    s = s.astype(np.int64, copy=False)
    low, high = int(s.min()), int(s.max())
    if low < 0:
        raise ParameterError(f"serials must be >= 0, got {low!r}")
    if high > _VECTOR_MAX_SERIAL:
        return np.array([serial_to_pair(int(v)) for v in s], dtype=np.int64)
    # j is the unique integer with T(j) <= s < T(j + 1), T(j) = j (j - 1) / 2. For s < 2^63
    # the float estimate is off by at most one (its rounding error is below 2^-19), and one
    # exact integer correction each way fixes it; T(j -+ 1) = T(j) -+ (j - 1 or j).
    j = ((np.sqrt(8.0 * s + 1.0) + 1.0) * 0.5).astype(np.int64)
    np.clip(j, 1, _VECTOR_MAX_N_ITEMS - 1, out=j)
    row_start = _triangular(j)
    too_high = row_start > s
    j -= too_high
    row_start -= np.where(too_high, j, 0)
    too_low = row_start + j <= s
    row_start += np.where(too_low, j, 0)
    j += too_low
    return np.stack([s - row_start, j], axis=1)


def int_pairs(pairs: Any) -> np.ndarray:
    """``pairs`` as an int64 array of shape (m, 2).

    Raises
    ------
    ParameterError
        Not of shape (m, 2), or not integers.
    """
    p = np.asarray(pairs)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ParameterError(f"pairs must have shape (m, 2), got {p.shape!r}")
    if p.size and not np.issubdtype(p.dtype, np.integer):
        raise ParameterError(f"pairs must be integers, got dtype {p.dtype!s}")
    return p.astype(np.int64, copy=False)


def pairs_to_serials(pairs: Any) -> np.ndarray:
    """0-based serial numbers of pairs (i, j), i < j, vectorised; int64, so j < 2^32."""
    p = int_pairs(pairs)
    i, j = p[:, 0], p[:, 1]
    bad = ~((i >= 0) & (i < j))
    if bad.any():
        k = int(np.argmax(bad))
        raise ParameterError(
            f"a pair must satisfy 0 <= i < j, got (i, j) = ({int(i[k])}, {int(j[k])}) at row {k}"
        )
    if p.size and int(j.max()) >= _VECTOR_MAX_N_ITEMS:
        raise ParameterError(
            f"j must be < {_VECTOR_MAX_N_ITEMS} for int64 serials, got {int(j.max())}; "
            "use pair_to_serial for larger indices"
        )
    return _triangular(j) + i


def _random_below(bound: int, rng: np.random.Generator) -> int:
    """A uniform integer in [0, bound) for a Python int bound of any size (rejection)."""
    n_bits = (bound - 1).bit_length()
    n_bytes = (n_bits + 7) // 8
    excess_bits = 8 * n_bytes - n_bits
    while True:
        value = int.from_bytes(rng.bytes(n_bytes), "little") >> excess_bits
        if value < bound:
            return value


def _sample_distinct_large(total: int, m: int, rng: np.random.Generator) -> list[int]:
    """m distinct integers from [0, total) in random order, for totals beyond int64.

    Floyd's algorithm: O(m) time and memory whatever ``total``.
    """
    chosen: set[int] = set()
    for upper in range(total - m, total):
        candidate = _random_below(upper + 1, rng)
        chosen.add(upper if candidate in chosen else candidate)
    ordered = sorted(chosen)
    return [ordered[k] for k in rng.permutation(m)]


def _check_n_and_m(n: Any, m: Any) -> tuple[int, int, int]:
    n = _check_count(n, "n")
    m = _check_count(m, "m")
    if n < 2:
        raise ParameterError(f"n must be >= 2 to form a pair, got n={n!r}")
    if n > MAX_N_ITEMS:
        raise ParameterError(f"n must be <= 2**63, got n={n!r}")
    total = n * (n - 1) // 2
    if m < 0:
        raise ParameterError(f"m must be >= 0, got m={m!r}")
    if m > total:
        raise ParameterError(
            f"m must be <= n(n-1)/2 = {total} distinct pairs for n={n}, got m={m!r}"
        )
    return n, m, total


def rtmm_pairs(n: int, m: int, *, random_state: Any = None) -> np.ndarray:
    """Draw m distinct unordered pairs of n items uniformly at random (RTMM).

    Every set of m of the n(n-1)/2 pairs is equally likely, and the rows come in random
    order. O(m) time and memory, independent of n.

    Parameters
    ----------
    n : int
        Number of items, 2 <= n <= 2**63.
    m : int
        Number of pairs, 0 <= m <= n(n-1)/2.
    random_state : None, int or numpy.random.Generator
        Seed or generator of the draw.

    Returns
    -------
    ndarray of int64, shape (m, 2)
        Row k is a pair (i, j) with 0 <= i < j < n; no two rows are equal.

    Raises
    ------
    ParameterError
        If n or m is not an integer, n < 2, m < 0 or m > n(n-1)/2.
    """
    n, m, total = _check_n_and_m(n, m)
    rng = check_random_state(random_state)
    if m == 0:
        return np.empty((0, 2), dtype=np.int64)
    if n <= _VECTOR_MAX_N_ITEMS:
        # Generator.choice without replacement is O(m): Floyd's algorithm with a hash set
        # when m is small next to the population, a partial shuffle of at most 50 m otherwise.
        serials = rng.choice(total, size=m, replace=False, shuffle=True)
        return serials_to_pairs(serials)
    return serials_to_pairs(np.array(_sample_distinct_large(total, m, rng), dtype=object))
