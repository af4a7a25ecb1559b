"""Warm-up of candidate initialisations on the initialisation sample.

The sample's kernel matrix is computed once; each candidate then takes damped steps on the
whole sample, C_j <- (1 - alpha_j) C_j + alpha_j cm(S_j) with the engine's learning rate,
until its assignment stops changing or ``max_steps`` is reached. Centers are kept as
dense weight vectors over the sample rows, so a step is one GEMM and no kernel evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamkm.cluster._centers import learning_rates

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
    w = weights.astype(kmat.dtype)
    inner = (kmat @ w.T).astype(np.float64)
    center_sq = np.einsum("jn,nj->j", weights, inner)
    dist = diag[:, None] - 2.0 * inner + center_sq[None, :]
    labels = np.argmin(dist, axis=1)
    best = np.maximum(dist[np.arange(dist.shape[0]), labels], 0.0)
    return labels, float(best.mean())


def warm_up(
    kmat: np.ndarray, diag: np.ndarray, seeds: np.ndarray, *, max_steps: int,
    learning_rate: str,
) -> WarmedCandidate:
    """Warm up the centers seeded at sample rows ``seeds`` on the sample kernel matrix."""
    n = kmat.shape[0]
    k = seeds.shape[0]
    diag = diag.astype(np.float64)
    weights = np.zeros((k, n))
    weights[np.arange(k), seeds] = 1.0
    counts = np.zeros(k, dtype=np.int64)
    previous = None
    steps = 0
    for _ in range(max_steps):
        labels, _ = _objective(kmat, diag, weights)
        if previous is not None and np.array_equal(labels, previous):
            break
        batch_counts = np.bincount(labels, minlength=k).astype(np.int64)
        alpha = learning_rates(learning_rate, batch_counts, n, counts)
        weights *= (1.0 - alpha)[:, None]
        weights[labels, np.arange(n)] += alpha[labels] / batch_counts[labels]
        counts += batch_counts
        previous = labels
        steps += 1
    weights[weights < _WEIGHT_FLOOR * weights.max(axis=1, keepdims=True)] = 0.0
    weights /= weights.sum(axis=1, keepdims=True)
    _, objective = _objective(kmat, diag, weights)
    return WarmedCandidate(weights, objective, steps)
