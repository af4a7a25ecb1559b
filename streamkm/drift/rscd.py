"""RSCD: random pairs with collision detection, the baseline RTMM is compared against (Li and He).

Draw a random pair of distinct items, discard it if it was drawn before, repeat until m
distinct pairs are found. Correct, but the number of draws grows like N log(N / (N - m))
as the pairs get used up (N = n(n-1)/2), and its running time varies from run to run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm._core.validation import check_random_state
from streamkm.drift.rtmm import _check_n_and_m
from streamkm.exceptions import ParameterError

__all__ = ["rscd_pairs"]

_MAX_N_ITEMS = 3 * 10**9


def rscd_pairs(n: int, m: int, *, random_state: Any = None) -> np.ndarray:
    """Draw m distinct unordered pairs of n items by random draws with collision detection.

    Candidate pairs are drawn in vectorised blocks (sized by the expected number of draws
    still needed) and checked one by one against a set of the pairs already kept.

    Parameters
    ----------
    n : int
        Number of items, 2 <= n <= 3 * 10**9 (pairs are keyed as i * n + j in int64).
    m : int
        Number of pairs, 0 <= m <= n(n-1)/2.
    random_state : None, int or numpy.random.Generator
        Seed or generator of the draw.

    Returns
    -------
    ndarray of int64, shape (m, 2)
        Distinct pairs (i, j), 0 <= i < j < n, in the order they were found.
    """
    n, m, total = _check_n_and_m(n, m)
    if n > _MAX_N_ITEMS:
        raise ParameterError(f"n must be <= {_MAX_N_ITEMS} for rscd_pairs, got n={n!r}")
    rng = check_random_state(random_state)
    seen: set[int] = set()
    kept: list[int] = []
    while len(kept) < m:
        free = total - len(kept)
        needed = m - len(kept)
        block = int(needed * total / free) + 16
        first = rng.integers(0, n, size=block)
        # a uniform second item different from the first
        second = rng.integers(0, n - 1, size=block)
        second += second >= first
        keys = (np.minimum(first, second) * n + np.maximum(first, second)).tolist()
        for key in keys:
            if key not in seen:
                seen.add(key)
                kept.append(key)
                if len(kept) == m:
                    break
    keys_arr = np.array(kept, dtype=np.int64)
    return np.stack([keys_arr // n, keys_arr % n], axis=1) if m else np.empty((0, 2), np.int64)
