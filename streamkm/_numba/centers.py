"""Kernels of the mini-batch engine: inner products with centers, nearest centers, cluster sums."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def center_inner_products(kblock, cols, weights, offsets, out):  # pragma: no cover - compiled
    """out[x, j] = sum_{s in segment j} weights[s] * kblock[x, cols[s]].

    A center j is the convex combination of the support rows ``offsets[j] <= s < offsets[j+1]``
    whose kernel values against the rows x sit in column ``cols[s]`` of ``kblock``.
    Accumulates in float64, stores in ``out``'s dtype.
    """
    n = kblock.shape[0]
    k = offsets.shape[0] - 1
    for i in prange(n):
        for j in range(k):
            acc = 0.0
            for s in range(offsets[j], offsets[j + 1]):
                acc += weights[s] * kblock[i, cols[s]]
            out[i, j] = acc
    return out


@njit(cache=True, parallel=True)
def sq_distances_from_inner(diag, inner, center_sq_norms, out):  # pragma: no cover - compiled
    """out[x, j] = max(diag[x] - 2 inner[x, j] + center_sq_norms[j], 0)."""
    n, k = inner.shape
    zero = out.dtype.type(0.0)
    two = out.dtype.type(2.0)
    for i in prange(n):
        for j in range(k):
            d = diag[i] - two * inner[i, j] + center_sq_norms[j]
            out[i, j] = d if d > zero else zero
    return out


@njit(cache=True)
def nearest_center(diag, inner, center_sq_norms, labels, min_sq_dist):  # pragma: no cover
    """Nearest center of each row and its squared distance (clipped at 0); returns the sum.

    The first of equally near centers wins. The sum is accumulated in float64.
    """
    n, k = inner.shape
    total = 0.0
    zero = min_sq_dist.dtype.type(0.0)
    two = min_sq_dist.dtype.type(2.0)
    for i in range(n):
        best = np.inf
        arg = 0
        for j in range(k):
            d = diag[i] - two * inner[i, j] + center_sq_norms[j]
            if d < best:
                best = d
                arg = j
        labels[i] = arg
        v = min_sq_dist.dtype.type(best)
        if v < zero:
            v = zero
        min_sq_dist[i] = v
        total += v
    return total


@njit(cache=True)
def cluster_sums(x, labels, n_clusters, sums, counts):  # pragma: no cover - compiled
    """Per-cluster row sums (float64 accumulation into ``sums``) and row counts."""
    n, d = x.shape
    sums[:] = 0.0
    counts[:] = 0
    for i in range(n):
        j = labels[i]
        counts[j] += 1
        for f in range(d):
            sums[j, f] += x[i, f]
    return sums
