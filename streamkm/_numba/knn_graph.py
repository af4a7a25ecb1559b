"""numba kernels of the k-nearest-neighbour graph kernels (``streamkm.kernels.knn`` / ``heat``).

The graph over landmark rows L joins x and y when ||x - y||^2 <= max(r2(x), r2(y)), r2(z)
being the squared distance from z to its (k+1)-th nearest landmark (a landmark counts
itself at distance 0): the symmetrised ("or") k-nn graph, with a self loop, extended to
any row. Distances are computed by differences (never from a GEMM), always in the same
order, so the same pair gives the same bit pattern in every function here and the radius
test is reproducible.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["radii", "degrees", "neighbours", "knn_block"]


@njit(cache=True)
def _sq_dist(a, b):  # pragma: no cover - compiled
    s = 0.0
    for f in range(a.shape[0]):
        d = a[f] - b[f]
        s += d * d
    return s


@njit(cache=True)
def radii(x, landmarks, kth, out):  # pragma: no cover - compiled
    """out[i] = (kth+1)-th smallest squared distance from x[i] to the landmarks.

    Keeps the kth+1 smallest distances seen so far in sorted order (insertion), so a row
    costs one pass over the landmarks and no allocation.
    """
    m = landmarks.shape[0]
    size = kth + 1
    best = np.empty(size)
    for i in range(x.shape[0]):
        filled = 0
        for j in range(m):
            d = _sq_dist(x[i], landmarks[j])
            if filled < size:
                p = filled
                filled += 1
            elif d < best[size - 1]:
                p = size - 1
            else:
                continue
            while p > 0 and best[p - 1] > d:
                best[p] = best[p - 1]
                p -= 1
            best[p] = d
        out[i] = best[size - 1]


@njit(cache=True)
def degrees(x, x_r2, landmarks, l_r2, out):  # pragma: no cover - compiled
    """out[i] = number of landmarks joined to x[i]."""
    for i in range(x.shape[0]):
        c = 0
        for j in range(landmarks.shape[0]):
            if _sq_dist(x[i], landmarks[j]) <= max(x_r2[i], l_r2[j]):
                c += 1
        out[i] = c


@njit(cache=True)
def neighbours(x, x_r2, landmarks, l_r2, indptr, indices):  # pragma: no cover - compiled
    """CSR structure of the rows x -> landmarks adjacency (indptr from the degrees)."""
    for i in range(x.shape[0]):
        p = indptr[i]
        for j in range(landmarks.shape[0]):
            if _sq_dist(x[i], landmarks[j]) <= max(x_r2[i], l_r2[j]):
                indices[p] = j
                p += 1


@njit(cache=True)
def knn_block(x, y, out):  # pragma: no cover - compiled
    """K[i, j] = inv_deg(x_i) inv_deg(y_j) when x_i and y_j are joined, else 0.

    Rows are prepared rows: the features, then r2, then 1 / degree (last two columns).
    """
    d = x.shape[1] - 2
    for i in range(x.shape[0]):
        xr = x[i, d]
        xi = x[i, d + 1]
        for j in range(y.shape[0]):
            s = 0.0
            for f in range(d):
                t = x[i, f] - y[j, f]
                s += t * t
            out[i, j] = xi * y[j, d + 1] if s <= max(xr, y[j, d]) else 0.0
