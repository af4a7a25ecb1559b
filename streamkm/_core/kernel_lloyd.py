"""Lloyd's algorithm in a kernel's feature space on a full kernel matrix.

The one implementation behind exact :class:`streamkm.batch.KernelKMeans`, the warm-up of
:class:`streamkm.cluster.MiniBatchKernelKMeans`'s initialisation candidates and the
``gamma="auto"`` decision (:mod:`streamkm.kernels._auto`). It lives below all three so that
the kernels package can use it without importing ``streamkm.batch``.

For a kernel with explicit features F (the graph kernels, linear) the kernel matrix is
F F^T, and it can be handed over as its factor (:class:`FactoredGram`, made by
:func:`feature_gram` when that is cheaper): every product Lloyd needs then costs n m k
instead of n^2 k, and the n x n matrix is never formed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamkm._numba.lloyd import assign_from_inner

__all__ = ["FactoredGram", "KernelLloydResult", "feature_gram", "gram_columns", "kernel_lloyd",
           "one_hot"]

# Rows per chunk of an update are chosen so a (rows, n) slice of K holds about this many entries.
_CHUNK_ENTRIES = 1 << 22

# Above this fraction of changed labels, recomputing K @ H is cheaper than updating it.
_FULL_UPDATE_FRACTION = 0.25


@dataclass(frozen=True)
class KernelLloydResult:
    """Outcome of one kernel Lloyd run.

    Attributes
    ----------
    labels : numpy.ndarray of shape (n_samples,), int64
    objective : float
        Mean over rows of the squared feature-space distance to the mean of their cluster.
    n_iter : int
        Assignment steps run.
    cluster_sizes : numpy.ndarray of shape (k,), int64
    center_sq_norms : numpy.ndarray of shape (k,), float64
        <C_j, C_j> of each cluster mean C_j.
    nearest_objective : float
        Mean over rows of the squared feature-space distance to the nearest cluster mean:
        the objective of the k means as centers (<= ``objective``; equal when the run
        stopped because no label changed and no cluster had to be refilled).
    """

    labels: np.ndarray
    objective: float
    n_iter: int
    cluster_sizes: np.ndarray
    center_sq_norms: np.ndarray
    nearest_objective: float


class FactoredGram:
    """The kernel matrix K = F F^T of rows with explicit features F, held as F.

    Supports what Lloyd's algorithm asks of K: ``K @ H``, :meth:`columns`,
    :meth:`diagonal` and :meth:`rows_t_matmul`, each at O(n m) per column instead of O(n^2).

    Parameters
    ----------
    features : numpy.ndarray of shape (n, m)
        C-contiguous float32 or float64; products are computed in its dtype.
    """

    def __init__(self, features: np.ndarray) -> None:
        self.features = np.ascontiguousarray(features)
        self.shape = (features.shape[0], features.shape[0])
        self.dtype = features.dtype

    def __matmul__(self, h: np.ndarray) -> np.ndarray:
        return self.features @ (self.features.T @ h)

    def columns(self, index: np.ndarray | int) -> np.ndarray:
        """K[:, index] (K[:, i] for one index: shape (n,))."""
        return self.features @ self.features[index].T

    def diagonal(self) -> np.ndarray:
        return np.einsum("ij,ij->i", self.features, self.features)

    def rows_t_matmul(self, rows: np.ndarray, h: np.ndarray) -> np.ndarray:
        """K[rows].T @ h."""
        return self.features @ (self.features[rows].T @ h)


#: a kernel matrix as an array or as its factor
Gram = np.ndarray | FactoredGram


def feature_gram(features: np.ndarray) -> Gram:
    """The kernel matrix of rows with explicit ``features``: as its factor when that makes
    Lloyd's products cheaper (n m k twice against n^2 k: fewer than n / 2 features), else
    formed."""
    features = np.ascontiguousarray(features)
    if 2 * features.shape[1] < features.shape[0]:
        return FactoredGram(features)
    return features @ features.T


def gram_columns(kernel_matrix: Gram, index: np.ndarray | int) -> np.ndarray:
    """K[:, index] of a kernel matrix or its factor."""
    if isinstance(kernel_matrix, FactoredGram):
        return kernel_matrix.columns(index)
    return kernel_matrix[:, index]


def gram_diagonal(kernel_matrix: Gram) -> np.ndarray:
    """K(x, x) of every row, float64, contiguous (the numba assignment then runs on one
    array layout: a strided diagonal would load a second compiled version of it)."""
    diag = (kernel_matrix.diagonal() if isinstance(kernel_matrix, FactoredGram)
            else np.diagonal(kernel_matrix))
    return np.ascontiguousarray(diag, dtype=np.float64)


def one_hot(labels: np.ndarray, k: int, dtype: np.dtype) -> np.ndarray:
    out = np.zeros((labels.shape[0], k), dtype=dtype)
    out[np.arange(labels.shape[0]), labels] = 1
    return out


def _cluster_kernel_sums(kernel_matrix: Gram, labels: np.ndarray, k: int) -> np.ndarray:
    """S[x, j] = sum over rows s of cluster j of K(x, s): one GEMM K @ H, float64 result."""
    return (kernel_matrix @ one_hot(labels, k, kernel_matrix.dtype)).astype(np.float64)


def _update_cluster_kernel_sums(
    sums: np.ndarray, kernel_matrix: Gram, rows: np.ndarray, old: np.ndarray,
    new: np.ndarray,
) -> None:
    """Move ``rows`` from clusters ``old[rows]`` to ``new[rows]`` in S (in place), using the
    symmetry of K: S += K[rows].T @ (H_new - H_old)[rows]."""
    n, k = sums.shape
    step = max(1, _CHUNK_ENTRIES // n)
    for start in range(0, rows.size, step):
        chunk = rows[start:start + step]
        delta = np.zeros((chunk.size, k), dtype=kernel_matrix.dtype)
        delta[np.arange(chunk.size), new[chunk]] += 1
        delta[np.arange(chunk.size), old[chunk]] -= 1
        if isinstance(kernel_matrix, FactoredGram):
            sums += kernel_matrix.rows_t_matmul(chunk, delta)
        else:
            sums += kernel_matrix[chunk].T @ delta


def _center_terms(
    sums: np.ndarray, labels: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cluster sizes, mean inner products P[x, j] = <phi(x), C_j> and <C_j, C_j>."""
    sizes = np.bincount(labels, minlength=k)
    own = sums[np.arange(labels.shape[0]), labels]
    safe = np.maximum(sizes, 1).astype(np.float64)
    center_sq = np.bincount(labels, weights=own, minlength=k) / safe**2
    return sizes, sums / safe, center_sq


