"""Seeding in a kernel's feature space: kernel k-means++ and farthest traversal.

Both return indices of rows of the sample; each chosen row becomes a center
phi(x_c) (a convex combination with a single element).
"""

from __future__ import annotations

import numpy as np

from streamkm.batch.seeding import farthest_first
from streamkm.kernels import KernelSpec

__all__ = ["kernel_kmeans_plusplus", "kernel_farthest_traversal"]


def _sq_dist_to(kernel: KernelSpec, x: np.ndarray, diag: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Squared feature-space distances of every row of x to rows idx, shape (n, len(idx))."""
    block = kernel.block(x, np.ascontiguousarray(x[idx]))
    d = diag[:, None] - 2.0 * block + diag[idx][None, :]
    return np.maximum(d, 0.0)


def kernel_kmeans_plusplus(
    x: np.ndarray, n_clusters: int, kernel: KernelSpec, rng: np.random.Generator,
    n_local_trials: int | None = None,
) -> np.ndarray:
    """Greedy kernel k-means++: first center uniform, then D^2 sampling with local trials.

    At each round ``n_local_trials`` candidates (default 2 + floor(ln k)) are drawn with
    probability proportional to the current minimum squared kernel distance, and the one
    that lowers the total potential most is kept.
    """
    n = x.shape[0]
    if n_local_trials is None:
        n_local_trials = 2 + int(np.log(n_clusters))
    diag = kernel.diagonal(x).astype(np.float64)
    centers = np.empty(n_clusters, dtype=np.int64)
    centers[0] = rng.integers(n)
    closest = _sq_dist_to(kernel, x, diag, centers[:1])[:, 0].astype(np.float64)
    for c in range(1, n_clusters):
        potential = closest.sum()
        if potential <= 0.0:
            candidates = rng.integers(n, size=n_local_trials)
        else:
            cum = np.cumsum(closest)
            candidates = np.searchsorted(cum, rng.random(n_local_trials) * potential, side="right")
            candidates = np.minimum(candidates, n - 1)
        dist = _sq_dist_to(kernel, x, diag, candidates).astype(np.float64)
        new_closest = np.minimum(closest[:, None], dist)
        best = int(np.argmin(new_closest.sum(axis=0)))
        centers[c] = candidates[best]
        closest = new_closest[:, best]
    return centers


def kernel_farthest_traversal(
    x: np.ndarray, n_clusters: int, kernel: KernelSpec, rng: np.random.Generator
) -> np.ndarray:
    """Farthest traversal: first center uniform, each next one the row farthest from all chosen."""
    diag = kernel.diagonal(x).astype(np.float64)

    def sq_dist_to(i: int) -> np.ndarray:
        return _sq_dist_to(kernel, x, diag, np.array([i]))[:, 0].astype(np.float64)

    return farthest_first(x.shape[0], n_clusters, sq_dist_to, rng)[0]
