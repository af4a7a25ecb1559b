"""Helpers shared by the kernel modules."""

from __future__ import annotations

import numpy as np

__all__ = ["inv_norms", "pairwise_subsample", "row_sq_norms"]

MEDIAN_SAMPLE = 1000


def row_sq_norms(x: np.ndarray) -> np.ndarray:
    """Squared Euclidean norm of each row, in x's dtype."""
    return np.einsum("ij,ij->i", x, x)


def inv_norms(x: np.ndarray) -> np.ndarray:
    """1 / ||x_i|| (0 for zero rows)."""
    norms = np.sqrt(row_sq_norms(x))
    inv = np.zeros_like(norms)
    np.divide(1.0, norms, out=inv, where=norms > 0)
    return inv


def pairwise_subsample(x: np.ndarray, rng: np.random.Generator,
                       size: int = MEDIAN_SAMPLE) -> np.ndarray:
    """At most ``size`` rows of x drawn without replacement (sorted), as float64."""
    if x.shape[0] > size:
        x = x[np.sort(rng.choice(x.shape[0], size, replace=False))]
    return np.asarray(x, dtype=np.float64)
