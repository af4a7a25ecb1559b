"""Kernel 2-means (Lloyd in feature space) from many initial pairs (or assignments) at once.

Each run starts from two rows as the two centers and alternates assignment and mean
update on a precomputed kernel matrix K. For a cluster c with indicator z and size n_c,
the squared feature-space distance of row p to the cluster mean is
``K[p, p] - 2 (z^T K)[p] / n_c + z^T K z / n_c^2``. All runs share the sums ``Z @ K`` of the
(runs, n) indicator matrix Z of the second clusters (the first cluster's sums follow from
the column sums of K): one GEMM at the start, then each iteration adds only the rows that
moved, which quickly become few.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamkm._core.validation import check_int
from streamkm.drift.rtmm import int_pairs
from streamkm.exceptions import ParameterError, ValidationError

__all__ = [
    "TwoMeansRuns",
    "check_kernel_matrix",
    "kernel_2means_from_labels",
    "kernel_2means_from_pairs",
]

# Bound on the (runs x n) work arrays of one chunk of runs, in elements.
_CHUNK_ELEMENTS = 2**21


@dataclass(frozen=True)
class TwoMeansRuns:
    """Results of kernel 2-means runs, one per initial pair.

    Attributes
    ----------
    labels : ndarray of int64, shape (n_runs, n)
        Final cluster (0 or 1) of every row; cluster 0 started at the pair's first row.
    sse : ndarray of float64, shape (n_runs,)
        Kernel-space sum of squared distances of the rows to their cluster means.
    n_iter : ndarray of int64, shape (n_runs,)
        Lloyd iterations run (stops when no label changes, or at ``max_iter``).
    """

    labels: np.ndarray
    sse: np.ndarray
    n_iter: np.ndarray


def check_kernel_matrix(kernel_matrix: Any) -> np.ndarray:
    """``kernel_matrix`` as a C-contiguous float64 (n, n) array with finite values."""
    k = np.asarray(kernel_matrix)
    if k.ndim != 2 or k.shape[0] != k.shape[1]:
        raise ValidationError(f"kernel_matrix must be square (n, n), got shape {k.shape!r}")
    if not (np.issubdtype(k.dtype, np.floating) or np.issubdtype(k.dtype, np.integer)):
        raise ValidationError(f"kernel_matrix must be real numbers, got dtype {k.dtype!s}")
    k = np.ascontiguousarray(k, dtype=np.float64)
    if not np.isfinite(k).all():
        bad = np.argwhere(~np.isfinite(k))[0]
        raise ValidationError(
            f"kernel_matrix must be finite, got {k[bad[0], bad[1]]!r} at "
            f"({int(bad[0])}, {int(bad[1])})"
        )
    return k


def _check_pairs(pairs: Any, n: int) -> np.ndarray:
    p = int_pairs(pairs)
    bad = (p < 0).any(axis=1) | (p >= n).any(axis=1) | (p[:, 0] == p[:, 1])
    if bad.any():
        k = int(np.argmax(bad))
        raise ParameterError(
            f"pairs must hold two different row indices in [0, {n}), got "
            f"({int(p[k, 0])}, {int(p[k, 1])}) at row {k}"
        )
    return p


def _split_sums(
    in_second: np.ndarray, to_second: np.ndarray, column_sums: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Per run: K-sums of every row against the first cluster, sizes, within-cluster sums.

    ``to_second[r, p]`` is the sum of K[q, p] over the rows q of run r's second cluster.
    """
    z = in_second.astype(np.float64)
    to_first = column_sums - to_second
    size_second = z.sum(axis=1)
    size_first = in_second.shape[1] - size_second
    within_second = np.einsum("ij,ij->i", z, to_second)
    within_first = np.einsum("ij,ij->i", 1.0 - z, to_first)
    return to_first, size_first, size_second, within_first, within_second


def _distance_to_mean(to_cluster: np.ndarray, size: np.ndarray, within: np.ndarray) -> np.ndarray:
    """Squared distance to a cluster mean minus K[p, p]; +inf for an empty cluster."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dist = (within / size**2)[:, None] - (2.0 / size)[:, None] * to_cluster
    dist[size == 0] = np.inf
    return dist


def _split_sse(
    trace: float, size: tuple[np.ndarray, np.ndarray], within: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    sse = np.full(size[0].shape, trace)
    for size_c, within_c in zip(size, within):
        nonempty = size_c > 0
        sse[nonempty] -= within_c[nonempty] / size_c[nonempty]
    return np.maximum(sse, 0.0)


def _nearer_second_row(kernel_matrix: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """(runs, n) bool: row p is nearer the pair's second row than its first (ties: first)."""
    diag = np.diagonal(kernel_matrix)
    first, second = pairs[:, 0], pairs[:, 1]
    dist_first = diag[first][:, None] - 2.0 * kernel_matrix[first]
    dist_second = diag[second][:, None] - 2.0 * kernel_matrix[second]
    return dist_second < dist_first


