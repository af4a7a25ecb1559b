"""Exact full-batch kernel k-means: Lloyd's algorithm in a kernel's feature space."""

from __future__ import annotations

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

from streamkm._core.estimator import RANDOM_STATE_CONSTRAINT, StreamkmEstimator
from streamkm._core.kernel_lloyd import (
    Gram,
    KernelLloydResult,
    feature_gram,
    gram_diagonal,
    kernel_lloyd,
    one_hot,
)
from streamkm._core.seeding import d2_sampling, farthest_first, gram_sq_dist_to
from streamkm._core.validation import check_random_state
from streamkm.batch._common import check_is_fitted, check_n_clusters, row_chunks
from streamkm.exceptions import ParameterError
from streamkm.kernels import KernelSpec, build_kernel
from streamkm.kernels._constraints import KERNEL_CONSTRAINTS

__all__ = ["KernelKMeans", "kernel_lloyd", "KernelLloydResult"]

INIT_METHODS = ("k-means++", "farthest", "random")


class KernelKMeans(ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin,
                   StreamkmEstimator):
    """Exact full-batch kernel k-means.

    Minimises the mean squared distance, in the feature space of a kernel
    K(x, y) = <phi(x), phi(y)>, of the rows to the mean of their cluster, by Lloyd's
    algorithm on the full n x n kernel matrix (:func:`kernel_lloyd`). This is the
    "full-batch kernel k-means" the mini-batch engine is measured against. Memory is one
    n x n matrix in X's dtype (n = 20,000: 1.6 GB in float32, 3.2 GB in float64); an
    assignment step costs one n x n x k GEMM, or less when few labels change. Kernels with
    explicit features F (heat, anchor, level_set, linear) keep K = F F^T as its factor when F has
    fewer than n / 2 columns: memory n x m and a step O(n m k), the same iterations.

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
        self, kernel_matrix: Gram, diag: np.ndarray, k: int, rng: np.random.Generator
    ) -> np.ndarray:
        n = kernel_matrix.shape[0]
        sq_dist_to = gram_sq_dist_to(kernel_matrix, diag)
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
        kernel_matrix = feature_gram(x) if spec.explicit_features else spec.block(x, x)
        diag = gram_diagonal(kernel_matrix)
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
        members = one_hot(self.labels_, k, self.X_fit_.dtype)
        out = np.empty((x.shape[0], k), dtype=np.float64)
        sizes = self.cluster_sizes_.astype(np.float64)
        # explicit features: the cluster sums of the features, not the kernel block
        feature_sums = self.X_fit_.T @ members if self.kernel_.explicit_features else None
        for rows in row_chunks(x.shape[0], self.X_fit_.shape[0]):
            if feature_sums is not None:
                inner = x[rows] @ feature_sums
            else:
                inner = self.kernel_.block(x[rows], self.X_fit_) @ members
            mean_inner = inner.astype(np.float64) / sizes
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
