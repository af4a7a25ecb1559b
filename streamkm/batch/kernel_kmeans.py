"""Exact full-batch kernel k-means: Lloyd's algorithm in a kernel's feature space."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import (
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions

from streamkm._estimator import KERNEL_CONSTRAINTS, RANDOM_STATE_CONSTRAINT, StreamkmEstimator
from streamkm._numba.lloyd import assign_from_inner
from streamkm._validation import check_random_state
from streamkm.batch._common import check_is_fitted, check_n_clusters, row_chunks
from streamkm.batch.seeding import d2_sampling, farthest_first
from streamkm.exceptions import ParameterError
from streamkm.kernels import KernelSpec, build_kernel

__all__ = ["KernelKMeans", "kernel_lloyd", "KernelLloydResult"]

INIT_METHODS = ("k-means++", "farthest", "random")
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
    """

    labels: np.ndarray
    objective: float
    n_iter: int
    cluster_sizes: np.ndarray
    center_sq_norms: np.ndarray


def _one_hot(labels: np.ndarray, k: int, dtype: np.dtype) -> np.ndarray:
    out = np.zeros((labels.shape[0], k), dtype=dtype)
    out[np.arange(labels.shape[0]), labels] = 1
    return out


def _cluster_kernel_sums(kernel_matrix: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """S[x, j] = sum over rows s of cluster j of K(x, s): one GEMM K @ H, float64 result."""
    return (kernel_matrix @ _one_hot(labels, k, kernel_matrix.dtype)).astype(np.float64)


def _update_cluster_kernel_sums(
    sums: np.ndarray, kernel_matrix: np.ndarray, rows: np.ndarray, old: np.ndarray,
    new: np.ndarray,
) -> None:
    """Move ``rows`` from clusters ``old[rows]`` to ``new[rows]`` in S (in place), using the
    symmetry of K: S += K[rows].T @ (H_new - H_old)[rows]."""
    n, k = sums.shape
    for part in row_chunks(rows.size, n):
        chunk = rows[part]
        delta = np.zeros((chunk.size, k), dtype=kernel_matrix.dtype)
        delta[np.arange(chunk.size), new[chunk]] += 1
        delta[np.arange(chunk.size), old[chunk]] -= 1
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
    kernel_matrix: np.ndarray,
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
    kernel_matrix : numpy.ndarray of shape (n, n)
        Symmetric positive semi-definite K, float32 or float64, C-contiguous.
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
    if diag is None:
        diag = np.diagonal(kernel_matrix).astype(np.float64)
    labels, min_sq = _assign(
        diag, kernel_matrix[:, seeds].astype(np.float64), diag[seeds].astype(np.float64)
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
    return KernelLloydResult(
        labels=labels,
        objective=float(own_sq.mean()),
        n_iter=n_iter,
        cluster_sizes=sizes,
        center_sq_norms=center_sq,
    )


class KernelKMeans(ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin,
                   StreamkmEstimator):
    """Exact full-batch kernel k-means.

    Minimises the mean squared distance, in the feature space of a kernel
    K(x, y) = <phi(x), phi(y)>, of the rows to the mean of their cluster, by Lloyd's
    algorithm on the full n x n kernel matrix (:func:`kernel_lloyd`). This is the
    "full-batch kernel k-means" the mini-batch engine is measured against. Memory is one
    n x n matrix in X's dtype (n = 20,000: 1.6 GB in float32, 3.2 GB in float64); an
    assignment step costs one n x n x k GEMM, or less when few labels change.

    Parameters
    ----------
    n_clusters : int
        Number of clusters k.
    kernel : str
        A registered kernel (:func:`streamkm.kernels.kernel_names`); graph kernels (knn,
        heat) are fitted on X.
    gamma : float, "auto", "median" or None
        Kernel width (rbf, laplacian, polynomial); a rule is resolved on X by
        :func:`streamkm.kernels.resolve_gamma` (None means "auto").
    kernel_params : dict or None
        Kernel options (see :class:`streamkm.cluster.MiniBatchKernelKMeans`).
    degree : int
        Polynomial degree.
    coef0 : float
        Polynomial constant term.
    n_init : int
        Number of starts; the lowest objective wins. Forced to 1 when ``init`` is an array.
    max_iter : int
        Maximum assignment steps per start.
    tol : float
        Relative tolerance on the objective decrease; 0 runs until the labels are stable.
    init : {"k-means++", "farthest", "random"} or array-like of shape (n_clusters,)
        Seeds in feature space, with d(x, c) = K(x, x) - 2 K(x, c) + K(c, c):
        ``"k-means++"`` D^2 sampling, ``"farthest"`` farthest traversal, ``"random"`` k
        distinct random rows, or an array of k distinct row indices of X.
    random_state : int, numpy.random.Generator or None

    Attributes
    ----------
    labels_ : numpy.ndarray of shape (n_samples,), int64
    objective_ : float
        Mean over rows of the squared feature-space distance to their cluster's mean (the
        k-means objective divided by n), for ``labels_``.
    n_iter_ : int
        Assignment steps of the winning start.
    gamma_ : float or None
        The gamma used (None for kernels without one).
    kernel_ : streamkm.kernels.KernelSpec
    cluster_sizes_ : numpy.ndarray of shape (n_clusters,), int64
    center_sq_norms_ : numpy.ndarray of shape (n_clusters,), float64
        <C_j, C_j> of each cluster mean.
    X_fit_ : numpy.ndarray of shape (n_samples, n_features)
        The training rows as the kernel uses them (``kernel_.prepare``; the input rows
        except for graph kernels). The centers are their cluster means in feature space.
    n_features_in_ : int

    Notes
    -----
    Empty clusters: a cluster that loses all its rows takes the row farthest from its own
    center (from a cluster with at least two rows), so every cluster stays non-empty.

    Examples
    --------
    >>> import numpy as np
    >>> from streamkm.batch import KernelKMeans
    >>> angles = np.linspace(0, 2 * np.pi, 40, endpoint=False)
    >>> circle = np.column_stack([np.cos(angles), np.sin(angles)])
    >>> X = np.vstack([0.2 * circle, 3 * circle])  # two nested rings
    >>> model = KernelKMeans(2, gamma=2.0, random_state=0).fit(X)
    >>> len(set(model.labels_[:40])), len(set(model.labels_[40:]))
    (1, 1)
    >>> model.predict([[0.0, 0.1], [0.0, 3.1]]).tolist() == [model.labels_[0], model.labels_[40]]
    True
    """

    _parameter_constraints: dict[str, list[Any]] = {
        **KERNEL_CONSTRAINTS,
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "init": [StrOptions(set(INIT_METHODS)), "array-like"],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        kernel: str = "rbf",
        gamma: float | str | None = None,
        degree: int = 3,
        coef0: float = 1.0,
        n_init: int = 10,
        max_iter: int = 100,
        tol: float = 0.0,
        init: str | np.ndarray = "k-means++",
        random_state: int | np.random.Generator | None = None,
        kernel_params: dict[str, Any] | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.random_state = random_state
        self.kernel_params = kernel_params

    def _kernel_spec(self, x: np.ndarray, rng: np.random.Generator) -> KernelSpec:
        return build_kernel(self.kernel, self.gamma, sample=x, rng=rng,
                            n_clusters=int(self.n_clusters), degree=self.degree,
                            coef0=self.coef0, kernel_params=self.kernel_params)

    def _init_indices(self, k: int, n: int) -> np.ndarray | None:
        if isinstance(self.init, str):
            return None
        seeds = np.asarray(self.init)
        if (
            seeds.shape != (k,)
            or not np.issubdtype(seeds.dtype, np.integer)
            or (seeds < 0).any()
            or (seeds >= n).any()
            or np.unique(seeds).size != k
        ):
            raise ParameterError(
                f"init array must hold n_clusters={k} distinct row indices in [0, {n}), "
                f"got {self.init!r}"
            )
        return seeds.astype(np.int64)

    def _seeds(
        self, kernel_matrix: np.ndarray, diag: np.ndarray, k: int, rng: np.random.Generator
    ) -> np.ndarray:
        n = kernel_matrix.shape[0]

        def sq_dist_to(i: int) -> np.ndarray:
            # feature-space d(x, x_i) = K(x, x) - 2 K(x, x_i) + K(x_i, x_i); K is symmetric
            return diag - 2.0 * kernel_matrix[i].astype(np.float64) + diag[i]

        if self.init == "random":
            return rng.choice(n, size=k, replace=False).astype(np.int64)
        if self.init == "farthest":
            return farthest_first(n, k, sq_dist_to, rng)[0]
        return d2_sampling(n, k, sq_dist_to, rng)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> KernelKMeans:
        """Compute the kernel k-means clustering of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        x = self._validate_X(X, reset=True)
        n = x.shape[0]
        k = check_n_clusters(self.n_clusters, n)
        n_init, max_iter, tol = int(self.n_init), int(self.max_iter), float(self.tol)
        fixed_seeds = self._init_indices(k, n)
        rng = check_random_state(self.random_state)
        spec = self._kernel_spec(x, rng)
        n_features = x.shape[1]
        x = spec.prepare(x)
        kernel_matrix = spec.block(x, x)
        diag = np.diagonal(kernel_matrix).astype(np.float64)
        best: KernelLloydResult | None = None
        for _ in range(1 if fixed_seeds is not None else n_init):
            seeds = fixed_seeds if fixed_seeds is not None else self._seeds(
                kernel_matrix, diag, k, rng
            )
            run = kernel_lloyd(kernel_matrix, seeds, max_iter=max_iter, tol=tol, diag=diag)
            if best is None or run.objective < best.objective:
                best = run
        assert best is not None
        self.labels_ = best.labels
        self.objective_ = best.objective
        self.n_iter_ = best.n_iter
        self.cluster_sizes_ = best.cluster_sizes
        self.center_sq_norms_ = best.center_sq_norms
        self.kernel_ = spec
        self.gamma_ = spec.gamma
        self.X_fit_ = x
        return self

    @property
    def _n_features_out(self) -> int:
        return self.cluster_sizes_.shape[0]

    def _sq_distances(self, X: Any) -> np.ndarray:
        """Squared feature-space distances (n_rows, k) of new rows to the fitted means."""
        check_is_fitted(self, "labels_")
        x = np.ascontiguousarray(self._validate_X(X, reset=False), dtype=self.X_fit_.dtype)
        x = self.kernel_.prepare(x)
        k = self.cluster_sizes_.shape[0]
        one_hot = _one_hot(self.labels_, k, self.X_fit_.dtype)
        out = np.empty((x.shape[0], k), dtype=np.float64)
        sizes = self.cluster_sizes_.astype(np.float64)
        for rows in row_chunks(x.shape[0], self.X_fit_.shape[0]):
            block = self.kernel_.block(x[rows], self.X_fit_)
            mean_inner = (block @ one_hot).astype(np.float64) / sizes
            diag = self.kernel_.diagonal(x[rows]).astype(np.float64)
            out[rows] = diag[:, None] - 2.0 * mean_inner + self.center_sq_norms_[None, :]
        return np.maximum(out, 0.0)

    def predict(self, X: Any) -> np.ndarray:
        """Cluster of each row of X: the fitted cluster mean nearest in feature space.

        Returns
        -------
        numpy.ndarray of shape (n_samples,), int64
        """
        return np.argmin(self._sq_distances(X), axis=1).astype(np.int64)

    def transform(self, X: Any) -> np.ndarray:
        """Feature-space distances of the rows of X to the fitted cluster means,
        shape (n_samples, n_clusters), float64."""
        return np.sqrt(self._sq_distances(X))