def _assign(
    diag: np.ndarray, mean_inner: np.ndarray, center_sq: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    n = diag.shape[0]
    labels = np.empty(n, dtype=np.int64)
    min_sq = np.empty(n, dtype=np.float64)
    assign_from_inner(np.ascontiguousarray(mean_inner), diag, center_sq, labels, min_sq)
    return labels, min_sq


def _fill_empty_clusters(labels: np.ndarray, min_sq: np.ndarray, k: int) -> None:
    """Give every empty cluster the row farthest from its center, taken from a cluster with
    at least two rows (in place; the row's distance becomes 0)."""
    sizes = np.bincount(labels, minlength=k)
    empty = np.flatnonzero(sizes == 0)
    if empty.size == 0:
        return
    order = np.argsort(-min_sq, kind="stable")
    pos = 0
    for j in empty:
        while pos < order.size and sizes[labels[order[pos]]] < 2:
            pos += 1
        if pos == order.size:
            return
        row = order[pos]
        pos += 1
        sizes[labels[row]] -= 1
        labels[row] = j
        sizes[j] = 1
        min_sq[row] = 0.0


def kernel_lloyd(
    kernel_matrix: Gram,
    seeds: np.ndarray,
    *,
    max_iter: int = 100,
    tol: float = 0.0,
    diag: np.ndarray | None = None,
) -> KernelLloydResult:
    """Lloyd's algorithm in feature space on a full kernel matrix, from seed points.

    Rows are first assigned to the nearest seed phi(x_s); then, repeatedly, every cluster's
    center becomes the mean C_j of its rows' feature vectors and every row moves to the
    center at the smallest squared distance
    K(x, x) - 2 <phi(x), C_j> + <C_j, C_j>. The per-cluster sums of K come from one GEMM
    K @ H (H the one-hot label matrix), later updated by the changed rows only, and always
    recomputed in full before the run may stop. The run stops when no label changes, when
    the mean squared distance fell by at most ``tol`` times its previous value, or after
    ``max_iter`` assignment steps. A cluster left empty takes the row farthest from its
    center (from a cluster with at least two rows), so all k clusters stay non-empty.

    Parameters
    ----------
    kernel_matrix : numpy.ndarray of shape (n, n) or FactoredGram
        Symmetric positive semi-definite K, float32 or float64, C-contiguous, or its factor.
    seeds : numpy.ndarray of shape (k,), int
        Row indices of the initial centers.
    max_iter : int
    tol : float
        Relative tolerance on the decrease of the objective (0: run until labels are stable).
    diag : numpy.ndarray of shape (n,), optional
        K(x, x); defaults to the diagonal of ``kernel_matrix``.

    Returns
    -------
    KernelLloydResult
    """
    n = kernel_matrix.shape[0]
    k = seeds.shape[0]
    diag = gram_diagonal(kernel_matrix) if diag is None else np.asarray(diag, np.float64)
    labels, min_sq = _assign(
        diag, gram_columns(kernel_matrix, seeds).astype(np.float64), diag[seeds]
    )
    _fill_empty_clusters(labels, min_sq, k)
    sums = _cluster_kernel_sums(kernel_matrix, labels, k)
    stale = False
    previous_objective = np.inf
    n_iter = 0
    while n_iter < max_iter:
        _, mean_inner, center_sq = _center_terms(sums, labels, k)
        new_labels, min_sq = _assign(diag, mean_inner, center_sq)
        _fill_empty_clusters(new_labels, min_sq, k)
        changed = np.flatnonzero(new_labels != labels)
        if changed.size == 0:
            if not stale:
                break
            sums = _cluster_kernel_sums(kernel_matrix, labels, k)
            stale = False
            continue
        n_iter += 1
        if changed.size > _FULL_UPDATE_FRACTION * n:
            sums = _cluster_kernel_sums(kernel_matrix, new_labels, k)
            stale = False
        else:
            _update_cluster_kernel_sums(sums, kernel_matrix, changed, labels, new_labels)
            stale = True
        labels = new_labels
        objective = float(min_sq.mean())
        if tol > 0.0 and previous_objective - objective <= tol * previous_objective:
            break
        previous_objective = objective
    if stale:
        sums = _cluster_kernel_sums(kernel_matrix, labels, k)
    sizes, mean_inner, center_sq = _center_terms(sums, labels, k)
    rows = np.arange(n)
    own_sq = np.maximum(diag - 2.0 * mean_inner[rows, labels] + center_sq[labels], 0.0)
    _, nearest_sq = _assign(diag, mean_inner, center_sq)
    return KernelLloydResult(
        labels=labels,
        objective=float(own_sq.mean()),
        n_iter=n_iter,
        cluster_sizes=sizes,
        center_sq_norms=center_sq,
        nearest_objective=float(nearest_sq.mean()),
    )
