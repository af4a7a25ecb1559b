"""Polynomial kernel (gamma <x, y> + coef0)^degree."""

from __future__ import annotations

import numpy as np

from streamkm._numba import kernels as _nk
from streamkm.exceptions import ParameterError
from streamkm.kernels._common import row_sq_norms
from streamkm.kernels._registry import KernelType, register

__all__ = ["Polynomial"]


@register
class Polynomial(KernelType):
    name = "polynomial"
    needs_gamma = True

    def check(self, params):
        degree = params.degree
        if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
            raise ParameterError(f"degree must be an integer >= 1, got {degree!r}")
        if not np.isfinite(params.coef0):
            raise ParameterError(f"coef0 must be finite, got {params.coef0!r}")

    def block(self, params, x, y, x_sq, y_sq):
        inner = x @ y.T
        if inner.size == 0:
            return inner
        return _nk.polynomial_from_inner(
            inner, float(params.gamma), float(params.coef0), int(params.degree)
        )

    def diagonal(self, params, x):
        dtype = x.dtype
        g = dtype.type(params.gamma)
        return ((g * row_sq_norms(x) + dtype.type(params.coef0)) ** params.degree).astype(
            dtype, copy=False)

    def default_gamma(self, x, rng):
        return 1.0 / x.shape[1]
