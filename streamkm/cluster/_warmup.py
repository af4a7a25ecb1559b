"""Warm-up of candidate initialisations on the initialisation sample.

The sample's kernel matrix is computed once; each candidate then runs full-batch kernel
k-means from its seed rows on the sample (:func:`streamkm._core.kernel_lloyd.kernel_lloyd`, the
implementation of exact :class:`streamkm.batch.KernelKMeans`: per-cluster kernel sums
updated by the rows that changed cluster, the GEMM in the kernel matrix's dtype) for at most
``max_steps`` center updates, stopping earlier once its assignment of the sample no longer
changes. A cluster left empty takes the sample row farthest from its center (from a cluster
with at least two rows), so all k centers stay distinct means of sample rows. The centers
are the cluster means, handed on as convex weights over the sample rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamkm._core.kernel_lloyd import Gram, gram_columns, kernel_lloyd

__all__ = ["WarmedCandidate", "warm_up"]


@dataclass(frozen=True)
class WarmedCandidate:
    """Centers as convex weights over the sample rows, and their sample objective."""

    weights: np.ndarray  # (k, n_sample), float64, rows sum to 1
    objective: float  # mean over sample rows of the squared distance to the nearest center
    n_steps: int  # center updates run


def warm_up(
    kmat: Gram, diag: np.ndarray, seeds: np.ndarray, *, max_steps: int,
) -> WarmedCandidate:
    """Warm up the centers seeded at sample rows ``seeds`` on the sample kernel matrix
    ``kmat`` (symmetric, K(x, x) = ``diag``; or its factor); ``max_steps=0`` keeps the seed rows."""
    n = kmat.shape[0]
    k = seeds.shape[0]
    diag = np.asarray(diag, dtype=np.float64)
    weights = np.zeros((k, n))
    if max_steps == 0:
        weights[np.arange(k), seeds] = 1.0
        to_seeds = diag[:, None] - 2.0 * gram_columns(kmat, seeds) + diag[seeds][None, :]
        objective = float(np.maximum(to_seeds.min(axis=1), 0.0).mean())
        return WarmedCandidate(weights, objective, 0)
    # kernel_lloyd's first center update is the one from its initial assignment to the seeds
    run = kernel_lloyd(kmat, seeds, max_iter=max_steps - 1, diag=diag)
    weights[run.labels, np.arange(n)] = 1.0 / run.cluster_sizes[run.labels]
    return WarmedCandidate(weights, run.nearest_objective, run.n_iter + 1)