def _run_chunk(
    kernel_matrix: np.ndarray, column_sums: np.ndarray, in_second: np.ndarray, max_iter: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    diag = np.diagonal(kernel_matrix)
    in_second = in_second.copy()
    to_second = in_second.astype(np.float64) @ kernel_matrix
    n_iter = np.zeros(len(in_second), dtype=np.int64)
    active = np.arange(len(in_second))
    for _ in range(max_iter):
        if active.size == 0:
            break
        current = in_second[active]
        current_to_second = to_second[active]
        to_first, size_first, size_second, within_first, within_second = _split_sums(
            current, current_to_second, column_sums
        )
        dist_first = _distance_to_mean(to_first, size_first, within_first)
        dist_second = _distance_to_mean(current_to_second, size_second, within_second)
        # ties keep the current cluster, so the objective never increases and runs cannot cycle
        updated = np.where(
            dist_second < dist_first, True, np.where(dist_first < dist_second, False, current)
        )
        moved = updated != current
        changed = moved.any(axis=1)
        in_second[active] = updated
        n_iter[active] += 1
        active, moved = active[changed], moved[changed]
        # later iterations move few rows: update the sums through the moved rows only
        moved_rows = np.flatnonzero(moved.any(axis=0))
        if active.size and moved_rows.size:
            signed = np.where(in_second[active][:, moved_rows], 1.0, -1.0) * moved[:, moved_rows]
            to_second[active] += signed @ kernel_matrix[moved_rows]
    to_second = in_second.astype(np.float64) @ kernel_matrix
    _, size_first, size_second, within_first, within_second = _split_sums(
        in_second, to_second, column_sums
    )
    sse = _split_sse(
        float(diag.sum()), (size_first, size_second), (within_first, within_second)
    )
    return in_second.astype(np.int64), sse, n_iter


def kernel_2means_from_pairs(
    kernel_matrix: Any, pairs: Any, *, max_iter: int = 50
) -> TwoMeansRuns:
    """Run kernel 2-means once from each initial pair, all runs batched.

    Parameters
    ----------
    kernel_matrix : array-like, shape (n, n)
        Symmetric positive semi-definite kernel matrix of the rows.
    pairs : array-like of int, shape (m, 2)
        Initial centers: row indices (a, b), a != b; repeats are allowed.
    max_iter : int
        Largest number of Lloyd iterations per run (>= 1).

    Returns
    -------
    TwoMeansRuns
        Labels, SSE and iteration count of every run, in the order of ``pairs``.
    """
    k = check_kernel_matrix(kernel_matrix)
    p = _check_pairs(pairs, k.shape[0])
    max_iter = check_int(max_iter, "max_iter", low=1)
    return _run_all(k, p.shape[0], lambda rows: _nearer_second_row(k, p[rows]), max_iter)


def kernel_2means_from_labels(
    kernel_matrix: Any, initial_labels: Any, *, max_iter: int = 50
) -> TwoMeansRuns:
    """Run kernel 2-means once from each initial assignment, all runs batched.

    For starts that are not rows of the data, e.g. centers drawn in the feature range
    (:func:`~streamkm.drift.frus.frus_centers`): assign the rows to the nearer start outside,
    then iterate here.

    Parameters
    ----------
    kernel_matrix : array-like, shape (n, n)
        Symmetric positive semi-definite kernel matrix of the rows.
    initial_labels : array-like of 0/1 or bool, shape (m, n)
        Row r is run r's first assignment (1: second cluster). A side may be empty; it then
        stays empty and the run's SSE is the unsplit SSE.
    max_iter : int
        Largest number of Lloyd iterations per run (>= 1).

    Returns
    -------
    TwoMeansRuns
        Labels, SSE and iteration count of every run, in the order of ``initial_labels``.
    """
    k = check_kernel_matrix(kernel_matrix)
    start = np.asarray(initial_labels)
    if start.ndim != 2 or start.shape[1] != k.shape[0]:
        raise ParameterError(
            f"initial_labels must have shape (m, {k.shape[0]}), got {start.shape!r}"
        )
    if start.size and not np.isin(start, (0, 1)).all():
        bad = start[~np.isin(start, (0, 1))].flat[0].item()
        raise ParameterError(f"initial_labels must be 0 or 1, got {bad!r}")
    max_iter = check_int(max_iter, "max_iter", low=1)
    in_second = start.astype(bool)
    return _run_all(k, in_second.shape[0], lambda rows: in_second[rows], max_iter)


def _run_all(
    k: np.ndarray, m: int, initial: Callable[[slice], np.ndarray], max_iter: int
) -> TwoMeansRuns:
    """Run m kernel 2-means in chunks; ``initial(rows)`` gives the chunk's first assignment."""
    n = k.shape[0]
    labels = np.empty((m, n), dtype=np.int64)
    sse = np.empty(m, dtype=np.float64)
    n_iter = np.empty(m, dtype=np.int64)
    column_sums = k.sum(axis=0)
    chunk = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, m, chunk):
        rows = slice(start, min(start + chunk, m))
        labels[rows], sse[rows], n_iter[rows] = _run_chunk(
            k, column_sums, initial(rows), max_iter
        )
    return TwoMeansRuns(labels=labels, sse=sse, n_iter=n_iter)
