"""Ward's agglomerative clustering by the nearest-neighbour chain algorithm.

The merge cost of clusters a and b is Ward's increase of the k-means cost,
n_a n_b / (n_a + n_b) * ||c_a - c_b||^2, kept in a dense matrix and updated by the
Lance-Williams formula
cost(k, i+j) = ((n_i + n_k) cost(i, k) + (n_j + n_k) cost(j, k) - n_k cost(i, j))
/ (n_i + n_j + n_k).
Ward's criterion is reducible, so the chain finds the same merges as the greedy algorithm,
in O(n^2) time and memory.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, nogil=True, parallel=True)
def half_sq_distances(x, out):  # pragma: no cover - compiled
    """``out[i, j] = ||x_i - x_j||^2 / 2``: the Ward cost of merging two singletons."""
    n, d = x.shape
    for i in prange(n):
        out[i, i] = 0.0
        for j in range(i + 1, n):
            acc = 0.0
            for f in range(d):
                diff = np.float64(x[i, f]) - np.float64(x[j, f])
                acc += diff * diff
            out[i, j] = 0.5 * acc
    for i in range(n):
        for j in range(i):
            out[i, j] = out[j, i]


@njit(cache=True, nogil=True)
def ward_nn_chain(cost):  # pragma: no cover - compiled
    """Run the nearest-neighbour chain on the (n, n) merge-cost matrix ``cost`` (destroyed).

    Returns
    -------
    first, second : int64 arrays (n - 1,)
        The merged clusters, each named by the slot (a row index) it occupied; the merged
        cluster takes slot ``second`` (the larger index) and slot ``first`` is retired.
    merge_cost : float64 array (n - 1,)
        Ward cost of each merge, in the order the chain found them (not sorted).

    Ties prefer the previous element of the chain, then the smallest slot index (the rule
    of scipy's ``linkage(..., "ward")``).
    """
    n = cost.shape[0]
    size = np.ones(n, dtype=np.int64)
    chain = np.empty(n, dtype=np.int64)
    first = np.empty(n - 1, dtype=np.int64)
    second = np.empty(n - 1, dtype=np.int64)
    merge_cost = np.empty(n - 1)
    chain_len = 0
    for step in range(n - 1):
        if chain_len == 0:
            for i in range(n):
                if size[i] > 0:
                    chain[0] = i
                    chain_len = 1
                    break
        while True:
            x = chain[chain_len - 1]
            if chain_len > 1:
                y = chain[chain_len - 2]
                best = cost[x, y]
            else:
                y = -1
                best = np.inf
            for i in range(n):
                if size[i] == 0 or i == x:
                    continue
                if cost[x, i] < best:
                    best = cost[x, i]
                    y = i
            if chain_len > 1 and y == chain[chain_len - 2]:
                break
            chain[chain_len] = y
            chain_len += 1
        chain_len -= 2
        if x > y:
            x, y = y, x
        nx = size[x]
        ny = size[y]
        first[step] = x
        second[step] = y
        merge_cost[step] = best
        size[x] = 0
        size[y] = nx + ny
        for i in range(n):
            ni = size[i]
            if ni == 0 or i == y:
                continue
            updated = ((nx + ni) * cost[x, i] + (ny + ni) * cost[y, i] - ni * best) / (
                nx + ny + ni
            )
            cost[y, i] = updated
            cost[i, y] = updated
    return first, second, merge_cost
