"""Kernels of the novelty score: conformal p-values against per-cluster buffers of recent
members' squared kernel distances, and the buffers' update.

A cluster's buffer is one row of a (k, window) ring buffer (``ring``, with ``heads`` the
next slot to overwrite and ``sizes`` the values held; slots never written hold +inf);
``ordered`` holds each row sorted ascending, so its first ``sizes[j]`` entries are the
buffer's values in order, for a binary search per record. :func:`push_members` keeps
``ordered`` sorted as it writes the ring: a cluster given fewer values than the window
merges its new values (sorted) into ``ordered`` less the values they overwrote, one pass
over the row; only a cluster given a whole window's worth is sorted anew.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def conformal_pvalues(labels, sq_dist, ordered, sizes, min_members, out):  # pragma: no cover
    """out[i] = (1 + #{v in buffer(l) : v >= d_i}) / (n_l + 1), l = labels[i], d_i = sq_dist[i].

    ``n_l = sizes[l]`` values ``ordered[l, :n_l]`` sorted ascending; a cluster holding fewer
    than ``min_members`` values (or none) gives 1.0 (not yet calibrated: never unusual).
    Returns the number of such rows (0 once every cluster a row went to is calibrated).
    The search is branch-free (a record's distance says nothing about the next one's, so a
    branching search would mispredict half its steps).
    """
    uncalibrated = 0
    for i in range(labels.shape[0]):
        j = labels[i]
        n = sizes[j]
        if n < min_members or n == 0:
            out[i] = 1.0
            uncalibrated += 1
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
    return uncalibrated


@njit(cache=True, nogil=True)
def push_members(labels, sq_dist, ring, ordered, heads, sizes):  # pragma: no cover
    """Append each row's distance to its cluster's ring buffer (the oldest overwritten once
    full; a slot never written holds +inf), in row order, and keep ``ordered`` equal to each
    ring row sorted ascending.

    A cluster given m < window values overwrites m values it held before the batch (no slot
    twice): its new row of ``ordered`` is one merge of the old row, less the overwritten
    values, with the new ones sorted (O(window + m log m)). A cluster given at least a
    window's worth is sorted anew.
    """
    k, window = ring.shape
    n = labels.shape[0]
    starts = np.zeros(k + 1, dtype=np.int64)
    for i in range(n):
        starts[labels[i] + 1] += 1
    for j in range(k):
        starts[j + 1] += starts[j]
    fill = starts[:k].copy()
    new = np.empty(n, dtype=np.float64)
    old = np.empty(n, dtype=np.float64)
    for i in range(n):
        j = labels[i]
        v = np.float64(sq_dist[i])
        old[fill[j]] = ring[j, heads[j]]
        new[fill[j]] = v
        fill[j] += 1
        ring[j, heads[j]] = v
        heads[j] = (heads[j] + 1) % window
        if sizes[j] < window:
            sizes[j] += 1
    merged = np.empty(window, dtype=np.float64)
    for j in range(k):
        m = starts[j + 1] - starts[j]
        if m == 0:
            continue
        if m >= window:
            ordered[j, :] = np.sort(ring[j])
            continue
        added = np.sort(new[starts[j]:starts[j + 1]])
        gone = np.sort(old[starts[j]:starts[j + 1]])
        g = 0
        a = 0
        out = 0
        for i in range(window):
            v = ordered[j, i]
            if g < m and v == gone[g]:  # gone is a sorted sub-multiset of the row
                g += 1
                continue
            while a < m and added[a] < v:
                merged[out] = added[a]
                out += 1
                a += 1
            merged[out] = v
            out += 1
        while a < m:
            merged[out] = added[a]
            out += 1
            a += 1
        ordered[j, :] = merged


@njit(cache=True, nogil=True, inline="always")
def _largest_at(values, size):
    """Index of the largest of ``values[:size]`` (the first one among ties)."""
    at = 0
    for u in range(1, size):
        if values[u] > values[at]:
            at = u
    return at


@njit(cache=True, nogil=True)
def nearest_support_means(kblock, first, second, lo, hi, x_diag, s_diag, m,
                          out):  # pragma: no cover
    """out[i] = mean of the ``m`` smallest squared feature distances from row i to the
    support rows of its nearest and second-nearest clusters ``first[i]`` and ``second[i]``
    (columns ``lo[j]:hi[j]`` of ``kblock``; ``second[i]`` = -1: the nearest only),
    ``x_diag[i] + s_diag[s] - 2 kblock[i, s]`` clipped at 0; all of them when those
    supports hold fewer than ``m``, 0.0 when they hold none.

    Only ``s_diag - 2 kblock`` is compared (the row's own ``x_diag`` adds the same to every
    distance). Per row, without a sort: the row's values are gathered into a buffer; split
    into ``m`` groups, the largest of the groups' minima is at least the ``m``-th smallest
    value (the minima are ``m`` distinct entries), so only values at most that bound are
    kept, and the bound is taken again over the kept ones while more than ``2 m`` are
    left; the ``m`` smallest of the last few are held in a small array whose largest a
    smaller value replaces.
    """
    n = kblock.shape[0]
    widest = 0
    for j in range(lo.shape[0]):
        widest = max(widest, hi[j] - lo[j])
    buf = np.empty(2 * widest + 1, dtype=np.float64)
    best = np.empty(max(m, 1), dtype=np.float64)
    for i in range(n):
        c = 0
        for seg in range(2):
            j = first[i] if seg == 0 else second[i]
            if j < 0:
                continue
            for t in range(lo[j], hi[j]):
                buf[c] = np.float64(s_diag[t]) - 2.0 * np.float64(kblock[i, t])
                c += 1
        if c == 0:
            out[i] = 0.0
            continue
        size = min(m, c)
        while c > 2 * size:
            g = c // size
            bound = -np.inf
            for q in range(size):
                a = q * g
                e = a + g if q < size - 1 else c
                low = buf[a]
                for t in range(a + 1, e):
                    low = min(low, buf[t])
                bound = max(bound, low)
            kept = 0
            for t in range(c):
                v = buf[t]
                if v <= bound:
                    buf[kept] = v
                    kept += 1
            if kept == c:  # ties at the bound: nothing more to drop
                break
            c = kept
        for t in range(size):
            best[t] = buf[t]
        if c > size:
            at = _largest_at(best, size)
            for t in range(size, c):
                v = buf[t]
                if v < best[at]:
                    best[at] = v
                    at = _largest_at(best, size)
        total = 0.0
        xi = np.float64(x_diag[i])
        for t in range(size):
            total += max(xi + best[t], 0.0)
        out[i] = total / size
