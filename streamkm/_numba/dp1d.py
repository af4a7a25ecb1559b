"""Exact 1-D k-means by dynamic programming with the divide-and-conquer optimisation.

D[m, i] is the optimal cost of putting the first i + 1 sorted values into m + 1 clusters:
D[m, i] = min over j of D[m - 1, j - 1] + cost(j, i), with cost(j, i) the sum of squared
deviations of the values j..i. The optimal j is non-decreasing in i (the 1-D cost satisfies
the quadrangle inequality), so each layer is solved by divide and conquer in O(n log n).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _segment_cost(s1, s2, j, i):  # pragma: no cover - compiled
    """Sum of squared deviations of values j..i (inclusive) from prefix sums."""
    count = i - j + 1
    total = s1[i + 1] - s1[j]
    cost = (s2[i + 1] - s2[j]) - total * total / count
    return cost if cost > 0.0 else 0.0


@njit(cache=True, nogil=True)
def kmeans_1d_dp(sorted_values, k):  # pragma: no cover - compiled
    """Optimal k-segmentation of sorted values.

    Parameters
    ----------
    sorted_values : float64 array (n,), ascending
    k : int, 1 <= k <= n

    Returns
    -------
    starts : int64 array (k + 1,)
        Segment m holds ``sorted_values[starts[m]:starts[m + 1]]``; starts[0] = 0,
        starts[k] = n, every segment non-empty.
    cost : float
        The DP's optimal cost (from prefix sums; the caller recomputes it directly).
    """
    n = sorted_values.shape[0]
    shift = sorted_values[n // 2]
    s1 = np.zeros(n + 1)
    s2 = np.zeros(n + 1)
    for i in range(n):
        v = sorted_values[i] - shift
        s1[i + 1] = s1[i] + v
        s2[i + 1] = s2[i] + v * v

    prev = np.empty(n)
    for i in range(n):
        prev[i] = _segment_cost(s1, s2, 0, i)
    cur = np.empty(n)
    last_start = np.zeros((k, n), dtype=np.int32)
    # depth-first: at most one pending sibling per level of the log2(n)-deep recursion
    stack = np.empty((130, 4), dtype=np.int64)

    for m in range(1, k):
        cur[:] = np.inf
        # rows i in [m, n-1], candidate starts j in [m, i]
        stack[0, 0] = m
        stack[0, 1] = n - 1
        stack[0, 2] = m
        stack[0, 3] = n - 1
        top = 1
        while top > 0:
            top -= 1
            lo = stack[top, 0]
            hi = stack[top, 1]
            opt_lo = stack[top, 2]
            opt_hi = stack[top, 3]
            mid = (lo + hi) // 2
            best = np.inf
            best_j = opt_lo
            j_end = mid if mid < opt_hi else opt_hi
            for j in range(opt_lo, j_end + 1):
                c = prev[j - 1] + _segment_cost(s1, s2, j, mid)
                if c < best:
                    best = c
                    best_j = j
            cur[mid] = best
            last_start[m, mid] = best_j
            if lo < mid:
                stack[top, 0] = lo
                stack[top, 1] = mid - 1
                stack[top, 2] = opt_lo
                stack[top, 3] = best_j
                top += 1
            if mid < hi:
                stack[top, 0] = mid + 1
                stack[top, 1] = hi
                stack[top, 2] = best_j
                stack[top, 3] = opt_hi
                top += 1
        prev, cur = cur, prev

    starts = np.empty(k + 1, dtype=np.int64)
    starts[k] = n
    end = n - 1
    for m in range(k - 1, 0, -1):
        j = last_start[m, end]
        starts[m] = j
        end = j - 1
    starts[0] = 0
    return starts, prev[n - 1]
