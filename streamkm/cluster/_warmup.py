"""Warm-up of candidate initialisations on the initialisation sample.

The sample's kernel matrix is computed once; each candidate then runs full-batch kernel
k-means from its seed rows on the sample (:func:`streamkm._core.kernel_lloyd.kernel_lloyd`, the
implementation of exact :class:`streamkm.batch.KernelKMeans`: per-cluster kernel sums
updated by the rows that changed cluster, the GEMM in the kernel matrix's dtype) for at most
``max_steps`` center updates, stopping earlier once its assignment of the sample no longer
changes. A cluster left empty takes the sample row farthest from its center (from a cluster
with at least two rows), so all k centers stay distinct means of sample rows. The centers
are the cluster means, handed on as convex weights over the sample rows.

Of the ``n_init`` warmed candidates the model keeps the one :func:`best_warm_start` picks:
the lowest sample objective, or, for a graph kernel, the lowest normalised cut of the
sample's mutual k-nn graph (:func:`streamkm.kernels._auto.mutual_knn_graph`), the criterion
the kernel choice and the stream's kernel refreshes use. A graph kernel's objective can
prefer a start that cuts a connected shape (a kernel fitted on a few thousand rows is only
approximately constant along a shape); the cut scores the partition itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamkm._core.kernel_lloyd import Gram, gram_columns, kernel_lloyd
from streamkm.exceptions import ValidationError
from streamkm.kernels._auto import mutual_knn_graph, normalized_cut

__all__ = ["WarmedCandidate", "best_warm_start", "warm_up"]


@dataclass(frozen=True)
class WarmedCandidate:
    """Centers as convex weights over the sample rows, and their sample objective."""

    weights: np.ndarray  # (k, n_sample), float64, rows sum to 1
    objective: float  # mean over sample rows of the squared distance to the nearest center
    n_steps: int  # center updates run
    labels: np.ndarray  # (n_sample,), int64: the sample row's nearest center


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
        return WarmedCandidate(weights, objective, 0, np.argmin(to_seeds, axis=1).astype(np.int64))
    # kernel_lloyd's first center update is the one from its initial assignment to the seeds
    run = kernel_lloyd(kmat, seeds, max_iter=max_steps - 1, diag=diag)
    weights[run.labels, np.arange(n)] = 1.0 / run.cluster_sizes[run.labels]
    return WarmedCandidate(weights, run.nearest_objective, run.n_iter + 1,
                           run.labels.astype(np.int64))


def best_warm_start(candidates: list[WarmedCandidate], sample: np.ndarray | None = None
                    ) -> WarmedCandidate:
    """The candidate the model starts from (module docstring): with ``sample`` (the input
    rows, given for a graph kernel) the lowest normalised cut of their mutual k-nn graph,
    else the lowest objective; equal scores go to the lower objective, then the first.

    Raises ValidationError (a ValueError) on an empty list."""
    if not candidates:
        raise ValidationError("best_warm_start needs at least one candidate, got 0")
    if len(candidates) == 1:
        return candidates[0]
    if sample is None:
        return min(candidates, key=lambda c: c.objective)
    graph = mutual_knn_graph(np.ascontiguousarray(sample, dtype=np.float64))
    k = candidates[0].weights.shape[0]
    cuts = [normalized_cut(graph, c.labels, k) for c in candidates]
    best = min(range(len(candidates)), key=lambda i: (cuts[i], candidates[i].objective))
    return candidates[best]
