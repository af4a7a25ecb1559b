"""Ward's merge cost and Ward agglomerative clustering."""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval

from streamkm._core.estimator import StreamkmEstimator
from streamkm._numba.ward import half_sq_distances, ward_nn_chain
from streamkm.batch._common import check_is_fitted, check_n_clusters

__all__ = ["ward_cost", "WardAgglomerative"]


def ward_cost(n_a: Any, n_b: Any, sq_dist: Any) -> np.ndarray | float:
    """Increase of the k-means cost when clusters a and b are merged.

    ``cost(a + b) - cost(a) - cost(b) = n_a n_b / (n_a + n_b) * ||c_a - c_b||^2``, where n are
    the cluster sizes (or total weights) and ``sq_dist`` the squared distance between the
    cluster means, in input space or in a kernel's feature space. Broadcasts like numpy.

    Parameters
    ----------
    n_a, n_b : float or array-like
        Positive cluster sizes.
    sq_dist : float or array-like
        Squared distances between the means (non-negative).

    Returns
    -------
    float or numpy.ndarray
        A float when every argument is a scalar.
    """
    a = np.asarray(n_a, dtype=np.float64)
    b = np.asarray(n_b, dtype=np.float64)
    d = np.asarray(sq_dist, dtype=np.float64)
    cost = a * b / (a + b) * d
    return float(cost) if cost.ndim == 0 else cost


def _sorted_tree(
    first: np.ndarray, second: np.ndarray, merge_cost: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort merges by cost and name clusters as scipy does: leaves 0..n-1, the cluster made by
    the i-th merge n + i. Returns (children, merge_costs, sizes)."""
    order = np.argsort(merge_cost, kind="stable")
    parent = np.arange(n)
    node_of_root = np.arange(n)
    size_of_root = np.ones(n, dtype=np.int64)

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    children = np.empty((n - 1, 2), dtype=np.int64)
    sizes = np.empty(n - 1, dtype=np.int64)
    for step, m in enumerate(order):
        ra, rb = root(int(first[m])), root(int(second[m]))
        a, b = node_of_root[ra], node_of_root[rb]
        children[step] = (min(a, b), max(a, b))
        parent[ra] = rb
        size_of_root[rb] += size_of_root[ra]
        node_of_root[rb] = n + step
        sizes[step] = size_of_root[rb]
    return children, merge_cost[order], sizes


def _cut(children: np.ndarray, n: int, n_clusters: int) -> np.ndarray:
    """Labels 0..n_clusters-1 after the first n - n_clusters merges, numbered by first row."""
    parent = np.arange(2 * n - 1)
    for step in range(n - n_clusters):
        parent[children[step]] = n + step
    while True:  # pointer doubling: parents always have larger ids than their children
        grand = parent[parent]
        if np.array_equal(grand, parent):
            break
        parent = grand
    root = parent[:n]
    _, first_row, labels = np.unique(root, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first_row))
    return rank[labels].astype(np.int64)


class WardAgglomerative(ClusterMixin, StreamkmEstimator):
    """Agglomerative clustering with Ward's criterion.

    Starts from singletons and repeatedly merges the two clusters whose union increases the
    k-means cost least (:func:`ward_cost`), until ``n_clusters`` remain. Uses the
    nearest-neighbour chain on a dense cost matrix: O(n^2) time and n^2 float64 of memory,
    meant for moderate n (a few thousand rows). The full merge tree is kept, so the partition
    at any other k is one call to :meth:`labels_at`.

    Parameters
    ----------
    n_clusters : int
        Number of clusters to return in ``labels_``.

    Attributes
    ----------
    labels_ : numpy.ndarray of shape (n_samples,), int64
        Clusters numbered in the order of their first row.
    children_ : numpy.ndarray of shape (n_samples - 1, 2), int64
        The merges in increasing cost; leaves are 0..n-1, merge i creates node n + i.
    merge_costs_ : numpy.ndarray of shape (n_samples - 1,), float64
        Ward cost of each merge (non-decreasing).
    linkage_ : numpy.ndarray of shape (n_samples - 1, 4), float64
        The tree in scipy's linkage format: children, height sqrt(2 * cost) (scipy's Ward
        distance), size of the new cluster.
    n_features_in_ : int

    Examples
    --------
    >>> from streamkm.batch import WardAgglomerative
    >>> X = [[0.0], [0.2], [5.0], [5.3], [20.0]]
    >>> model = WardAgglomerative(3).fit(X)
    >>> model.labels_.tolist()
    [0, 0, 1, 1, 2]
    >>> model.labels_at(2).tolist()
    [0, 0, 0, 0, 1]
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, n_clusters: int = 2) -> None:
        self.n_clusters = n_clusters

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> WardAgglomerative:
        """Build the Ward merge tree of X and cut it at ``n_clusters``.

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
        if n == 1:
            children = np.empty((0, 2), dtype=np.int64)
            costs = np.empty(0)
            sizes = np.empty(0, dtype=np.int64)
        else:
            cost = np.empty((n, n), dtype=np.float64)
            half_sq_distances(x, cost)
            first, second, merge_cost = ward_nn_chain(cost)
            del cost
            children, costs, sizes = _sorted_tree(first, second, merge_cost, n)
        self.children_ = children
        self.merge_costs_ = costs
        self.linkage_ = np.column_stack(
            [children.astype(np.float64), np.sqrt(2.0 * np.maximum(costs, 0.0)), sizes]
        )
        self._n_samples = n
        self.labels_ = _cut(children, n, k)
        return self

    def labels_at(self, n_clusters: int) -> np.ndarray:
        """Partition of the training rows into ``n_clusters`` clusters from the fitted tree."""
        check_is_fitted(self, "children_")
        k = check_n_clusters(n_clusters, self._n_samples)
        return _cut(self.children_, self._n_samples, k)

