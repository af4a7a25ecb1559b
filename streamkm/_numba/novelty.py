"""Kernels of the novelty score: conformal p-values against per-cluster buffers of recent
members' squared kernel distances, and the buffers' update.

A cluster's buffer is one row of a (k, window) ring buffer (``ring``, with ``heads`` the
next slot to overwrite and ``sizes`` the values held); ``ordered`` holds the same values
sorted ascending in its first ``sizes[j]`` entries, for a binary search per record.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def conformal_pvalues(labels, sq_dist, ordered, sizes, min_members, out):  # pragma: no cover
    """out[i] = (1 + #{v in buffer(l) : v >= d_i}) / (n_l + 1), l = labels[i], d_i = sq_dist[i].

    ``n_l = sizes[l]`` values ``ordered[l, :n_l]`` sorted ascending; a cluster holding fewer
    than ``min_members`` values gives 1.0 (not yet calibrated: never unusual).
    """
    for i in range(labels.shape[0]):
        j = labels[i]
        n = sizes[j]
        if n < min_members:
            out[i] = 1.0
            continue
        d = np.float64(sq_dist[i])
        lo = 0
        hi = n
        while lo < hi:  # first index with ordered[j, index] >= d
            mid = (lo + hi) // 2
            if ordered[j, mid] < d:
                lo = mid + 1
            else:
                hi = mid
        out[i] = (1.0 + (n - lo)) / (n + 1.0)
    return out


@njit(cache=True, nogil=True)
def push_members(labels, sq_dist, ring, heads, sizes, ordered):  # pragma: no cover
    """Append each row's distance to its cluster's ring buffer (oldest overwritten once
    full), in row order, then re-sort the buffers that changed into ``ordered``."""
    k, window = ring.shape
    touched = np.zeros(k, dtype=np.bool_)
    for i in range(labels.shape[0]):
        j = labels[i]
        ring[j, heads[j]] = np.float64(sq_dist[i])
        heads[j] = (heads[j] + 1) % window
        if sizes[j] < window:
            sizes[j] += 1
        touched[j] = True
    for j in range(k):
        if touched[j]:
            n = sizes[j]
            ordered[j, :n] = np.sort(ring[j, :n])
    return sizes
