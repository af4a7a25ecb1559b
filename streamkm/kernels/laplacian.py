"""Laplacian kernel exp(-gamma ||x - y||_1)."""

from __future__ import annotations

import numpy as np

from streamkm._numba import kernels as _nk
from streamkm.kernels._common import pairwise_subsample
from streamkm.kernels._registry import KernelType, register

__all__ = ["Laplacian"]


@register
class Laplacian(KernelType):
    name = "laplacian"
    normalized = True
    shift_invariant = True
    needs_gamma = True

    def block(self, params, x, y, x_sq, y_sq):
        out = np.empty((x.shape[0], y.shape[0]), dtype=x.dtype)
        if x.shape[0] and y.shape[0]:
            _nk.laplacian_block(x, y, float(params.gamma), out)
        return out

    def diagonal(self, params, x):
        return np.ones(x.shape[0], dtype=x.dtype)

    def default_gamma(self, x, rng):
        x64 = pairwise_subsample(x, rng)
        iu = np.triu_indices(x64.shape[0], k=1)
        dist = np.abs(x64[:, None, :] - x64[None, :, :]).sum(axis=2)[iu]
        med = float(np.median(dist)) if dist.size else 0.0
        return 1.0 / med if med > 0 else 1.0
