"""k-center clustering by farthest traversal (the 2-approximation)."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm._core.seeding import euclidean_sq_dist_to, farthest_first
from streamkm._core.validation import check_array, check_random_state
from streamkm.batch._common import check_n_clusters

__all__ = ["k_center"]


def k_center(
    X: Any, k: int, *, random_state: np.random.Generator | int | None = None
) -> tuple[np.ndarray, float]:
    """Approximate k-center clustering by farthest traversal.

    Picks a random first center, then repeatedly the point farthest from the centers chosen
    so far. If some k balls of radius r/2 cover the data, every point ends within r of a
    chosen center, so the radius is at most twice the optimum (Foundations of Data Science,
    Theorem 7.3).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    k : int
        Number of centers, 1 <= k <= n_samples.
    random_state : numpy.random.Generator, int or None
        Chooses the first center.

    Returns
    -------
    center_indices : numpy.ndarray of shape (k,), int64
        Row indices of the centers.
    radius : float
        Largest Euclidean distance of a point to its nearest center.
    """
    arr = check_array(X)
    k = check_n_clusters(k, arr.shape[0])
    rng = check_random_state(random_state)
    idx, min_sq = farthest_first(arr.shape[0], k, euclidean_sq_dist_to(arr), rng)
    return idx, float(np.sqrt(min_sq.max()))
