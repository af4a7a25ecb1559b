"""Spectral clustering: SVD projection + k-means, or recursive normalised-Laplacian bisection."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from streamkm._core.estimator import RANDOM_STATE_CONSTRAINT, StreamkmEstimator
from streamkm._core.randomized_svd import top_right_singular_vectors
from streamkm._core.validation import check_int, check_random_state
from streamkm.batch._common import check_n_clusters, row_chunks
from streamkm.batch.kmeans import KMeans
from streamkm.exceptions import ValidationError
from streamkm.kernels import KernelSpec, median_heuristic_gamma

__all__ = ["SpectralClustering", "rbf_affinity", "knn_affinity", "normalized_cut_bisection"]

MODES = ("svd", "laplacian")
AFFINITIES = ("rbf", "nearest_neighbors", "precomputed")
SVD_SOLVERS = ("auto", "full", "randomized")
_FULL_SVD_MAX_DIM = 1000


def rbf_affinity(x: np.ndarray, gamma: float) -> np.ndarray:
    """Dense rbf affinity exp(-gamma ||x_i - x_j||^2), in x's dtype."""
    return KernelSpec("rbf", gamma).block(x, x)


def knn_affinity(x: np.ndarray, n_neighbors: int) -> np.ndarray:
    """Symmetric k-nearest-neighbour connectivity (A + A^T) / 2, each row's own point
    included among its neighbours; dense float64."""
    n = x.shape[0]
    x_sq = np.einsum("ij,ij->i", x, x)
    conn = np.zeros((n, n), dtype=np.float64)
    for rows in row_chunks(n, n):
        sq = x_sq[rows, None] - 2.0 * (x[rows] @ x.T) + x_sq[None, :]
        sq[np.arange(sq.shape[0]), np.arange(rows.start, rows.stop)] = -np.inf
        nearest = np.argpartition(sq, n_neighbors - 1, axis=1)[:, :n_neighbors]
        conn[np.arange(rows.start, rows.stop)[:, None], nearest] = 1.0
    return 0.5 * (conn + conn.T)


def normalized_cut_bisection(w: np.ndarray) -> tuple[float, np.ndarray]:
    """Best split of a weighted graph along its Fiedler vector.

    Embeds the vertices by D^{-1/2} u_2, with u_2 the eigenvector of the second-smallest
    eigenvalue of the normalised Laplacian I - D^{-1/2} W D^{-1/2}, and sweeps the threshold
    over the sorted embedding, keeping the cut with the smallest normalised cut
    cut(S, S') (1/vol(S) + 1/vol(S')) (Shi & Malik, 2000).

    Parameters
    ----------
    w : numpy.ndarray of shape (m, m)
        Symmetric non-negative affinities, m >= 2.

    Returns
    -------
    ncut : float
        Normalised cut of the split (inf when no split has both volumes positive; the split
        is then into halves of the embedding order).
    side : numpy.ndarray of shape (m,), bool
        True for the vertices on the first side.
    """
    m = w.shape[0]
    w = np.asarray(w, dtype=np.float64)
    degree = w.sum(axis=1)
    inv_sqrt = np.zeros(m)
    np.divide(1.0, np.sqrt(degree), out=inv_sqrt, where=degree > 0)
    normalized = inv_sqrt[:, None] * w * inv_sqrt[None, :]
    _, vectors = np.linalg.eigh(normalized)
    embedding = inv_sqrt * vectors[:, -2]
    order = np.argsort(embedding, kind="stable")
    sorted_w = w[np.ix_(order, order)]
    within = np.cumsum(2.0 * np.tril(sorted_w, -1).sum(axis=1) + np.diag(sorted_w))
    volume = np.cumsum(degree[order])
    total = volume[-1]
    cut = np.maximum(volume - within, 0.0)[:-1]
    vol_a = volume[:-1]
    vol_b = total - vol_a
    valid = (vol_a > 0) & (vol_b > 0)
    ncut = np.full(m - 1, np.inf)
    ncut[valid] = cut[valid] / vol_a[valid] + cut[valid] / vol_b[valid]
    best = int(np.argmin(ncut)) if np.isfinite(ncut).any() else m // 2 - 1
    side = np.zeros(m, dtype=bool)
    side[order[: best + 1]] = True
    return float(ncut[best]), side


