"""Warm-up of candidate initialisations on the initialisation sample.

The sample's kernel matrix is computed once; each candidate then runs full-batch kernel
k-means (Lloyd in feature space: every center becomes the mean of its rows) on the sample
until its assignment stops changing or ``max_steps`` is reached. Centers are kept as
dense weight vectors over the sample rows, so an iteration is one GEMM and no kernel
evaluation. A center that loses all its rows keeps its previous weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["WarmedCandidate", "warm_up"]

_WEIGHT_FLOOR = 1e-9  # weights below this fraction of a center's largest are dropped


@dataclass(frozen=True)
class WarmedCandidate:
    """Centers as convex weights over the sample rows, and their sample objective."""

    weights: np.ndarray  # (k, n_sample), float64, rows sum to 1
    objective: float
    n_steps: int


def _objective(kmat: np.ndarray, diag: np.ndarray, weights: np.ndarray
               ) -> tuple[np.ndarray, float]:
    # kmat is symmetric: W K gives <C_j, phi(x)> for every center j and row x.
    inner = (weights.astype(kmat.dtype) @ kmat).astype(np.float64, copy=False)
    center_sq = np.einsum("jn,jn->j", weights, inner)
    dist = diag[None, :] - 2.0 * inner + center_sq[:, None]
    labels = np.argmin(dist, axis=0)
    best = np.maximum(dist[labels, np.arange(dist.shape[1])], 0.0)
    return labels, float(best.mean())


def warm_up(
    kmat: np.ndarray, diag: np.ndarray, seeds: np.ndarray, *, max_steps: int,
) -> WarmedCandidate:
    """Warm up the centers seeded at sample rows ``seeds`` on the sample kernel matrix."""
    n = kmat.shape[0]
    k = seeds.shape[0]
    diag = diag.astype(np.float64)
    weights = np.zeros((k, n))
    weights[np.arange(k), seeds] = 1.0
    previous = None
    steps = 0
    for _ in range(max_steps):
        labels, _ = _objective(kmat, diag, weights)
        if previous is not None and np.array_equal(labels, previous):
            break
        sizes = np.bincount(labels, minlength=k)
        occupied = sizes > 0
        weights[occupied] = 0.0
        weights[labels, np.arange(n)] = 1.0 / sizes[labels]
        previous = labels
        steps += 1
    weights[weights < _WEIGHT_FLOOR * weights.max(axis=1, keepdims=True)] = 0.0
    weights /= weights.sum(axis=1, keepdims=True)
    _, objective = _objective(kmat, diag, weights)
    return WarmedCandidate(weights, objective, steps)
