"""Cosine kernel <x, y> / (||x|| ||y||) (0 for a zero row)."""

from __future__ import annotations

from streamkm._numba import kernels as _nk
from streamkm.kernels._common import inv_norms, row_sq_norms
from streamkm.kernels._registry import KernelType, register

__all__ = ["Cosine"]


@register
class Cosine(KernelType):
    name = "cosine"
    normalized = True

    def block(self, params, x, y, x_sq, y_sq):
        inner = x @ y.T
        if inner.size == 0:
            return inner
        return _nk.cosine_from_inner(inner, inv_norms(x), inv_norms(y))

    def diagonal(self, params, x):
        return (row_sq_norms(x) > 0).astype(x.dtype)
