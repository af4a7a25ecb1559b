"""Seeding of the rows of X: k-means++ (D^2 sampling) and farthest traversal.

Both are :func:`streamkm._core.seeding.d2_sampling` / :func:`~streamkm._core.seeding.farthest_first`
over Euclidean distances; the same functions seed in a kernel's feature space.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm._core.seeding import d2_sampling, euclidean_sq_dist_to, farthest_first
from streamkm._core.validation import check_array, check_random_state
from streamkm.batch._common import check_n_clusters

__all__ = ["kmeans_plusplus", "farthest_traversal"]


def _checked(x: Any, k: Any, rng: Any) -> tuple[np.ndarray, int, np.random.Generator]:
    arr = check_array(x)
    return arr, check_n_clusters(k, arr.shape[0]), check_random_state(rng)


def kmeans_plusplus(
    X: Any, k: int, rng: np.random.Generator | int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Choose k initial centers among the rows of X by k-means++ (D^2 sampling).

    The first center is a uniformly random row; each next one is a row drawn with
    probability proportional to its squared distance to the nearest center chosen so far
    (Arthur & Vassilvitskii, 2007). Less easily fooled by outliers than farthest traversal.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    k : int
        Number of centers, 1 <= k <= n_samples.
    rng : numpy.random.Generator, int or None
        Source of randomness.

    Returns
    -------
    centers : numpy.ndarray of shape (k, n_features)
        The chosen rows, in X's float dtype.
    indices : numpy.ndarray of shape (k,), int64
        Their row indices (distinct).
    """
    arr, k, gen = _checked(X, k, rng)
    idx = d2_sampling(arr.shape[0], k, euclidean_sq_dist_to(arr), gen)
    return arr[idx].copy(), idx


def farthest_traversal(
    X: Any, k: int, rng: np.random.Generator | int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Choose k initial centers among the rows of X by farthest traversal.

    The first center is a uniformly random row; each next one is the row farthest from the
    centers chosen so far. The centers are those of the k-center 2-approximation
    (:func:`streamkm.batch.k_center`).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    k : int
        Number of centers, 1 <= k <= n_samples.
    rng : numpy.random.Generator, int or None
        Source of randomness (only the first center is random).

    Returns
    -------
    centers : numpy.ndarray of shape (k, n_features)
        The chosen rows, in X's float dtype.
    indices : numpy.ndarray of shape (k,), int64
        Their row indices (distinct unless X has fewer than k distinct rows).
    """
    arr, k, gen = _checked(X, k, rng)
    idx, _ = farthest_first(arr.shape[0], k, euclidean_sq_dist_to(arr), gen)
    return arr[idx].copy(), idx
