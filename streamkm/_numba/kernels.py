"""Element-wise kernel transforms and distance blocks.

The expensive part of a kernel block K(X, Y) is the inner-product matrix X @ Y.T, which the
callers compute with a BLAS GEMM; these kernels turn it into kernel values in place, in the
dtype of the input (float32 stays float32).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streamkm._numba.centers import segment_sums_rows
from streamkm._numba.fastexp import fast_exp


@njit(inline="always")
def _rbf_value(inner, xi, yj, g, two):  # pragma: no cover - compiled
    """exp(-g * max(xi + yj - two * inner, 0)); ``g`` and ``two`` carry the precision."""
    d = xi + yj - two * inner
    zero = two - two
    if d < zero:
        d = zero
    return fast_exp(-g * d)


@njit(cache=True, nogil=True, fastmath={"contract"})
def rbf_from_inner(inner, x_sq, y_sq, gamma):  # pragma: no cover - compiled
    """Turn inner products into exp(-gamma * ||x - y||^2), in place, in inner's precision.

    ``inner[i, j] = <x_i, y_j>``, ``x_sq``/``y_sq`` the squared row norms. Squared distances
    below zero (rounding) are clipped to zero. exp is :func:`fastexp.fast_exp` (relative
    error bounds in that module), one vectorised loop per row.
    """
    n, m = inner.shape
    g = inner.dtype.type(gamma)
    two = inner.dtype.type(2.0)
    for i in range(n):
        xi = x_sq[i]
        row = inner[i]
        for j in range(m):
            row[j] = _rbf_value(row[j], xi, y_sq[j], g, two)
    return inner


#: rows and columns of the tiles the mirror of :func:`rbf_symmetric_from_upper` copies
_MIRROR_TILE = 64


@njit(cache=True, nogil=True, fastmath={"contract"})
def rbf_symmetric_from_upper(inner, sq, gamma):  # pragma: no cover - compiled
    """:func:`rbf_from_inner` of a symmetric block K(x, x) given its upper triangle.

    ``inner`` is (n, n) with ``inner[i, j] = <x_i, x_j>`` for j >= i (below the diagonal
    anything), ``sq`` the squared row norms. The upper triangle becomes rbf values, in
    place, each computed as :func:`rbf_from_inner` computes it (so the same bits), and is
    copied below the diagonal tile by tile (a row-by-row transpose touches a new cache line
    per value). Returns ``inner``, symmetric.
    """
    n = inner.shape[0]
    g = inner.dtype.type(gamma)
    two = inner.dtype.type(2.0)
    for i in range(n):
        xi = sq[i]
        row = inner[i]
        for j in range(i, n):
            row[j] = _rbf_value(row[j], xi, sq[j], g, two)
    tile = _MIRROR_TILE
    for top in range(0, n, tile):
        for left in range(top, n, tile):
            for i in range(top, min(top + tile, n)):
                for j in range(max(left, i + 1), min(left + tile, n)):
                    inner[j, i] = inner[i, j]
    return inner


@njit(cache=True, nogil=True, fastmath={"contract"})
def rbf_segment_sums(inner, x_sq, y_sq, gamma, lo, hi, weights, out):  # pragma: no cover
    """:func:`rbf_from_inner` fused with the engine's segment sums.

    Turns ``inner`` into rbf values in place and adds
    ``sum_{lo[s] <= c < hi[s]} weights[c] * K[x, c]`` to ``out[x, s]`` (float64), four rows
    at a time while they are still in cache: what
    :func:`streamkm._numba.centers.segment_inner_products` does on the finished block.
    (The sums live in their own function: they need reassociation to vectorise, which the
    exp's rounding trick must not get.)
    """
    n, m = inner.shape
    g = inner.dtype.type(gamma)
    two = inner.dtype.type(2.0)
    for first in range(0, n, 4):
        last = min(n, first + 4)
        for i in range(first, last):
            xi = x_sq[i]
            row = inner[i]
            for j in range(m):
                row[j] = _rbf_value(row[j], xi, y_sq[j], g, two)
        segment_sums_rows(inner, first, last, lo, hi, weights, out)
    return out


@njit(cache=True, nogil=True)
def polynomial_from_inner(inner, gamma, coef0, degree):  # pragma: no cover - compiled
    """Turn inner products into (gamma * <x, y> + coef0) ** degree, in place."""
    n, m = inner.shape
    g = inner.dtype.type(gamma)
    c = inner.dtype.type(coef0)
    for i in range(n):
        for j in range(m):
            inner[i, j] = (g * inner[i, j] + c) ** degree
    return inner


@njit(cache=True, nogil=True)
def cosine_from_inner(inner, x_inv_norm, y_inv_norm):  # pragma: no cover - compiled
    """Turn inner products into cosine similarities, in place.

    ``x_inv_norm[i]`` is 1 / ||x_i|| (0 for a zero row, whose feature vector is 0).
    """
    n, m = inner.shape
    for i in range(n):
        xi = x_inv_norm[i]
        for j in range(m):
            inner[i, j] = inner[i, j] * xi * y_inv_norm[j]
    return inner


@njit(cache=True, nogil=True, fastmath={"contract"})
def laplacian_block(x, y, gamma, out):  # pragma: no cover - compiled
    """out[i, j] = exp(-gamma * ||x_i - y_j||_1)."""
    n, d = x.shape
    m = y.shape[0]
    g = out.dtype.type(gamma)
    for i in range(n):
        row = out[i]
        for j in range(m):
            acc = 0.0
            for f in range(d):
                acc += abs(x[i, f] - y[j, f])
            row[j] = fast_exp(-g * out.dtype.type(acc))
    return out
