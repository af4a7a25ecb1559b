"""Helpers shared by the kernel modules."""

from __future__ import annotations

from typing import Callable

import numpy as np
from scipy.linalg import blas

from streamkm.exceptions import ParameterError
from streamkm.kernels._graph import row_blocks
from streamkm.kernels._registry import KernelType

__all__ = ["InnerProductKernel", "check_diffusion_time", "check_number_in",
           "check_positive_int", "features_by_blocks", "inv_norms", "pairwise_subsample",
           "row_sq_norms", "same_rows", "upper_self_inner"]

MEDIAN_SAMPLE = 1000


def row_sq_norms(x: np.ndarray) -> np.ndarray:
    """Squared Euclidean norm of each row, in x's dtype."""
    return np.einsum("ij,ij->i", x, x)


def same_rows(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether x and y are the same rows in memory (the same array, or views of one buffer
    with the same shape and strides), so that K(x, y) is symmetric."""
    return x is y or (x.shape == y.shape and x.strides == y.strides and x.dtype == y.dtype
                      and x.__array_interface__["data"][0] == y.__array_interface__["data"][0])


def upper_self_inner(x: np.ndarray) -> np.ndarray:
    """The (n, n) C-contiguous matrix whose upper triangle (diagonal included) is x x^T, in
    x's dtype (float32 or float64); below the diagonal it is 0.

    One BLAS ``syrk`` with the arguments numpy's ``x @ x.T`` passes it (a C-contiguous x is
    the column-major k x n matrix A, and the lower triangle of A^T A in column-major order
    is the upper one in row-major order), without numpy's copy of the triangle to the other
    side.
    """
    syrk = blas.dsyrk if x.dtype == np.float64 else blas.ssyrk
    return syrk(1.0, np.ascontiguousarray(x).T, trans=1, lower=1).T


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


def check_positive_int(name: str, value: object) -> int:
    """A kernel option that must be an integer >= 1, else a clear error naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def check_number_in(name: str, value: object, low: float, high: float) -> float:
    """A kernel option that must be a number in [low, high], else a clear error naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not low <= float(value) <= high:
        raise ParameterError(f"{name} must be a number in [{low:g}, {high:g}], got {value!r}")
    return float(value)


def check_diffusion_time(t: object) -> None:
    """The diffusion time ``t`` of the graph kernels: ``"auto"`` or a positive finite number."""
    if t == "auto":
        return
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not np.isfinite(t) or t <= 0:
        raise ParameterError(f"t must be a positive finite number or 'auto', got {t!r}")


class InnerProductKernel(KernelType):
    """A kernel given by explicit features: K(x, y) = <f(x), f(y)> of prepared rows f(x)
    (the identity for ``linear``; a fitted feature map for the graph kernels)."""

    explicit_features = True

    def block(self, params, x, y, x_sq, y_sq):
        return x @ y.T

    def diagonal(self, params, x):
        return row_sq_norms(x).astype(x.dtype, copy=False)


def features_by_blocks(features: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                       width: int) -> np.ndarray:
    """``features`` of the rows of x, computed a block of rows at a time (their sparse
    joins are never built for all of x at once), shape (n, ``width``) in x's dtype."""
    out = np.empty((x.shape[0], width), dtype=x.dtype)
    for block in row_blocks(x.shape[0]):
        out[block] = features(x[block])
    return out
