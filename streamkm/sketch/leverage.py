"""Feature selection by leverage-score sampling (Theorem 11 of Boutsidis et al.)."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from streamkm._core.estimator import RANDOM_STATE_CONSTRAINT
from streamkm._core.sparse_input import SketchInput, select_columns
from streamkm._core.validation import check_random_state
from streamkm.exceptions import ParameterError, StateError
from streamkm.sketch._base import BaseSketcher, require_array
from streamkm.sketch._dimension import feature_selection_dimension
from streamkm.sketch.svd import approximate_right_singular_vectors

__all__ = ["LeverageScoreSelector", "leverage_probabilities"]


def leverage_probabilities(z: np.ndarray) -> np.ndarray:
    """p_i = ||Z_(i)||^2 / ||Z||_F^2 (= ||Z_(i)||^2 / k for orthonormal Z), summing to 1."""
    row_norms = np.einsum("ij,ij->i", z, z)
    return row_norms / row_norms.sum()


class LeverageScoreSelector(BaseSketcher):
    """Select and rescale input features by their k-means leverage scores (Theorem 11).

    ``fit`` computes approximate top-k right singular vectors Z (Lemma 4, see
    :func:`streamkm.sketch.svd.approximate_right_singular_vectors`), the probabilities
    p_i = ||Z_(i)||^2 / k, then draws r features i.i.d. with replacement by p; feature i
    is rescaled by 1 / sqrt(r p_i). The sketch is ``X[:, selected_features_] * scales_``.
    With r = O(k log(k) / eps^2), the optimal k-means partition of the sketch is, with
    constant probability, a (3 + eps)-approximation in the original space.

    Parameters
    ----------
    n_components : "auto" or int, default="auto"
        Number of draws r. "auto" uses :func:`feature_selection_dimension`
        ``ceil(k * max(1, ln k) / eps**2)`` capped at the number of features.
    eps : float, default=0.5
        Accuracy parameter in (0, 1]: range-finder oversampling and ``"auto"`` size.
    n_clusters : int
        Number of clusters k (rank of Z); required, at most min(n_samples, n_features).
    random_state : None, int or numpy.random.Generator, default=None
        Source of randomness for Z and for the draws.

    Attributes
    ----------
    probabilities_ : numpy.ndarray of shape (n_features_in_,), float64
        Sampling probabilities p, summing to 1.
    selected_features_ : numpy.ndarray of shape (n_components_,), int64
        Drawn feature indices, sorted; a feature may appear more than once.
    scales_ : numpy.ndarray of shape (n_components_,), float64
        ``1 / sqrt(n_components_ * probabilities_[selected_features_])``.
    n_components_ : int
        Number of draws r.
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import numpy as np
    >>> from streamkm.sketch import LeverageScoreSelector
    >>> rng = np.random.default_rng(0)
    >>> X = np.hstack([rng.normal(size=(100, 2)) * 10, rng.normal(size=(100, 38)) * 0.01])
    >>> selector = LeverageScoreSelector(n_components=5, n_clusters=2, random_state=0).fit(X)
    >>> sorted(set(selector.selected_features_.tolist()))  # the two informative features
    [0, 1]
    >>> selector.transform(X).shape
    (100, 5)
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "n_components": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "eps": [Interval(Real, 0, 1, closed="right")],
        "n_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    probabilities_: np.ndarray
    selected_features_: np.ndarray
    scales_: np.ndarray

    def __init__(
        self,
        n_components: int | str = "auto",
        eps: float = 0.5,
        n_clusters: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.eps = eps
        self.n_clusters = n_clusters
        self.random_state = random_state

    def _resolve_n_components(self, n_features: int) -> int:
        if isinstance(self.n_components, str):
            return feature_selection_dimension(self.n_clusters, self.eps, n_features)
        return int(self.n_components)

    def _check_params_for(self, n_features: int) -> None:
        if self.n_clusters is None:
            raise ParameterError(
                "LeverageScoreSelector needs n_clusters (the number of clusters k), "
                "got n_clusters=None"
            )
        self._resolve_n_components(n_features)

    def _fit(self, x: SketchInput) -> None:
        rng = check_random_state(self.random_state)
        k = int(self.n_clusters)
        r = self._resolve_n_components(int(x.shape[1]))
        z = approximate_right_singular_vectors(x, k, float(self.eps), rng)
        p = leverage_probabilities(z)
        selected = np.sort(rng.choice(p.size, size=r, replace=True, p=p)).astype(np.int64)
        self.probabilities_ = p
        self.selected_features_ = selected
        self.scales_ = 1.0 / np.sqrt(r * p[selected])
        self.n_components_ = r

    def _transform(self, x: SketchInput) -> np.ndarray:
        columns = select_columns(x, self.selected_features_)
        columns *= self.scales_.astype(x.dtype)
        return columns

    def _fitted_arrays(self) -> dict[str, np.ndarray]:
        return {
            "probabilities": self.probabilities_,
            "selected_features": self.selected_features_,
            "scales": self.scales_,
        }

    def _restore_fitted(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        r, n = self.n_components_, self.n_features_in_
        self.probabilities_ = require_array(arrays, "probabilities", (n,), (np.float64,))
        selected = require_array(arrays, "selected_features", (r,), (np.int64,))
        if r and (selected.min() < 0 or selected.max() >= n):
            raise StateError(
                f"selected_features in the state must lie in [0, {n}), got values "
                f"{int(selected.min())}..{int(selected.max())}"
            )
        self.selected_features_ = selected
        self.scales_ = require_array(arrays, "scales", (r,), (np.float64,))
