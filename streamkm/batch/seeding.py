"""Seeding: k-means++ (D^2 sampling) and farthest traversal.

Both strategies only need "squared distance of every point to point i", so they are written
once over such a function and used for Euclidean input here and for feature-space distances
by :class:`streamkm.batch.KernelKMeans`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from streamkm._numba.seeding import update_min_sq_dist
from streamkm._validation import check_array, check_random_state
from streamkm.batch._common import check_n_clusters

__all__ = ["kmeans_plusplus", "farthest_traversal", "d2_sampling", "farthest_first"]

SqDistTo = Callable[[int], np.ndarray]


def d2_sampling(
    n_samples: int, k: int, sq_dist_to: SqDistTo, rng: np.random.Generator
) -> np.ndarray:
    """k-means++ seeding over an abstract squared distance.

    The first index is uniform; each next index is drawn with probability proportional to
    its squared distance to the nearest index chosen so far. When every remaining distance is
    zero (fewer distinct points than k) the next index is uniform among those not chosen.

    Parameters
    ----------
    n_samples : int
        Number of points.
    k : int
        Number of indices to choose, 1 <= k <= n_samples.
    sq_dist_to : callable
        ``sq_dist_to(i)`` returns the float64 squared distances (n_samples,) of every point
        to point ``i``.
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray of shape (k,), int64
        Distinct indices of the chosen points.
    """
    chosen = np.empty(k, dtype=np.int64)
    chosen[0] = rng.integers(n_samples)
    min_sq = np.array(sq_dist_to(int(chosen[0])), dtype=np.float64)
    taken = np.zeros(n_samples, dtype=bool)
    taken[chosen[0]] = True
    for c in range(1, k):
        weights = np.where(taken, 0.0, np.maximum(min_sq, 0.0))
        cumulative = np.cumsum(weights)
        total = cumulative[-1]
        if total > 0.0:
            idx = int(np.searchsorted(cumulative, rng.random() * total, side="right"))
            idx = min(idx, n_samples - 1)
        else:
            idx = int(rng.choice(np.flatnonzero(~taken)))
        chosen[c] = idx
        taken[idx] = True
        np.minimum(min_sq, sq_dist_to(idx), out=min_sq)
    return chosen


def farthest_first(
    n_samples: int, k: int, sq_dist_to: SqDistTo, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Farthest traversal over an abstract squared distance.

    The first index is uniform; each next index is the point farthest from the chosen ones
    (the first such index on ties).

    Returns
    -------
    chosen : numpy.ndarray of shape (k,), int64
    min_sq_dist : numpy.ndarray of shape (n_samples,), float64
        Squared distance of every point to its nearest chosen point, after all k.
    """
    chosen = np.empty(k, dtype=np.int64)
    chosen[0] = rng.integers(n_samples)
    min_sq = np.array(sq_dist_to(int(chosen[0])), dtype=np.float64)
    for c in range(1, k):
        idx = int(np.argmax(min_sq))
        chosen[c] = idx
        np.minimum(min_sq, sq_dist_to(idx), out=min_sq)
    return chosen, min_sq


def euclidean_sq_dist_to(x: np.ndarray) -> SqDistTo:
    """``sq_dist_to(i)``: float64 squared Euclidean distances of every row of ``x`` to row i."""

    def sq_dist_to(i: int) -> np.ndarray:
        out = np.full(x.shape[0], np.inf)
        update_min_sq_dist(x, x[i], out)
        return out

    return sq_dist_to


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
