"""Kernel bisection: the best kernel 2-means split of a set of rows from m RTMM initial pairs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamkm._validation import check_array, check_int, check_random_state
from streamkm.drift.rtmm import rtmm_pairs
from streamkm.drift.two_means import check_kernel_matrix, kernel_2means_from_pairs
from streamkm.exceptions import ParameterError, ValidationError
from streamkm.kernels import KernelSpec

__all__ = ["BisectResult", "kernel_bisect"]

_LINEAR = KernelSpec("linear")


@dataclass(frozen=True)
class BisectResult:
    """The best split found by :func:`kernel_bisect`.

    Attributes
    ----------
    labels : ndarray of int64, shape (n,)
        Side (0 or 1) of every row; side 0 grew from ``pair[0]``.
    sse : float
        Kernel-space SSE of the split: the sum over both sides of the squared distances of
        the rows to their side's mean.
    pair : tuple of int
        The initial pair (i, j), i < j, the best split started from.
    sse_unsplit : float
        SSE of all rows as one cluster.
    n_pairs_tried : int
        Number of distinct initial pairs run.
    """

    labels: np.ndarray
    sse: float
    pair: tuple[int, int]
    sse_unsplit: float
    n_pairs_tried: int

    @property
    def sse_reduction(self) -> float:
        """Fraction of the unsplit SSE removed by the split, 1 - sse / sse_unsplit (0 if 0)."""
        if self.sse_unsplit <= 0.0:
            return 0.0
        return 1.0 - self.sse / self.sse_unsplit


def _resolve_kernel_matrix(
    x: Any, kernel_matrix: Any, kernel: KernelSpec | None
) -> np.ndarray:
    if (x is None) == (kernel_matrix is None):
        raise ParameterError("pass exactly one of x and kernel_matrix")
    if kernel_matrix is not None:
        if kernel is not None:
            raise ParameterError(
                f"kernel is only used with x, got kernel={kernel!r} with a kernel_matrix"
            )
        return check_kernel_matrix(kernel_matrix)
    if kernel is not None and not isinstance(kernel, KernelSpec):
        raise ParameterError(f"kernel must be a KernelSpec or None, got {kernel!r}")
    rows = check_array(x, name="x")
    return check_kernel_matrix((kernel or _LINEAR).block(rows, rows))


def kernel_bisect(
    x: Any = None,
    *,
    kernel_matrix: Any = None,
    kernel: KernelSpec | None = None,
    n_pairs: int = 10,
    max_iter: int = 50,
    random_state: Any = None,
) -> BisectResult:
    """Split a set of rows in two by kernel 2-means from m duplicate-free initial pairs.

    The kernel matrix is computed once; ``rtmm_pairs(n, m, random_state=random_state)``
    gives the initial pairs (m = min(n_pairs, n(n-1)/2)); kernel 2-means runs from each
    pair (all runs batched) and the split with the lowest SSE is kept (the first one on ties).

    Parameters
    ----------
    x : array-like, shape (n, n_features), optional
        The rows. Exactly one of ``x`` and ``kernel_matrix`` must be given.
    kernel_matrix : array-like, shape (n, n), optional
        Precomputed kernel matrix of the rows.
    kernel : KernelSpec, optional
        Kernel applied to ``x``; None means the linear kernel (plain bisecting k-means).
    n_pairs : int
        Number of initial pairs to try (>= 1); capped at n(n-1)/2.
    max_iter : int
        Largest number of Lloyd iterations per run.
    random_state : None, int or numpy.random.Generator
        Seed or generator of the pair draw.

    Returns
    -------
    BisectResult
    """
    k = _resolve_kernel_matrix(x, kernel_matrix, kernel)
    n = k.shape[0]
    if n < 2:
        raise ValidationError(f"need at least 2 rows to bisect, got n={n}")
    n_pairs = check_int(n_pairs, "n_pairs", low=1)
    max_iter = check_int(max_iter, "max_iter", low=1)
    rng = check_random_state(random_state)
    pairs = rtmm_pairs(n, min(n_pairs, n * (n - 1) // 2), random_state=rng)
    runs = kernel_2means_from_pairs(k, pairs, max_iter=max_iter)
    best = int(np.argmin(runs.sse))
    sse_unsplit = max(float(np.trace(k) - k.sum() / n), 0.0)
    return BisectResult(
        labels=runs.labels[best].copy(),
        sse=float(runs.sse[best]),
        pair=(int(pairs[best, 0]), int(pairs[best, 1])),
        sse_unsplit=sse_unsplit,
        n_pairs_tried=int(pairs.shape[0]),
    )
