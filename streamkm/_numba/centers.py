"""Kernels of the mini-batch engine: inner products with centers, nearest centers, cluster sums."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, fastmath=True)
def segment_inner_products(kblock, lo, hi, weights, out):  # pragma: no cover - compiled
    """out[x, j] += sum_{lo[j] <= c < hi[j]} weights[c] * kblock[x, c].

    Center j's support rows are the contiguous columns ``lo[j]:hi[j]`` of the kernel block,
    with weights indexed by column. Accumulates in float64; the summation order is free
    (fastmath) so the loop vectorises.
    """
    n = kblock.shape[0]
    k = lo.shape[0]
    for i in range(n):
        row = kblock[i]
        for j in range(k):
            acc = 0.0
            for c in range(lo[j], hi[j]):
                acc += weights[c] * row[c]
            out[i, j] += acc
    return out


@njit(cache=True)
def sq_distances_from_inner(diag, inner, center_sq_norms, out):  # pragma: no cover - compiled
    """out[x, j] = max(diag[x] - 2 inner[x, j] + center_sq_norms[j], 0)."""
    n, k = inner.shape
    zero = out.dtype.type(0.0)
    two = out.dtype.type(2.0)
    for i in range(n):
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
