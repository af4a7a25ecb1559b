"""Linear kernel <x, y>: explicit features, the engine's fast path."""

from __future__ import annotations

from streamkm.kernels._common import row_sq_norms
from streamkm.kernels._registry import KernelType, register

__all__ = ["Linear"]


@register
class Linear(KernelType):
    name = "linear"
    explicit_features = True

    def block(self, params, x, y, x_sq, y_sq):
        return x @ y.T

    def diagonal(self, params, x):
        return row_sq_norms(x).astype(x.dtype, copy=False)
