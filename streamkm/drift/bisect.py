"""Kernel bisection: the best kernel 2-means split of a set of rows from m initial starts.

The starts come from one of seed 003's three seedings: ``"rtmm"`` (m distinct pairs of rows,
:func:`~streamkm.drift.rtmm.rtmm_pairs`, the default), ``"rscd"`` (the same by collision
detection, :func:`~streamkm.drift.rscd.rscd_pairs`) or ``"frus"`` (m pairs of centers drawn
uniformly in the rows' feature range, :func:`~streamkm.drift.frus.frus_centers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamkm._core.validation import check_array, check_choice, check_int, check_random_state
from streamkm.drift.frus import frus_centers
from streamkm.drift.rscd import rscd_pairs
from streamkm.drift.rtmm import rtmm_pairs
from streamkm.drift.two_means import (
    TwoMeansRuns,
    check_kernel_matrix,
    kernel_2means_from_labels,
    kernel_2means_from_pairs,
)
from streamkm.exceptions import ParameterError, ValidationError
from streamkm.kernels import KernelSpec
from streamkm.drift.policy import SEEDINGS

__all__ = ["SEEDINGS", "BisectResult", "kernel_bisect"]

"""Names of the initial-start seedings of :func:`kernel_bisect`."""

_LINEAR = KernelSpec("linear")


@dataclass(frozen=True)
class BisectResult:
    """The best split found by :func:`kernel_bisect`.

    Attributes
    ----------
    labels : ndarray of int64, shape (n,)
        Side (0 or 1) of every row; side 0 grew from ``pair[0]`` (from the first center with
        ``"frus"``).
    sse : float
        Kernel-space SSE of the split: the sum over both sides of the squared distances of
        the rows to their side's mean.
    pair : tuple of int, or None
        The initial pair of rows (i, j), i < j, the best split started from; None with the
        ``"frus"`` seeding, whose starts are not rows.
    sse_unsplit : float
        SSE of all rows as one cluster.
    n_pairs_tried : int
        Number of initial starts run (distinct pairs of rows with ``"rtmm"`` and ``"rscd"``).
    seeding : str
        The seeding the starts came from, one of :data:`SEEDINGS`.
    """

    labels: np.ndarray
    sse: float
    pair: tuple[int, int] | None
    sse_unsplit: float
    n_pairs_tried: int
    seeding: str = "rtmm"

    @property
    def sse_reduction(self) -> float:
        """Fraction of the unsplit SSE removed by the split, 1 - sse / sse_unsplit (0 if 0)."""
        if self.sse_unsplit <= 0.0:
            return 0.0
        return 1.0 - self.sse / self.sse_unsplit


def _resolve_rows_and_kernel_matrix(
    x: Any, kernel_matrix: Any, kernel: KernelSpec | None
) -> tuple[np.ndarray | None, np.ndarray]:
    if (x is None) == (kernel_matrix is None):
        raise ParameterError("pass exactly one of x and kernel_matrix")
    if kernel_matrix is not None:
        if kernel is not None:
            raise ParameterError(
                f"kernel is only used with x, got kernel={kernel!r} with a kernel_matrix"
            )
        return None, check_kernel_matrix(kernel_matrix)
    if kernel is not None and not isinstance(kernel, KernelSpec):
        raise ParameterError(f"kernel must be a KernelSpec or None, got {kernel!r}")
    rows = check_array(x, name="x")
    return rows, check_kernel_matrix((kernel or _LINEAR).block(rows, rows))


def _runs_from_frus(
    rows: np.ndarray, k: np.ndarray, kernel: KernelSpec, m: int, max_iter: int,
    rng: np.random.Generator,
) -> TwoMeansRuns:
    """Kernel 2-means from m pairs of FRUS centers: rows first go to the nearer center."""
    centers = frus_centers(rows, 2 * m, random_state=rng)
    # ||phi(x) - phi(c)||^2 - K(x, x) = K(c, c) - 2 K(x, c); K(x, x) is common to both centers
    to_centers = kernel.block(rows, centers).T.astype(np.float64)
    dist = kernel.diagonal(centers).astype(np.float64)[:, None] - 2.0 * to_centers
    in_second = dist[1::2] < dist[0::2]
    return kernel_2means_from_labels(k, in_second, max_iter=max_iter)


def kernel_bisect(
    x: Any = None,
    *,
    kernel_matrix: Any = None,
    kernel: KernelSpec | None = None,
    n_pairs: int = 10,
    max_iter: int = 50,
    seeding: str = "rtmm",
    random_state: Any = None,
) -> BisectResult:
    """Split a set of rows in two by kernel 2-means from m initial starts.

    The kernel matrix is computed once; the seeding gives m initial starts; kernel 2-means
    runs from each start (all runs batched) and the split with the lowest SSE is kept (the
    first one on ties). Seedings:

    ``"rtmm"``
        m = min(n_pairs, n(n-1)/2) distinct pairs of rows, ``rtmm_pairs(n, m)``: O(m), the
        default.
    ``"rscd"``
        the same number of distinct pairs by random draws with collision detection
        (``rscd_pairs``), seed 003's baseline; same distribution, slower as m nears n(n-1)/2.
    ``"frus"``
        m = n_pairs pairs of centers drawn uniformly in the rows' per-feature [min, max] box
        (``frus_centers(x, 2 m)``); each run starts by assigning every row to the nearer
        center in kernel space. Needs ``x`` (the centers are not rows). A run whose centers
        both leave one side empty keeps the rows unsplit.

    Parameters
    ----------
    x : array-like, shape (n, n_features), optional
        The rows. Exactly one of ``x`` and ``kernel_matrix`` must be given.
    kernel_matrix : array-like, shape (n, n), optional
        Precomputed kernel matrix of the rows (not with ``seeding="frus"``).
    kernel : KernelSpec, optional
        Kernel applied to ``x``; None means the linear kernel (plain bisecting k-means).
    n_pairs : int
        Number of initial starts to try (>= 1); capped at n(n-1)/2 for pairs of rows.
    max_iter : int
        Largest number of Lloyd iterations per run.
    seeding : {"rtmm", "rscd", "frus"}
        Where the initial starts come from.
    random_state : None, int or numpy.random.Generator
        Seed or generator of the starts' draw.

    Returns
    -------
    BisectResult
    """
    seeding = check_choice(seeding, "seeding", SEEDINGS)
    if seeding == "frus" and x is None:
        raise ParameterError(
            "seeding='frus' draws centers in the rows' feature range and needs x, "
            "got only a kernel_matrix"
        )
    rows, k = _resolve_rows_and_kernel_matrix(x, kernel_matrix, kernel)
    n = k.shape[0]
    if n < 2:
        raise ValidationError(f"need at least 2 rows to bisect, got n={n}")
    n_pairs = check_int(n_pairs, "n_pairs", low=1)
    max_iter = check_int(max_iter, "max_iter", low=1)
    rng = check_random_state(random_state)
    pairs = None
    if seeding == "frus":
        assert rows is not None
        runs = _runs_from_frus(rows, k, kernel or _LINEAR, n_pairs, max_iter, rng)
    else:
        draw = rtmm_pairs if seeding == "rtmm" else rscd_pairs
        pairs = draw(n, min(n_pairs, n * (n - 1) // 2), random_state=rng)
        runs = kernel_2means_from_pairs(k, pairs, max_iter=max_iter)
    best = int(np.argmin(runs.sse))
    sse_unsplit = max(float(np.trace(k) - k.sum() / n), 0.0)
    return BisectResult(
        labels=runs.labels[best].copy(),
        sse=float(runs.sse[best]),
        pair=None if pairs is None else (int(pairs[best, 0]), int(pairs[best, 1])),
        sse_unsplit=sse_unsplit,
        n_pairs_tried=int(runs.sse.shape[0]),
        seeding=seeding,
    )
