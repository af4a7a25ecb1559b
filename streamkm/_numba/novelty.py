"""Kernels of the novelty score: conformal p-values against per-cluster buffers of recent
members' squared kernel distances, and the buffers' update.

A cluster's buffer is one row of a (k, window) ring buffer (``ring``, with ``heads`` the
next slot to overwrite and ``sizes`` the values held; slots never written hold +inf);
``ordered`` holds each row sorted ascending, so its first ``sizes[j]`` entries are the
buffer's values in order, for a binary search per record.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def conformal_pvalues(labels, sq_dist, ordered, sizes, min_members, out):  # pragma: no cover
    """out[i] = (1 + #{v in buffer(l) : v >= d_i}) / (n_l + 1), l = labels[i], d_i = sq_dist[i].

    ``n_l = sizes[l]`` values ``ordered[l, :n_l]`` sorted ascending; a cluster holding fewer
    than ``min_members`` values (or none) gives 1.0 (not yet calibrated: never unusual).
    The search is branch-free (a record's distance says nothing about the next one's, so a
    branching search would mispredict half its steps).
    """
    for i in range(labels.shape[0]):
        j = labels[i]
        n = sizes[j]
        if n < min_members or n == 0:
            out[i] = 1.0
            continue
        d = np.float64(sq_dist[i])
        base = 0
        length = n
        while length > 1:
            half = length // 2
            base = base + half if ordered[j, base + half] < d else base
            length -= half
        first_at_least = base + (1 if ordered[j, base] < d else 0)
        out[i] = (1.0 + (n - first_at_least)) / (n + 1.0)
    return out


@njit(cache=True, nogil=True)
def push_members(labels, sq_dist, ring, heads, sizes, touched):  # pragma: no cover
    """Append each row's distance to its cluster's ring buffer (the oldest overwritten once
    full), in row order; ``touched[j]`` is set for every cluster that got a row."""
    window = ring.shape[1]
    for i in range(labels.shape[0]):
        j = labels[i]
        ring[j, heads[j]] = np.float64(sq_dist[i])
        heads[j] = (heads[j] + 1) % window
        if sizes[j] < window:
            sizes[j] += 1
        touched[j] = True
    return touched
