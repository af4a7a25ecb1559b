"""Lloyd's k-means with k-means++, farthest-traversal or random seeding."""

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

from streamkm._core.estimator import (
    RANDOM_STATE_CONSTRAINT,
    PreservesFloat32Mixin,
    StreamkmEstimator,
)
from streamkm._core.seeding import d2_sampling, euclidean_sq_dist_to, farthest_first
from streamkm._core.validation import check_array, check_random_state
from streamkm._numba.lloyd import assign_from_inner, cluster_sums, sq_dist_to_assigned
from streamkm.batch._common import check_is_fitted, check_n_clusters, mean_feature_variance
from streamkm.exceptions import ParameterError

__all__ = ["KMeans", "lloyd", "assign_nearest", "LloydResult"]

INIT_METHODS = ("k-means++", "farthest", "random")
_CHUNK_OUTPUT_ENTRIES = 1 << 16
_CHUNK_GEMM_WORK = 1 << 18
_MIN_CHUNK_ROWS = 16


@dataclass(frozen=True)
class LloydResult:
    """Outcome of one Lloyd run.

    Attributes
    ----------
    centers : numpy.ndarray of shape (k, n_features)
    labels : numpy.ndarray of shape (n_samples,), int64
        Nearest center of each row (consistent with ``centers``).
    inertia : float
        Sum of squared distances of the rows to their nearest center.
    n_iter : int
        Number of Lloyd iterations run.
    """

    centers: np.ndarray
    labels: np.ndarray
    inertia: float
    n_iter: int