class SpectralClustering(ClusterMixin, StreamkmEstimator):
    """Spectral clustering (Foundations of Data Science, clustering chapter).

    Two modes:

    ``"svd"``
        Rows of X are the data points (feature vectors, or rows of an adjacency matrix).
        They are projected on the span of the top-k right singular vectors of X, which
        brings each point closer to its cluster center (Theorem 7.4), and the projections are
        clustered by k-means. The SVD is randomized when both dimensions exceed 1000
        (``svd_solver="auto"``).
    ``"laplacian"``
        Builds an affinity matrix (or takes X as one, ``affinity="precomputed"``) and splits
        recursively: each cluster's subgraph is cut along the second eigenvector of its
        normalised Laplacian at the threshold of smallest normalised cut, and the cluster
        whose cut is smallest is split next, until ``n_clusters`` clusters exist. Dense
        eigendecompositions: meant for a few thousand points.

    Parameters
    ----------
    n_clusters : int
        Number of clusters.
    mode : {"svd", "laplacian"}
    affinity : {"rbf", "nearest_neighbors", "precomputed"}
        Laplacian mode only. ``"rbf"``: exp(-gamma ||x - y||^2); ``"nearest_neighbors"``:
        symmetrised k-nearest-neighbour graph; ``"precomputed"``: X is a symmetric
        non-negative (n, n) affinity matrix.
    gamma : float or None
        rbf width; None uses the median heuristic 1 / median squared distance (a global
        scale: separating non-convex shapes such as nested rings needs a larger gamma or
        ``"nearest_neighbors"``).
    n_neighbors : int
        Neighbours per point for ``"nearest_neighbors"``.
    svd_solver : {"auto", "full", "randomized"}
        SVD mode only.
    n_init : int
        k-means starts in SVD mode.
    random_state : int, numpy.random.Generator or None

    Attributes
    ----------
    labels_ : numpy.ndarray of shape (n_samples,), int64
    embedding_ : numpy.ndarray of shape (n_samples, r)
        SVD mode: coordinates of the rows in the top-r singular subspace,
        r = min(n_clusters, n_samples, n_features).
    components_ : numpy.ndarray of shape (r, n_features)
        SVD mode: the top right singular vectors.
    singular_values_ : numpy.ndarray of shape (r,)
        SVD mode.
    affinity_matrix_ : numpy.ndarray of shape (n_samples, n_samples)
        Laplacian mode.
    split_ncuts_ : list of float
        Laplacian mode: normalised cut of each split, in the order performed.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from streamkm.batch import SpectralClustering
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 0.2, (20, 3)), rng.normal(5, 0.2, (20, 3))])
    >>> labels = SpectralClustering(2, random_state=0).fit_predict(X)
    >>> len(set(labels[:20])), len(set(labels[20:])), bool(labels[0] != labels[-1])
    (1, 1, True)
    >>> model = SpectralClustering(2, mode="laplacian", random_state=0).fit(X)
    >>> bool((model.labels_ == labels).all() or (model.labels_ != labels).all())
    True
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "mode": [StrOptions(set(MODES))],
        "affinity": [StrOptions(set(AFFINITIES))],
        "gamma": [Interval(Real, 0, None, closed="neither"), None],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "svd_solver": [StrOptions(set(SVD_SOLVERS))],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    def __init__(
        self,
        n_clusters: int = 2,
        *,
        mode: str = "svd",
        affinity: str = "rbf",
        gamma: float | None = None,
        n_neighbors: int = 10,
        svd_solver: str = "auto",
        n_init: int = 10,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.mode = mode
        self.affinity = affinity
        self.gamma = gamma
        self.n_neighbors = n_neighbors
        self.svd_solver = svd_solver
        self.n_init = n_init
        self.random_state = random_state

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.mode == "laplacian" and self.affinity == "precomputed"
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> SpectralClustering:
        """Cluster the rows of X (or the vertices of the affinity X).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, n_samples)
        y : ignored

        Returns
        -------
        self
        """
        x = self._validate_X(X, reset=True)
        k = check_n_clusters(self.n_clusters, x.shape[0])
        rng = check_random_state(self.random_state)
        if self.mode == "svd":
            self._fit_svd(x, k, rng)
        else:
            self._fit_laplacian(x, k, rng)
        return self

    def _fit_svd(self, x: np.ndarray, k: int, rng: np.random.Generator) -> None:
        solver, n_init = self.svd_solver, int(self.n_init)
        r = min(k, *x.shape)
        randomized = solver == "randomized" or (
            solver == "auto" and min(x.shape) > _FULL_SVD_MAX_DIM
        )
        s, vt = top_right_singular_vectors(x, r, randomized=randomized, rng=rng)
        self.singular_values_ = s
        self.components_ = vt.astype(x.dtype)
        self.embedding_ = (x @ self.components_.T).astype(x.dtype, copy=False)
        km = KMeans(k, n_init=n_init, random_state=rng).fit(self.embedding_)
        self.labels_ = km.labels_

    def _affinity(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        affinity = self.affinity
        if affinity == "precomputed":
            n = x.shape[0]
            if x.shape != (n, n):
                raise ValidationError(
                    f"a precomputed affinity must be square, got shape {x.shape!r}"
                )
            if (x < 0).any():
                raise ValidationError(
                    f"a precomputed affinity must be non-negative, got {x.min()!r}"
                )
            asym = float(np.abs(x - x.T).max())
            if asym > 1e-6 * max(1.0, float(np.abs(x).max())):
                raise ValidationError(
                    f"a precomputed affinity must be symmetric, got max |A - A^T| = {asym!r}"
                )
            return x
        if affinity == "nearest_neighbors":
            n_neighbors = check_int(self.n_neighbors, "n_neighbors", low=1, high=x.shape[0])
            return knn_affinity(x, n_neighbors)
        if self.gamma is None:
            gamma = median_heuristic_gamma(x, "rbf", rng)
        else:
            gamma = float(self.gamma)
        return rbf_affinity(x, gamma)

    def _fit_laplacian(self, x: np.ndarray, k: int, rng: np.random.Generator) -> None:
        w = self._affinity(x, rng)
        leaves: list[np.ndarray] = [np.arange(x.shape[0])]
        splits: list[tuple[float, np.ndarray] | None] = [None]
        ncuts: list[float] = []
        while len(leaves) < k:
            for i, members in enumerate(leaves):
                if splits[i] is None and members.size >= 2:
                    splits[i] = normalized_cut_bisection(w[np.ix_(members, members)])
            candidates = [i for i, s in enumerate(splits) if s is not None]
            best = min(candidates, key=lambda i: splits[i][0])  # type: ignore[index]
            ncut, side = splits[best]  # type: ignore[misc]
            members = leaves[best]
            leaves[best : best + 1] = [members[side], members[~side]]
            splits[best : best + 1] = [None, None]
            ncuts.append(ncut)
        labels = np.empty(x.shape[0], dtype=np.int64)
        for j, members in enumerate(sorted(leaves, key=lambda m: int(m.min()))):
            labels[members] = j
        self.labels_ = labels
        self.affinity_matrix_ = w
        self.split_ncuts_ = ncuts
