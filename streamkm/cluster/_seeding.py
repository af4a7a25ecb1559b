"""Seeding in a kernel's feature space: kernel k-means++ and farthest traversal.

Both return indices of rows of the sample; each chosen row becomes a center
phi(x_c) (a convex combination with a single element).
"""

from __future__ import annotations

import numpy as np

from streamkm._core.seeding import d2_sampling, farthest_first, greedy_trials, kernel_sq_dist_to
from streamkm.kernels import KernelSpec

__all__ = ["kernel_kmeans_plusplus", "kernel_farthest_traversal"]


def kernel_kmeans_plusplus(
    x: np.ndarray, n_clusters: int, kernel: KernelSpec, rng: np.random.Generator,
    n_local_trials: int | None = None,
) -> np.ndarray:
    """Greedy kernel k-means++ (:func:`streamkm._core.seeding.d2_sampling`) with
    ``n_local_trials`` candidates per round (default 2 + floor(ln k))."""
    if n_local_trials is None:
        n_local_trials = greedy_trials(n_clusters)
    return d2_sampling(x.shape[0], n_clusters, kernel_sq_dist_to(kernel, x), rng,
                       n_local_trials=n_local_trials)


def kernel_farthest_traversal(
    x: np.ndarray, n_clusters: int, kernel: KernelSpec, rng: np.random.Generator
) -> np.ndarray:
    """Farthest traversal: first center uniform, each next one the row farthest from all chosen."""
    return farthest_first(x.shape[0], n_clusters, kernel_sq_dist_to(kernel, x), rng)[0]
