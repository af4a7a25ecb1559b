"""Inner loops of Lloyd's k-means: nearest-center assignment, center sums, inertia.

The inner products X @ C.T are computed by the caller with a BLAS GEMM, chunk by chunk;
these kernels finish the assignment and the center update. They are serial on purpose: each
is O(n k) or O(n d), far cheaper than the GEMM, and a parallel region per Lloyd iteration
costs more than it saves when the cores are shared (measured: 30x slower under load).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def assign_from_inner(inner, x_sq, c_sq, labels, min_sq_dist):  # pragma: no cover - compiled
    """Nearest center of each row from inner products.

    ``inner[i, j] = <x_i, c_j>`` (a chunk of rows), ``x_sq[i] = ||x_i||^2``,
    ``c_sq[j] = ||c_j||^2``. Writes ``labels[i] = argmin_j ||x_i - c_j||^2`` (the first
    index on ties) and ``min_sq_dist[i]`` (float64, clipped at 0). The same kernel serves
    feature-space distances: pass K(x, x) as ``x_sq``, the per-center means of K as
    ``inner`` and <C_j, C_j> as ``c_sq``.
    """
    n, k = inner.shape
    for i in range(n):
        best = np.inf
        best_j = 0
        for j in range(k):
            d = c_sq[j] - 2.0 * inner[i, j]
            if d < best:
                best = d
                best_j = j
        labels[i] = best_j
        d_i = best + x_sq[i]
        min_sq_dist[i] = d_i if d_i > 0.0 else 0.0


@njit(cache=True, nogil=True)
def cluster_sums(x, labels, sums, counts):  # pragma: no cover - compiled
    """Per-cluster row sums and row counts: ``sums[j]`` = the sum of the rows i of ``x``
    with ``labels[i] == j`` (accumulated in float64), ``counts[j]`` their number.

    ``sums`` (k, d) float64 and ``counts`` (k,) int64 are zeroed here. Lloyd's center update
    (:mod:`streamkm.batch`) and the mini-batch engine's explicit centers both use it.
    """
    n, d = x.shape
    sums[:, :] = 0.0
    counts[:] = 0
    for i in range(n):
        j = labels[i]
        counts[j] += 1
        for f in range(d):
            sums[j, f] += x[i, f]


@njit(cache=True, nogil=True)
def sq_dist_to_assigned(x, centers, labels, out):  # pragma: no cover - compiled
    """``out[i] = ||x_i - centers[labels[i]]||^2`` computed directly (float64)."""
    n, d = x.shape
    for i in range(n):
        j = labels[i]
        acc = 0.0
        for f in range(d):
            diff = np.float64(x[i, f]) - np.float64(centers[j, f])
            acc += diff * diff
        out[i] = acc
