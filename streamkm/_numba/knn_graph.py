"""numba kernels of the k-nearest-neighbour graph kernels (``streamkm.kernels.knn`` / ``heat``).

The graph over landmark rows L joins x and y when ||x - y||^2 <= max(r2(x), r2(y)), r2(z)
being the squared distance from z to its (k+1)-th nearest landmark (a landmark counts
itself at distance 0): the symmetrised ("or") k-nn graph, with a self loop, extended to
any row. Distances are computed by differences (never from a GEMM), summed over the
features in order, so the same pair gives the same bit pattern in every call and the radius
test is reproducible. A row's distances to all landmarks are computed at once, landmark by
landmark within a feature (landmarks are passed transposed, (d, m)), which vectorises
without changing any sum's order; its radius, degree and neighbours are scans of them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["join_rows", "knn_block"]


@njit(cache=True, nogil=True)
def _row_sq_distances(x, i, landmarks_t, out):  # pragma: no cover - compiled
    """out[j] = ||x[i] - landmarks[j]||^2 (landmarks_t is landmarks transposed)."""
    m = landmarks_t.shape[1]
    for j in range(m):
        out[j] = 0.0
    for f in range(x.shape[1]):
        xf = x[i, f]
        lf = landmarks_t[f]
        for j in range(m):
            t = xf - lf[j]
            out[j] += t * t


@njit(cache=True, nogil=True)
def _kth_smallest(values, kth, best):  # pragma: no cover - compiled
    """The (kth+1)-th smallest of values: keeps the kth+1 smallest seen so far sorted in
    ``best`` (insertion), one pass and no allocation."""
    size = kth + 1
    for j in range(size):
        v = values[j]
        p = j
        while p > 0 and best[p - 1] > v:
            best[p] = best[p - 1]
            p -= 1
        best[p] = v
    threshold = best[size - 1]
    for j in range(size, values.shape[0]):
        v = values[j]
        if v < threshold:
            p = size - 1
            while p > 0 and best[p - 1] > v:
                best[p] = best[p - 1]
                p -= 1
            best[p] = v
            threshold = best[size - 1]
    return threshold


@njit(cache=True, nogil=True)
def _stored_radius(r, single):  # pragma: no cover - compiled
    """r rounded up to float32 when the rows are float32 (``single``), as float64."""
    if not single:
        return r
    s = np.float32(r)
    if np.float64(s) < r:
        s = np.nextafter(s, np.float32(np.inf))
    return np.float64(s)


@njit(cache=True, nogil=True)
def _grown(indices, used, needed):  # pragma: no cover - compiled
    """A larger copy of indices[:used] with room for at least ``needed`` entries."""
    grown = np.empty(max(needed, 2 * indices.shape[0]), dtype=np.int64)
    grown[:used] = indices[:used]
    return grown


@njit(cache=True, nogil=True)
def _write_joined(dist, r, landmark_r2, indices, start):  # pragma: no cover - compiled
    p = start
    for j in range(dist.shape[0]):
        if dist[j] <= max(r, landmark_r2[j]):
            indices[p] = j
            p += 1


@njit(cache=True, nogil=True)
def join_rows(x, landmarks_t, landmark_r2, kth, single, x_r2):  # pragma: no cover - compiled
    """CSR (indptr, indices) of the landmarks joined to each row of x: those j with
    ||x[i] - l_j||^2 <= max(r2(x[i]), landmark_r2[j]), where x_r2[i] = r2(x[i]) is written:
    the (kth+1)-th smallest squared distance from x[i] to the landmarks, rounded up to
    float32 when ``single``. With landmark_r2 all 0 the joined landmarks are those within
    x[i]'s own radius (its kth+1 nearest and any ties).
    """
    n, m = x.shape[0], landmarks_t.shape[1]
    dist = np.empty(m)
    best = np.empty(kth + 1)
    indptr = np.zeros(n + 1, dtype=np.int64)
    indices = np.empty(max(16, 2 * n * (kth + 1)), dtype=np.int64)
    p = 0
    for i in range(n):
        _row_sq_distances(x, i, landmarks_t, dist)
        r = _stored_radius(_kth_smallest(dist, kth, best), single)
        x_r2[i] = r
        count = 0
        for j in range(m):
            if dist[j] <= max(r, landmark_r2[j]):
                count += 1
        if p + count > indices.shape[0]:
            indices = _grown(indices, p, p + count)
        _write_joined(dist, r, landmark_r2, indices, p)
        p += count
        indptr[i + 1] = p
    return indptr, indices[:p].copy()


@njit(cache=True, nogil=True)
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
