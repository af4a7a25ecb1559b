"""numba kernel of the anchor-graph kernel (``streamkm.kernels.anchor``): each row's nearest
anchors.

Distances are computed by differences in the same order as the k-nn graph kernels
(:func:`streamkm._numba.knn_graph._row_sq_distances`, anchors passed transposed), so a
row's nearest anchors are the same in every call.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streamkm._numba.knn_graph import _row_sq_distances

__all__ = ["nearest_anchors"]


@njit(cache=True)
def nearest_anchors(x, anchors_t, r):  # pragma: no cover - compiled
    """The ``r`` nearest anchors of each row of x and their squared distances, nearest
    first; of equally distant anchors the lower index comes first.

    x is (n, d) float64, anchors_t (d, m) float64 (the anchors transposed), 1 <= r <= m.
    Returns (indices (n, r) int64, sq_distances (n, r) float64).
    """
    n = x.shape[0]
    m = anchors_t.shape[1]
    indices = np.empty((n, r), dtype=np.int64)
    nearest = np.empty((n, r), dtype=np.float64)
    dist = np.empty(m, dtype=np.float64)
    for i in range(n):
        _row_sq_distances(x, i, anchors_t, dist)
        for j in range(m):
            v = dist[j]
            if j >= r and v >= nearest[i, r - 1]:
                continue
            p = min(j, r - 1)
            while p > 0 and nearest[i, p - 1] > v:
                nearest[i, p] = nearest[i, p - 1]
                indices[i, p] = indices[i, p - 1]
                p -= 1
            nearest[i, p] = v
            indices[i, p] = j
    return indices, nearest