def _gemm_chunk_rows(k: int, d: int) -> int:
    """Rows per GEMM chunk: the (rows, k) product stays cache-resident and each GEMM stays
    small enough for BLAS to run it on one thread. On shared cores, multithreaded GEMMs of
    tall-skinny chunks were measured 10-40x slower than this."""
    return max(_MIN_CHUNK_ROWS, min(_CHUNK_OUTPUT_ENTRIES // k, _CHUNK_GEMM_WORK // (k * d)))


def assign_nearest(
    x: np.ndarray, centers: np.ndarray, x_sq: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Nearest center (first on ties) and squared distance of every row.

    Inner products go through a BLAS GEMM in row chunks, the argmin through numba.

    Parameters
    ----------
    x : numpy.ndarray of shape (n_samples, n_features), C-contiguous float32/float64
    centers : numpy.ndarray of shape (k, n_features), same dtype
    x_sq : numpy.ndarray of shape (n_samples,), optional
        Squared row norms of ``x`` when already known.

    Returns
    -------
    labels : numpy.ndarray of shape (n_samples,), int64
    min_sq_dist : numpy.ndarray of shape (n_samples,), float64
        From the expansion ||x||^2 - 2<x, c> + ||c||^2, clipped at 0.
    """
    if x_sq is None:
        x_sq = np.einsum("ij,ij->i", x, x)
    c_sq = np.einsum("ij,ij->i", centers, centers)
    centers_t = np.ascontiguousarray(centers.T)
    n = x.shape[0]
    labels = np.empty(n, dtype=np.int64)
    min_sq = np.empty(n, dtype=np.float64)
    step = _gemm_chunk_rows(*centers.shape)
    for start in range(0, n, step):
        rows = slice(start, min(start + step, n))
        assign_from_inner(x[rows] @ centers_t, x_sq[rows], c_sq, labels[rows], min_sq[rows])
    return labels, min_sq


def _relocate_empty_clusters(
    x: np.ndarray, labels: np.ndarray, min_sq: np.ndarray, sums: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Give each empty cluster the row farthest from its center, taken from a cluster with
    at least two rows (in place on ``sums``/``counts``; ``labels`` are fixed by the next
    assignment)."""
    empty = np.flatnonzero(counts == 0)
    if empty.size == 0:
        return
    order = np.argsort(-min_sq, kind="stable")
    pos = 0
    for j in empty:
        while pos < order.size and counts[labels[order[pos]]] < 2:
            pos += 1
        if pos == order.size:
            return
        row = order[pos]
        pos += 1
        old = labels[row]
        sums[old] -= x[row]
        counts[old] -= 1
        sums[j] = x[row]
        counts[j] = 1


def lloyd(
    x: np.ndarray, initial_centers: np.ndarray, *, max_iter: int = 300, tol: float = 0.0,
    x_sq: np.ndarray | None = None,
) -> LloydResult:
    """Lloyd's algorithm from given centers.

    Each iteration assigns every row to its nearest center and moves every center to the mean
    of its rows. It stops when the labels no longer change, when the summed squared center
    shift is at most ``tol`` (absolute), or after ``max_iter`` iterations; the returned labels
    and inertia are then recomputed for the final centers. A cluster left empty takes the row
    farthest from its center (from a cluster with at least two rows), as scikit-learn does.

    Parameters
    ----------
    x : numpy.ndarray of shape (n_samples, n_features), C-contiguous float32/float64
    initial_centers : numpy.ndarray of shape (k, n_features)
    max_iter : int
    tol : float
        Absolute tolerance on the summed squared center shift.
    x_sq : numpy.ndarray, optional
        Squared row norms of ``x``.

    Returns
    -------
    LloydResult
    """
    if x_sq is None:
        x_sq = np.einsum("ij,ij->i", x, x)
    k = initial_centers.shape[0]
    centers = np.array(initial_centers, dtype=x.dtype, order="C")
    sums = np.empty((k, x.shape[1]), dtype=np.float64)
    counts = np.empty(k, dtype=np.int64)
    previous = None
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        labels, min_sq = assign_nearest(x, centers, x_sq)
        cluster_sums(x, labels, sums, counts)
        _relocate_empty_clusters(x, labels, min_sq, sums, counts)
        new_centers = (sums / np.maximum(counts, 1)[:, None]).astype(x.dtype)
        shift = float(np.sum((new_centers.astype(np.float64) - centers) ** 2))
        centers = new_centers
        if previous is not None and np.array_equal(labels, previous):
            break
        previous = labels
        if shift <= tol:
            break
    labels, _ = assign_nearest(x, centers, x_sq)
    sq = np.empty(x.shape[0], dtype=np.float64)
    sq_dist_to_assigned(x, centers, labels, sq)
    return LloydResult(centers=centers, labels=labels, inertia=float(sq.sum()), n_iter=n_iter)


class KMeans(PreservesFloat32Mixin, ClassNamePrefixFeaturesOutMixin, ClusterMixin,
             TransformerMixin, StreamkmEstimator):
    """k-means clustering by Lloyd's algorithm.

    Minimises the sum of squared Euclidean distances of the rows to their nearest center.
    Lloyd's algorithm alternates assigning rows to the nearest center and moving each center
    to the mean of its rows; it finds a local optimum that depends on the start, so ``n_init``
    starts are run and the lowest inertia wins.

    Parameters
    ----------
    n_clusters : int
        Number of clusters k.
    init : {"k-means++", "farthest", "random"} or array-like of shape (k, n_features)
        ``"k-means++"``: D^2 sampling (:func:`kmeans_plusplus`); ``"farthest"``: farthest
        traversal (:func:`farthest_traversal`); ``"random"``: k distinct random rows; an
        array: these initial centers (then a single run).
    n_init : int or "auto"
        Number of starts. ``"auto"``: 1 for ``"k-means++"`` and an array, 10 for
        ``"farthest"`` and ``"random"``.
    max_iter : int
        Maximum number of Lloyd iterations per start.
    tol : float
        Relative tolerance: a run stops when the summed squared center shift is at most
        ``tol`` times the mean per-feature variance of X (scikit-learn's rule), or when the
        labels stop changing.
    random_state : int, numpy.random.Generator or None
        Seeds the initialisation.

    Attributes
    ----------
    cluster_centers_ : numpy.ndarray of shape (n_clusters, n_features)
        In the dtype of the training data (float32 or float64).
    labels_ : numpy.ndarray of shape (n_samples,), int64
    inertia_ : float
        Sum of squared distances of the training rows to their nearest center.
    n_iter_ : int
        Iterations of the winning run.
    n_features_in_ : int

    Notes
    -----
    A cluster that becomes empty is given the row farthest from its current center, taken
    from a cluster with at least two rows. When X has fewer distinct rows than n_clusters,
    tied rows go to the first of the equal centers and some clusters stay empty in ``labels_``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamkm.batch import KMeans
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [10.0, 0.0], [10.0, 1.0]])
    >>> km = KMeans(2, random_state=0).fit(X)
    >>> km.labels_[0] == km.labels_[1] != km.labels_[2] == km.labels_[3]
    np.True_
    >>> km.inertia_
    1.0
    >>> sorted(km.cluster_centers_.tolist())
    [[0.0, 0.5], [10.0, 0.5]]
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions(set(INIT_METHODS)), "array-like"],
        "n_init": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        init: str | np.ndarray = "k-means++",
        n_init: int | str = "auto",
        max_iter: int = 300,
        tol: float = 1e-4,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _resolved_n_init(self) -> int:
        if not isinstance(self.init, str):
            return 1
        if self.n_init == "auto":
            return 1 if self.init == "k-means++" else 10
        return int(self.n_init)

    @property
    def _n_features_out(self) -> int:
        return self.cluster_centers_.shape[0]

    def _initial_centers(self, x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        if not isinstance(self.init, str):
            centers = np.asarray(self.init)
            if centers.ndim != 2 or centers.shape != (k, x.shape[1]):
                raise ParameterError(
                    f"init array must have shape (n_clusters, n_features) = "
                    f"({k}, {x.shape[1]}), got shape {centers.shape!r}"
                )
            centers = check_array(centers, name="init")
            return np.ascontiguousarray(centers, dtype=x.dtype)
        if self.init == "random":
            idx = rng.choice(x.shape[0], size=k, replace=False)
        elif self.init == "farthest":
            idx, _ = farthest_first(x.shape[0], k, euclidean_sq_dist_to(x), rng)
        else:
            idx = d2_sampling(x.shape[0], k, euclidean_sq_dist_to(x), rng)
        return x[idx]

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> KMeans:
        """Compute the k-means clustering of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        x = self._validate_X(X, reset=True)
        k = check_n_clusters(self.n_clusters, x.shape[0])
        n_init, max_iter = self._resolved_n_init(), int(self.max_iter)
        rng = check_random_state(self.random_state)
        tol_abs = float(self.tol) * mean_feature_variance(x)
        x_sq = np.einsum("ij,ij->i", x, x)
        best: LloydResult | None = None
        for _ in range(n_init):
            run = lloyd(
                x, self._initial_centers(x, k, rng), max_iter=max_iter, tol=tol_abs, x_sq=x_sq
            )
            if best is None or run.inertia < best.inertia:
                best = run
        assert best is not None
        self.cluster_centers_ = best.centers
        self.labels_ = best.labels
        self.inertia_ = best.inertia
        self.n_iter_ = best.n_iter
        return self

    def _check_input(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "cluster_centers_")
        x = self._validate_X(X, reset=False)
        return np.ascontiguousarray(x, dtype=self.cluster_centers_.dtype)

    def predict(self, X: Any) -> np.ndarray:
        """Index of the nearest fitted center of each row of X (int64, shape (n_samples,))."""
        labels, _ = assign_nearest(self._check_input(X), self.cluster_centers_)
        return labels

    def transform(self, X: Any) -> np.ndarray:
        """Euclidean distances of the rows of X to every center, shape (n_samples, n_clusters),
        in the fitted dtype."""
        x = self._check_input(X)
        c = self.cluster_centers_
        sq = (
            np.einsum("ij,ij->i", x, x)[:, None]
            - 2.0 * (x @ c.T)
            + np.einsum("ij,ij->i", c, c)[None, :]
        )
        return np.sqrt(np.maximum(sq, 0.0)).astype(c.dtype, copy=False)

    def score(self, X: Any, y: Any = None) -> float:
        """Minus the sum of squared distances of the rows of X to their nearest center."""
        x = self._check_input(X)
        labels, _ = assign_nearest(x, self.cluster_centers_)
        sq = np.empty(x.shape[0], dtype=np.float64)
        sq_dist_to_assigned(x, self.cluster_centers_, labels, sq)
        return -float(sq.sum())
