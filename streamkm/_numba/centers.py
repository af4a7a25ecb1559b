"""Kernels of the mini-batch engine: inner products with centers, nearest centers and the
assembly of the centers' Gram matrices after an update.

All are serial and release the GIL, so the engine can run them on row chunks from several
threads (see :mod:`streamkm._core.threads`).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, fastmath=True)
def segment_sums_rows(kblock, first, last, lo, hi, weights, out):  # pragma: no cover
    """:func:`segment_inner_products` on the rows ``first:last`` only."""
    k = lo.shape[0]
    i = first
    while i + 4 <= last:
        r0 = kblock[i]
        r1 = kblock[i + 1]
        r2 = kblock[i + 2]
        r3 = kblock[i + 3]
        for j in range(k):
            a0 = 0.0
            a1 = 0.0
            a2 = 0.0
            a3 = 0.0
            for c in range(lo[j], hi[j]):
                w = weights[c]
                a0 += w * r0[c]
                a1 += w * r1[c]
                a2 += w * r2[c]
                a3 += w * r3[c]
            out[i, j] += a0
            out[i + 1, j] += a1
            out[i + 2, j] += a2
            out[i + 3, j] += a3
        i += 4
    while i < last:
        row = kblock[i]
        for j in range(k):
            acc = 0.0
            for c in range(lo[j], hi[j]):
                acc += weights[c] * row[c]
            out[i, j] += acc
        i += 1


@njit(cache=True, nogil=True)
def segment_inner_products(kblock, lo, hi, weights, out):  # pragma: no cover - compiled
    """out[x, j] += sum_{lo[j] <= c < hi[j]} weights[c] * kblock[x, c].

    Segment j is the contiguous columns ``lo[j]:hi[j]`` of the kernel block (a center's
    support rows, or one batch of them), with weights indexed by column. Accumulates in
    float64; the summation order is free (fastmath) so the loop vectorises, and four rows
    are summed at once so the four reductions hide each other's latency.
    """
    segment_sums_rows(kblock, 0, kblock.shape[0], lo, hi, weights, out)
    return out


@njit(cache=True, nogil=True)
def sum_groups_per_center(group_sums, group_scale, center_groups, out):  # pragma: no cover
    """out[x, j] = sum_{g in center j's groups} group_scale[g] * group_sums[x, g].

    Center j's groups are the contiguous columns ``center_groups[j]:center_groups[j + 1]``
    of ``group_sums``; ``out`` is overwritten.
    """
    n = group_sums.shape[0]
    k = center_groups.shape[0] - 1
    for i in range(n):
        for j in range(k):
            acc = 0.0
            for g in range(center_groups[j], center_groups[j + 1]):
                acc += group_scale[g] * group_sums[i, g]
            out[i, j] = acc
    return out


@njit(cache=True, nogil=True)
def copy_own_segment(kblock, labels, lo, hi, out):  # pragma: no cover - compiled
    """out[x, :hi[l] - lo[l]] = kblock[x, lo[l]:hi[l]] with l = labels[x] (a row's values
    against its own center's columns; the rest of ``out[x]`` is left as is)."""
    n = kblock.shape[0]
    for i in range(n):
        j = labels[i]
        a = lo[j]
        for c in range(hi[j] - a):
            out[i, c] = kblock[i, a + c]
    return out


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def nearest_two_centers(diag, inner, center_sq_norms, labels, min_sq_dist, second_labels,
                        second_sq_dist):  # pragma: no cover - compiled
    """:func:`nearest_center` plus the second-nearest center and its squared distance.

    The first of equally near centers wins; distances are clipped at 0 and their sum,
    returned, is accumulated in float64. The second-nearest center is the nearest of the
    others (the first of equally near ones); with a single center ``second_labels`` is -1
    and ``second_sq_dist`` is +inf.
    """
    n, k = inner.shape
    total = 0.0
    zero = min_sq_dist.dtype.type(0.0)
    for i in range(n):
        best = np.inf
        arg = 0
        runner = np.inf
        arg2 = -1
        for j in range(k):
            d = diag[i] - 2.0 * inner[i, j] + center_sq_norms[j]
            if d < best:
                runner = best
                arg2 = arg if j > 0 else -1
                best = d
                arg = j
            elif d < runner or arg2 < 0:
                runner = d
                arg2 = j
        labels[i] = arg
        v = min_sq_dist.dtype.type(best)
        if v < zero:
            v = zero
        min_sq_dist[i] = v
        total += v
        second_labels[i] = arg2
        w = second_sq_dist.dtype.type(runner)
        if w < zero:
            w = zero
        second_sq_dist[i] = w
    return total


@njit(cache=True, nogil=True)
def nearest_center(diag, inner, center_sq_norms, labels, min_sq_dist):  # pragma: no cover
    """Nearest center of each row and its squared distance (clipped at 0); returns the sum.

    The first of equally near centers wins. The sum is accumulated in float64. (The
    assignment of :func:`nearest_two_centers`, without keeping the second-nearest.)
    """
    n = inner.shape[0]
    return nearest_two_centers(diag, inner, center_sq_norms, labels, min_sq_dist,
                               np.empty(n, dtype=np.int64), np.empty(n, dtype=min_sq_dist.dtype))


@njit(cache=True, nogil=True)
def truncation_starts(group_lo, center_groups, seg_lo, seg_hi, n_new, tau):  # pragma: no cover
    """First old support row each center keeps so that kept old rows + n_new[j] <= tau.

    Center j's rows are ``seg_lo[j]:seg_hi[j]``, its batches (groups) start at
    ``group_lo[center_groups[j]:center_groups[j + 1]]``, oldest first. Whole batches are
    kept from the newest backwards while they fit; centers with ``n_new[j] == 0`` keep
    everything.
    """
    k = n_new.shape[0]
    out = np.empty(k, dtype=np.int64)
    for j in range(k):
        first = center_groups[j]
        last = center_groups[j + 1]
        if n_new[j] == 0:
            out[j] = seg_lo[j]
            continue
        budget = tau - n_new[j]
        keep = seg_hi[j]
        g = last - 1
        while g >= first and seg_hi[j] - group_lo[g] <= budget:
            keep = group_lo[g]
            g -= 1
        out[j] = keep
    return out


@njit(cache=True, nogil=True, fastmath=True)
def assemble_grams(old_flat, old_start, seg_lo, seg_hi, keep_from, new_start, new_members,
                   own_old, own_new, weights, out_start, out_flat, cc):  # pragma: no cover
    """Gram matrices of the updated centers, and their <C_j, C_j> = w^T G_j w.

    Center j had support rows ``seg_lo[j]:seg_hi[j]`` with Gram matrix
    ``old_flat[old_start[j]:]`` (row-major); it keeps rows ``keep_from[j]:seg_hi[j]`` and
    gains the batch rows ``new_members[new_start[j]:new_start[j + 1]]``. ``own_old[x]``
    holds row x's kernel values against its center's old support (from column 0),
    ``own_new[x]`` against its center's new rows. The new Gram matrix
    [[G_kept, K(kept, new)], [K(new, kept), K(new, new)]] is written row-major at
    ``out_flat[out_start[j]:]``, with ``weights`` the new support weights in the same
    order (support j from ``out_start``'s companion offsets); ``cc[j]`` gets w^T G w.
    Centers without new rows are copied unchanged (and keep their ``cc``).
    """
    k = seg_lo.shape[0]
    w_pos = 0
    for j in range(k):
        n_old = seg_hi[j] - seg_lo[j]
        skip = keep_from[j] - seg_lo[j]
        kept = n_old - skip
        m = new_start[j + 1] - new_start[j]
        size = kept + m
        src = old_start[j]
        dst = out_start[j]
        for r in range(m):
            x = new_members[new_start[j] + r]
            for c in range(kept):
                v = own_old[x, skip + c]
                out_flat[dst + (kept + r) * size + c] = v
                out_flat[dst + c * size + kept + r] = v
            for c in range(m):
                out_flat[dst + (kept + r) * size + kept + c] = own_new[x, c]
        if m == 0:
            for r in range(kept):
                out_flat[dst + r * size:dst + (r + 1) * size] = old_flat[
                    src + (skip + r) * n_old + skip:src + (skip + r) * n_old + skip + kept]
            w_pos += size
            continue
        w = weights[w_pos:w_pos + size]
        acc = 0.0
        for r in range(kept):
            from_row = src + (skip + r) * n_old + skip
            to_row = out_flat[dst + r * size:dst + (r + 1) * size]
            to_row[:kept] = old_flat[from_row:from_row + kept]
            row_acc = 0.0
            for c in range(size):
                row_acc += to_row[c] * w[c]
            acc += w[r] * row_acc
        for r in range(kept, size):
            row_acc = 0.0
            for c in range(size):
                row_acc += out_flat[dst + r * size + c] * weights[w_pos + c]
            acc += weights[w_pos + r] * row_acc
        cc[j] = acc
        w_pos += size
    return cc


@njit(cache=True, nogil=True)
def combine_rows(old, new, source, out):  # pragma: no cover - compiled
    """out[i] = old[source[i]] if source[i] < len(old) else new[source[i] - len(old)]:
    the next support rows from the kept old rows and the batch's new rows, in one pass."""
    n_old = old.shape[0]
    d = out.shape[1]
    for i in range(source.shape[0]):
        s = source[i]
        if s < n_old:
            for f in range(d):
                out[i, f] = old[s, f]
        else:
            for f in range(d):
                out[i, f] = new[s - n_old, f]
    return out
