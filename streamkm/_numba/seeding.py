"""Distance updates shared by k-means++ and farthest-traversal seeding."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def update_min_sq_dist(x, center, min_sq_dist):  # pragma: no cover - compiled
    """``min_sq_dist[i] = min(min_sq_dist[i], ||x_i - center||^2)`` in float64, in place."""
    n, d = x.shape
    for i in range(n):
        acc = 0.0
        for f in range(d):
            diff = np.float64(x[i, f]) - np.float64(center[f])
            acc += diff * diff
        if acc < min_sq_dist[i]:
            min_sq_dist[i] = acc
