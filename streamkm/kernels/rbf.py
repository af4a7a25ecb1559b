"""Gaussian (rbf) kernel exp(-gamma ||x - y||^2)."""

from __future__ import annotations

import numpy as np

from streamkm._numba import kernels as _nk
from streamkm.kernels._common import (pairwise_subsample, row_sq_norms, same_rows,
                                     upper_self_inner)
from streamkm.kernels._registry import KernelType, register

__all__ = ["RBF"]


def median_sq_distance(x: np.ndarray, rng: np.random.Generator) -> float:
    """Median squared Euclidean distance over the pairs of at most 1000 rows of x."""
    x64 = pairwise_subsample(x, rng)
    sq = row_sq_norms(x64)
    iu = np.triu_indices(x64.shape[0], k=1)
    dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (x64 @ x64.T), 0.0)[iu]
    return float(np.median(dist)) if dist.size else 0.0


@register
class RBF(KernelType):
    name = "rbf"
    normalized = True
    shift_invariant = True
    needs_gamma = True

    def block(self, params, x, y, x_sq, y_sq):
        if x.shape[0] == 0 or y.shape[0] == 0:
            return x @ y.T
        x_sq = row_sq_norms(x) if x_sq is None else x_sq
        y_sq = row_sq_norms(y) if y_sq is None else y_sq
        if same_rows(x, y) and x.dtype in (np.float32, np.float64) \
                and np.array_equal(x_sq, y_sq):
            # K(x, x): one triangle's inner products and kernel values, then mirrored
            return _nk.rbf_symmetric_from_upper(upper_self_inner(x), x_sq, float(params.gamma))
        return _nk.rbf_from_inner(x @ y.T, x_sq, y_sq, float(params.gamma))

    def diagonal(self, params, x):
        return np.ones(x.shape[0], dtype=x.dtype)

    def default_gamma(self, x, rng):
        med = median_sq_distance(x, rng)
        return 1.0 / med if med > 0 else 1.0
