"""How many sketch dimensions the k-means guarantees of Boutsidis et al. ask for."""

from __future__ import annotations

import math

from streamkm._core.validation import check_float, check_int

__all__ = ["kmeans_sketch_dimension", "feature_selection_dimension"]


def _cap(r: int, n_features: int | None) -> int:
    if n_features is None:
        return r
    n = check_int(n_features, "n_features", low=1)
    return min(r, n)


def kmeans_sketch_dimension(n_clusters: int, eps: float, n_features: int | None = None) -> int:
    """Sketch dimension ``ceil(k / eps**2)`` for k-means, capped at ``n_features``.

    This is the k-means bound r = O(k / eps^2) of random projection (Theorem 12 of
    Boutsidis, Zouzias, Mahoney, Drineas), not the Johnson-Lindenstrauss bound
    O(log(m) / eps^2), which grows with the number of points m.

    Parameters
    ----------
    n_clusters : int
        The number of clusters k, at least 1.
    eps : float
        Accuracy parameter, in (0, 1].
    n_features : int or None, default=None
        Input dimension; the result never exceeds it. None means no cap.

    Returns
    -------
    int
        The number of sketch dimensions r, at least 1.
    """
    k = check_int(n_clusters, "n_clusters", low=1)
    e = check_float(eps, "eps", low=0.0, high=1.0, low_inclusive=False)
    return _cap(max(1, math.ceil(k / (e * e))), n_features)


def feature_selection_dimension(n_clusters: int, eps: float, n_features: int | None = None) -> int:
    """Number of sampled features ``ceil(k * max(1, ln k) / eps**2)``, capped at ``n_features``.

    Feature selection by leverage scores (Theorem 11) needs r = O(k log(k) / eps^2) draws,
    a factor log(k) more than random projection.

    Parameters
    ----------
    n_clusters : int
        The number of clusters k, at least 1.
    eps : float
        Accuracy parameter, in (0, 1].
    n_features : int or None, default=None
        Input dimension; the result never exceeds it. None means no cap.

    Returns
    -------
    int
        The number of features to sample, at least 1.
    """
    k = check_int(n_clusters, "n_clusters", low=1)
    e = check_float(eps, "eps", low=0.0, high=1.0, low_inclusive=False)
    return _cap(max(1, math.ceil(k * max(1.0, math.log(k)) / (e * e))), n_features)
