"""k-means++ (D^2 sampling) and farthest traversal over a squared-distance callback.

Both seedings only need "squared distance of every point to points i_1..i_m", so they are
written once over such a callback and serve every space the engine seeds in:

- :func:`euclidean_sq_dist_to`: rows of a dense array (:mod:`streamkm.batch`'s k-means);
- :func:`kernel_sq_dist_to`: a kernel's feature space, distances computed from the rows
  (the mini-batch engine's initialisation);
- :func:`gram_sq_dist_to`: a kernel's feature space from a precomputed kernel matrix or
  its factor (:class:`streamkm.batch.KernelKMeans`, kernel Lloyd runs).

A callback maps an int64 index array of length m to the float64 squared distances
(n_samples, m) of every point to those points.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np

from streamkm._numba.seeding import update_min_sq_dist

if TYPE_CHECKING:
    from streamkm._core.kernel_lloyd import Gram


class KernelBlocks(Protocol):
    """What a seeding needs of a kernel (a :class:`streamkm.kernels.KernelSpec` has it)."""

    def block(self, x: np.ndarray, y: np.ndarray) -> np.ndarray: ...

    def diagonal(self, x: np.ndarray) -> np.ndarray: ...

__all__ = ["KernelBlocks", "SqDistTo", "d2_sampling", "farthest_first", "euclidean_sq_dist_to",
           "kernel_sq_dist_to", "gram_sq_dist_to", "greedy_trials"]

#: ``sq_dist_to(indices)`` -> float64 array (n_samples, len(indices)).
SqDistTo = Callable[[np.ndarray], np.ndarray]


def greedy_trials(k: int) -> int:
    """Candidates per round of greedy k-means++ (Arthur and Vassilvitskii's 2 + ln k)."""
    return 2 + int(np.log(k))


def _one(sq_dist_to: SqDistTo, index: int) -> np.ndarray:
    return np.array(sq_dist_to(np.array([index], dtype=np.int64))[:, 0], dtype=np.float64)


def d2_sampling(
    n_samples: int, k: int, sq_dist_to: SqDistTo, rng: np.random.Generator, *,
    n_local_trials: int = 1,
) -> np.ndarray:
    """k-means++ seeding (Arthur & Vassilvitskii, 2007) over an abstract squared distance.

    The first index is uniform. Each next round draws ``n_local_trials`` candidates, each
    with probability proportional to its squared distance to the nearest index chosen so
    far (chosen points weigh 0), and keeps the candidate that lowers the sum of those
    distances most (greedy k-means++; one trial is plain k-means++). When every remaining
    distance is zero (fewer distinct points than k) the next index is uniform among those
    not chosen.

    Parameters
    ----------
    n_samples : int
        Number of points.
    k : int
        Number of indices to choose, 1 <= k <= n_samples.
    sq_dist_to : callable
        ``sq_dist_to(indices)`` returns the squared distances (n_samples, len(indices)) of
        every point to the points ``indices`` (an int64 array).
    rng : numpy.random.Generator
    n_local_trials : int, default=1
        Candidates per round.

    Returns
    -------
    numpy.ndarray of shape (k,), int64
        Distinct indices of the chosen points, in the order chosen.
    """
    chosen = np.empty(k, dtype=np.int64)
    chosen[0] = rng.integers(n_samples)
    min_sq = _one(sq_dist_to, int(chosen[0]))
    taken = np.zeros(n_samples, dtype=bool)
    taken[chosen[0]] = True
    for c in range(1, k):
        weights = np.where(taken, 0.0, np.maximum(min_sq, 0.0))
        cumulative = np.cumsum(weights)
        total = cumulative[-1]
        if total <= 0.0:
            idx = int(rng.choice(np.flatnonzero(~taken)))
            chosen[c] = idx
            taken[idx] = True
            np.minimum(min_sq, _one(sq_dist_to, idx), out=min_sq)
            continue
        targets = rng.random() if n_local_trials == 1 else rng.random(n_local_trials)
        candidates = np.atleast_1d(np.searchsorted(cumulative, targets * total, side="right"))
        if candidates.max() >= n_samples:
            # a target rounded up to the total lands past the end: the last point of weight > 0
            candidates = np.minimum(candidates, int(np.flatnonzero(weights)[-1]))
        dist = np.asarray(sq_dist_to(candidates.astype(np.int64)), dtype=np.float64)
        if n_local_trials == 1:
            best = 0
            np.minimum(min_sq, dist[:, 0], out=min_sq)
        else:
            trial = np.minimum(min_sq[:, None], dist)
            best = int(np.argmin(trial.sum(axis=0)))
            min_sq = trial[:, best].copy()
        chosen[c] = candidates[best]
        taken[chosen[c]] = True
    return chosen


def farthest_first(
    n_samples: int, k: int, sq_dist_to: SqDistTo, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Farthest traversal over an abstract squared distance (see :func:`d2_sampling`).

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
    min_sq = _one(sq_dist_to, int(chosen[0]))
    for c in range(1, k):
        idx = int(np.argmax(min_sq))
        chosen[c] = idx
        np.minimum(min_sq, _one(sq_dist_to, idx), out=min_sq)
    return chosen, min_sq


def euclidean_sq_dist_to(x: np.ndarray) -> SqDistTo:
    """Squared Euclidean distances (float64) of every row of ``x`` to rows ``indices``."""

    def sq_dist_to(indices: np.ndarray) -> np.ndarray:
        out = np.full((indices.shape[0], x.shape[0]), np.inf)
        for col, i in enumerate(indices):
            update_min_sq_dist(x, x[i], out[col])
        return out.T

    return sq_dist_to


def kernel_sq_dist_to(kernel: KernelBlocks, x: np.ndarray) -> SqDistTo:
    """Squared feature-space distances of ``kernel`` of every row of ``x`` to rows
    ``indices``: K(x, x) - 2 K(x, x_i) + K(x_i, x_i), clipped at 0, from kernel blocks."""
    diag = kernel.diagonal(x).astype(np.float64)

    def sq_dist_to(indices: np.ndarray) -> np.ndarray:
        block = kernel.block(x, np.ascontiguousarray(x[indices]))
        d = diag[:, None] - 2.0 * block + diag[indices][None, :]
        return np.maximum(d, 0.0).astype(np.float64)

    return sq_dist_to


def gram_sq_dist_to(kernel_matrix: Gram, diag: np.ndarray) -> SqDistTo:
    """Squared feature-space distances from a symmetric kernel matrix (or its factor) and
    its diagonal ``diag`` (float64): K(x, x) - 2 K(x, x_i) + K(x_i, x_i), not clipped."""
    from streamkm._core.kernel_lloyd import gram_columns

    def sq_dist_to(indices: np.ndarray) -> np.ndarray:
        # column by column: K[:, i] of a factor is a matrix-vector product, the same numbers
        # whichever other columns are asked for
        columns = np.stack([gram_columns(kernel_matrix, int(i)) for i in indices], axis=1)
        return diag[:, None] - 2.0 * columns.astype(np.float64) + diag[indices][None, :]

    return sq_dist_to
