"""FRUS: initial centers drawn uniformly in the feature range of the data (seed 003's baseline).

Feature-range uniform sampling draws every coordinate of a center independently and
uniformly in ``[min_j, max_j]``, the range of feature j over the rows. It is the
feature-sampling method seed 003 compares RTMM against: unlike a pair of row indices, a
center costs O(n_features) to draw and to use, so FRUS slows down as the dimension grows.

Sparse input (scipy CSR, or any scipy sparse format, converted to CSR) is never densified.
Its feature range is the range of the matrix it represents, implicit zeros included:
``min_j = min(0, smallest stored value)`` and ``max_j = max(0, largest stored value)`` when
column j has fewer stored entries than there are rows, the stored extremes otherwise (both
computed in O(nnz)). The centers themselves are dense: a uniform draw in ``[min_j, max_j]``
is nonzero almost surely whenever ``max_j > min_j``. Only those columns are drawn; a column
of one value (an all-zero column of sparse data, say) holds that value in every center.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm._core.sparse_input import check_sketch_input, is_sparse
from streamkm._core.validation import check_random_state
from streamkm.drift.rtmm import _check_count
from streamkm.exceptions import ParameterError

__all__ = ["feature_range", "frus_centers", "uniform_in_box"]


def feature_range(X: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature minimum and maximum of the rows of ``X``.

    Parameters
    ----------
    X : array-like or scipy sparse matrix, shape (n_samples, n_features)
        The rows; sparse input counts its implicit zeros and is not densified.

    Returns
    -------
    low, high : ndarray, shape (n_features,)
        Column minima and maxima, in X's float dtype (float32 kept, else float64).

    Raises
    ------
    ValidationError
        If ``X`` is not 2-D, empty, not numeric or holds NaN/Inf.
    """
    x = check_sketch_input(X, name="X")
    if is_sparse(x):
        low = x.min(axis=0).toarray().ravel().astype(x.dtype, copy=False)
        high = x.max(axis=0).toarray().ravel().astype(x.dtype, copy=False)
        return low, high
    return x.min(axis=0), x.max(axis=0)


def uniform_in_box(
    low: np.ndarray, high: np.ndarray, m: int, rng: np.random.Generator
) -> np.ndarray:
    """m points, every coordinate j uniform in ``[low[j], high[j]]``, independently.

    Columns with ``high[j] == low[j]`` are not drawn (they hold ``low[j]``), so a box that is
    flat in most directions costs only its varying columns' draws.

    Parameters
    ----------
    low, high : ndarray of float32 or float64, shape (n_features,)
        The box, ``low <= high`` (as returned by :func:`feature_range`).
    m : int
        Number of points, >= 0.
    rng : numpy.random.Generator
        Source of the draws.

    Returns
    -------
    ndarray, shape (m, n_features), in low's dtype
    """
    width = high - low
    varying = np.flatnonzero(width > 0)
    out = np.empty((m, low.shape[0]), dtype=low.dtype)
    out[:] = low
    if m and varying.size:
        unit = rng.random((m, varying.size), dtype=low.dtype)
        # low + width * u can round up past high by an ulp; the box is closed, clip to it
        out[:, varying] = np.minimum(low[varying] + width[varying] * unit, high[varying])
    return out


def frus_centers(X: Any, m: int, *, random_state: Any = None) -> np.ndarray:
    """Draw m centers uniformly at random in the per-feature [min, max] box of ``X`` (FRUS).

    Every coordinate of every center is independent and uniform in the range of its feature
    over the rows of ``X``. O(nnz) to find the range (O(n n_features) for dense input), then
    O(m n_features) to draw (only the columns whose range is not a single value).

    Parameters
    ----------
    X : array-like or scipy sparse matrix, shape (n_samples, n_features)
        The rows. Sparse input is not densified; its range includes the implicit zeros (see
        the module docstring).
    m : int
        Number of centers, >= 0.
    random_state : None, int or numpy.random.Generator
        Seed or generator of the draw.

    Returns
    -------
    ndarray, shape (m, n_features)
        Dense centers in X's float dtype (float32 kept, else float64). Dense and CSR forms of
        the same matrix give the same centers for the same seed.

    Raises
    ------
    ParameterError
        If m is not an integer or m < 0, or ``random_state`` is not a seed or Generator.
    ValidationError
        If ``X`` is not 2-D, empty, not numeric or holds NaN/Inf.
    """
    m = _check_count(m, "m")
    if m < 0:
        raise ParameterError(f"m must be >= 0, got m={m!r}")
    rng = check_random_state(random_state)
    low, high = feature_range(X)
    return uniform_in_box(low, high, m, rng)
