"""numba kernels of the anchor-graph kernel (``streamkm.kernels.anchor``): each row's nearest
anchors.

Distances are computed by differences in the same order as the k-nn graph kernels
(:func:`streamkm._numba.knn_graph._row_sq_distances`, anchors passed transposed), so a
row's nearest anchors are the same in every call. In many dimensions a GEMM first narrows
each row's anchors to those that can be among its nearest: the GEMM's distances
||x||^2 + ||a||^2 - 2 x.a (of rows and anchors centred on the anchors' mean) differ from
the exact ones by at most a rounding bound, so every anchor whose GEMM distance is within
twice that bound of the r-th smallest is a candidate, and only candidates get the distance
by differences. The result is the same, to the bit, as computing every distance by
differences; the GEMM only saves work.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streamkm._numba.knn_graph import _row_sq_distances

__all__ = ["nearest_anchors", "nearest_anchors_by_differences"]

#: features from which the GEMM narrows the search: on 500 rows x 1,500 anchors of
#: 10-center blobs it is 0.56x as fast as the search by differences at 16 features, 0.8x at
#: 24-32, 1.06x at 40, 1.15-1.23x at 48-64 and 1.4-1.6x at 96-128
#: (process CPU, 5 interleaved repeats; docs/benchmarks.md, the nearest-anchor search)
GEMM_MIN_FEATURES = 48
#: rows per GEMM block (its (rows, anchors) distances are held at once)
_BLOCK_ROWS = 512
#: safety factor on the rounding bound
_SAFETY = 4.0
#: anchors whose distances a row gets at once in the search by differences
_CHUNK = 256


def nearest_anchors(x: np.ndarray, anchors_t: np.ndarray,
                    r: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``r`` nearest anchors of each row of x and their squared distances, nearest
    first; of equally distant anchors the lower index comes first.

    x is (n, d) float64, anchors_t (d, m) float64 (the anchors transposed), 1 <= r <= m.
    Returns (indices (n, r) int64, sq_distances (n, r) float64), equal to
    :func:`nearest_anchors_by_differences` bit for bit.
    """
    d, m = anchors_t.shape
    if d < GEMM_MIN_FEATURES or r >= m:
        return nearest_anchors_by_differences(x, anchors_t, r)
    n = x.shape[0]
    center = anchors_t.mean(axis=1)
    anchors_c = anchors_t - center[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        anchor_sq = np.einsum("ij,ij->j", anchors_c, anchors_c)
    # |GEMM distance - exact| <= (4d + 15) eps (||x - c||^2 + ||a - c||^2) for both the
    # GEMM's rounding (centring included) and the differences' (module docstring)
    unit = _SAFETY * (4 * d + 15) * np.finfo(np.float64).eps
    indices = np.empty((n, r), dtype=np.int64)
    nearest = np.empty((n, r), dtype=np.float64)
    for lo in range(0, n, _BLOCK_ROWS):
        hi = min(n, lo + _BLOCK_ROWS)
        rows_c = x[lo:hi] - center
        with np.errstate(over="ignore", invalid="ignore"):  # overflow: checked in _refine
            row_sq = np.einsum("ij,ij->i", rows_c, rows_c)
            inner = rows_c @ anchors_c
        _refine(x, lo, inner, row_sq, anchor_sq, unit, anchors_t, r, indices, nearest)
    return indices, nearest


@njit(cache=True, nogil=True)
def _keep_nearest(values, indices, i, seen, v, j):  # pragma: no cover - compiled
    """Row i's r smallest ``values`` so far (sorted, their ``indices`` beside them), after
    ``seen`` candidates: candidate j at v is kept when smaller than the r-th, and an equal
    value keeps the earlier candidate first."""
    r = values.shape[1]
    if seen >= r and v >= values[i, r - 1]:
        return
    p = min(seen, r - 1)
    while p > 0 and values[i, p - 1] > v:
        values[i, p] = values[i, p - 1]
        indices[i, p] = indices[i, p - 1]
        p -= 1
    values[i, p] = v
    indices[i, p] = j


@njit(cache=True, nogil=True)
def _refine(x, lo, inner, row_sq, anchor_sq, unit, anchors_t, r, indices,
            nearest):  # pragma: no cover - compiled
    """Rows lo.. of x: the exact nearest ``r`` among the anchors whose GEMM distance
    row_sq - 2 inner + anchor_sq is within the rounding slack of the row's r-th smallest,
    scanned in index order; a row whose GEMM distances or slack overflow gets every
    distance by differences."""
    d, m = anchors_t.shape
    widest = 0.0
    for j in range(m):
        widest = max(widest, anchor_sq[j])
    best = np.empty((1, r), dtype=np.float64)
    best_at = np.empty((1, r), dtype=np.int64)
    approx = np.empty(m, dtype=np.float64)
    for b in range(inner.shape[0]):
        i = lo + b
        near = row_sq[b]
        finite = abs(near + widest) < np.inf
        for j in range(m):
            v = inner[b, j] * -2.0 + near + anchor_sq[j]
            approx[j] = v
            finite &= abs(v) < np.inf  # False for inf and NaN
        if not finite:  # overflow: every distance by differences
            _row_sq_distances(x, i, anchors_t, approx)
            for j in range(m):
                _keep_nearest(nearest, indices, i, j, approx[j], j)
            continue
        for j in range(r):
            _keep_nearest(best, best_at, 0, j, approx[j], j)
        rth = best[0, r - 1]
        for j in range(r, m):
            if approx[j] < rth:
                _keep_nearest(best, best_at, 0, r, approx[j], j)
                rth = best[0, r - 1]
        limit = rth + 2.0 * unit * (near + widest)
        seen = 0
        for j in range(m):
            if approx[j] > limit:
                continue
            v = 0.0
            for f in range(d):
                t = x[i, f] - anchors_t[f, j]
                v += t * t
            _keep_nearest(nearest, indices, i, seen, v, j)
            seen += 1


@njit(cache=True, nogil=True)
def _chunk_sq_distances(x, i, anchors_t, lo, c, out):  # pragma: no cover - compiled
    """out[j] = ||x[i] - anchors[lo + j]||^2 for j < c, summed over the features in order
    (four features a pass, added left to right: the same sums as one feature a pass)."""
    d = x.shape[1]
    for j in range(c):
        out[j] = 0.0
    f = 0
    while f + 4 <= d:
        x0, x1, x2, x3 = x[i, f], x[i, f + 1], x[i, f + 2], x[i, f + 3]
        a0 = anchors_t[f, lo:lo + c]
        a1 = anchors_t[f + 1, lo:lo + c]
        a2 = anchors_t[f + 2, lo:lo + c]
        a3 = anchors_t[f + 3, lo:lo + c]
        for j in range(c):
            t0 = x0 - a0[j]
            t1 = x1 - a1[j]
            t2 = x2 - a2[j]
            t3 = x3 - a3[j]
            out[j] = out[j] + t0 * t0 + t1 * t1 + t2 * t2 + t3 * t3
        f += 4
    while f < d:
        xf = x[i, f]
        af = anchors_t[f, lo:lo + c]
        for j in range(c):
            t = xf - af[j]
            out[j] += t * t
        f += 1


@njit(cache=True, nogil=True)
def nearest_anchors_by_differences(x, anchors_t, r):  # pragma: no cover - compiled
    """:func:`nearest_anchors` with every distance computed by differences.

    x is (n, d) float64, anchors_t (d, m) float64 (the anchors transposed), 1 <= r <= m.
    Returns (indices (n, r) int64, sq_distances (n, r) float64). The anchors are scanned
    ``_CHUNK`` at a time for every row (a chunk stays in cache across the rows), in index
    order for each row.
    """
    n = x.shape[0]
    m = anchors_t.shape[1]
    indices = np.empty((n, r), dtype=np.int64)
    nearest = np.empty((n, r), dtype=np.float64)
    dist = np.empty(min(m, _CHUNK), dtype=np.float64)
    for lo in range(0, m, _CHUNK):
        c = min(_CHUNK, m - lo)
        for i in range(n):
            _chunk_sq_distances(x, i, anchors_t, lo, c, dist)
            for j in range(c):
                _keep_nearest(nearest, indices, i, lo + j, dist[j], lo + j)
    return indices, nearest
