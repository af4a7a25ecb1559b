"""Exact k-means on the real line by dynamic programming."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm._core.validation import check_array
from streamkm._numba.dp1d import kmeans_1d_dp
from streamkm.batch._common import check_n_clusters
from streamkm.exceptions import ValidationError

__all__ = ["kmeans_1d"]


def _as_column(x: Any) -> np.ndarray:
    """Checked (n_samples, 1) float array from 1-D or single-column input."""
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"x could not be converted to an array: {exc}") from exc
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[1] != 1:
        raise ValidationError(
            f"x must be 1-D or of shape (n_samples, 1), got shape {arr.shape!r}"
        )
    return check_array(arr, name="x")


def kmeans_1d(x: Any, k: int) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Globally optimal k-means clustering of one-dimensional data.

    On the line an optimal clustering splits the sorted values into k contiguous runs, so it
    is found exactly by dynamic programming over "the first i values in m clusters"
    (Foundations of Data Science, section on 1-D k-means). The O(k n^2) recursion is brought to
    O(k n log n) by divide and conquer over the monotone optimal split points, plus the
    O(n log n) sort.

    Parameters
    ----------
    x : array-like of shape (n_samples,) or (n_samples, 1)
        Finite values.
    k : int
        Number of clusters, 1 <= k <= n_samples.

    Returns
    -------
    labels : numpy.ndarray of shape (n_samples,), int64
        Cluster of each value, in the input order; clusters are numbered by increasing center.
    centers : numpy.ndarray of shape (k,)
        Cluster means, ascending, in x's float dtype.
    cost : float
        Sum of squared distances of the values to their cluster's mean (the optimum).
    boundaries : numpy.ndarray of shape (k + 1,), int64
        Cluster j holds the sorted values ``np.sort(x)[boundaries[j]:boundaries[j + 1]]``;
        ``boundaries[0] == 0`` and ``boundaries[k] == n_samples``.

    Notes
    -----
    Memory is O(k n) for the table of split points used to backtrack the boundaries. When
    values repeat, equal values may fall in two adjacent clusters of an optimal solution.
    """
    values = _as_column(x)[:, 0]
    n = values.shape[0]
    k = check_n_clusters(k, n)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order].astype(np.float64)
    boundaries, _ = kmeans_1d_dp(sorted_values, k)
    sizes = np.diff(boundaries)
    sorted_labels = np.repeat(np.arange(k, dtype=np.int64), sizes)
    sums = np.add.reduceat(sorted_values, boundaries[:-1])
    # a run's mean lies within the run, and the runs are sorted; rounding of sum / size can
    # step outside it (four equal values whose mean is not that value), so clip to the run
    centers64 = np.clip(sums / sizes, sorted_values[boundaries[:-1]],
                        sorted_values[boundaries[1:] - 1])
    cost = float(np.sum((sorted_values - centers64[sorted_labels]) ** 2))
    labels = np.empty(n, dtype=np.int64)
    labels[order] = sorted_labels
    return labels, centers64.astype(values.dtype), cost, boundaries
