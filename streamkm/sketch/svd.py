"""Approximate top-k right singular vectors and the SVD sketch (Lemma 4, Theorem 13 of Boutsidis et al.)."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.utils._param_validation import Interval

from streamkm._core.estimator import RANDOM_STATE_CONSTRAINT
from streamkm._core.randomized_svd import randomized_svd
from streamkm._core.sparse_input import SketchInput, right_multiply
from streamkm._core.validation import check_random_state
from streamkm.exceptions import ValidationError
from streamkm.sketch._base import BaseSketcher, float_dtype_from_name, require_array

__all__ = ["ApproxSVD", "approximate_right_singular_vectors", "range_finder_width"]


def range_finder_width(n_components: int, eps: float) -> int:
    """Number of Gaussian test columns ``k + ceil(k / eps) + 1`` of Lemma 4."""
    return n_components + math.ceil(n_components / eps) + 1


def approximate_right_singular_vectors(
    x: SketchInput, n_components: int, eps: float, rng: np.random.Generator,
    n_power_iter: int = 4,
) -> np.ndarray:
    """Orthonormal Z (n_features, k) spanning approximately the top-k right singular vectors.

    The construction of Lemma 4: Y = X Omega with ``k + ceil(k/eps) + 1`` i.i.d. N(0, 1)
    columns, Q = orth(Y), Z = the top-k right singular vectors of Q^T X, which gives
    E||X - X Z Z^T||_F^2 <= (1 + eps) ||X - X_k||_F^2; ``n_power_iter`` power iterations
    (:func:`streamkm._core.randomized_svd.randomized_svd`) only sharpen Z. Sparse X stays
    sparse. Each column's largest-magnitude entry is positive.

    Returns
    -------
    numpy.ndarray of shape (n_features, n_components), float64
    """
    n_samples, n_features = x.shape
    if n_components > min(n_samples, n_features):
        raise ValidationError(
            f"n_components={n_components!r} exceeds min(n_samples={n_samples}, "
            f"n_features={n_features}) = {min(n_samples, n_features)} of the input"
        )
    _, vt = randomized_svd(x, n_components, width=range_finder_width(n_components, eps),
                           n_power_iter=n_power_iter, rng=rng)
    return np.ascontiguousarray(vt.T)


class ApproxSVD(BaseSketcher):
    """Features from approximate top-k right singular vectors (Theorem 13 of Boutsidis et al.).

    ``fit`` computes Z with :func:`approximate_right_singular_vectors`; the sketch is
    ``X Z`` with r = k columns. The optimal k-means partition of the sketch is, with
    constant probability, a (2 + eps)-approximation in the original space.

    Parameters
    ----------
    n_components : int
        k, the number of clusters and of sketch dimensions; at most
        min(n_samples, n_features) of the fitted input.
    eps : float, default=0.5
        Accuracy parameter in (0, 1]; the range finder uses k + ceil(k/eps) + 1 columns.
    n_power_iter : int, default=4
        Power iterations of the range finder (0: seed 000's plain Lemma 4 construction).
        They sharpen the subspace on data with a slowly decaying spectrum (sparse text):
        see ``docs/benchmarks.md``, section "Quality out of the box".
    random_state : None, int or numpy.random.Generator, default=None
        Source of the Gaussian test matrix.

    Attributes
    ----------
    components_ : numpy.ndarray of shape (n_components_, n_features_in_)
        Z^T, orthonormal rows, in the dtype of the fitted input.
    n_components_ : int
        k.
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import numpy as np
    >>> from streamkm.sketch import ApproxSVD
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 30)) @ rng.normal(size=(30, 30))
    >>> svd = ApproxSVD(3, random_state=0).fit(X)
    >>> svd.transform(X).shape
    (200, 3)
    >>> bool(np.allclose(svd.components_ @ svd.components_.T, np.eye(3)))
    True
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "eps": [Interval(Real, 0, 1, closed="right")],
        "random_state": RANDOM_STATE_CONSTRAINT,
        "n_power_iter": [Interval(Integral, 0, None, closed="left")],
    }

    components_: np.ndarray

    def __init__(self, n_components: int, eps: float = 0.5, random_state: Any = None,
                 n_power_iter: int = 4) -> None:
        self.n_components = n_components
        self.eps = eps
        self.random_state = random_state
        self.n_power_iter = n_power_iter

    def _fit(self, x: SketchInput) -> None:
        k = int(self.n_components)
        z = approximate_right_singular_vectors(
            x, k, float(self.eps), check_random_state(self.random_state),
            int(self.n_power_iter),
        )
        self.components_ = np.ascontiguousarray(z.T, dtype=x.dtype)
        self.n_components_ = k

    def _transform(self, x: SketchInput) -> np.ndarray:
        return right_multiply(x, self.components_.astype(x.dtype, copy=False).T)

    def _fitted_meta(self) -> dict[str, Any]:
        return {"dtype": self.components_.dtype.name}

    def _fitted_arrays(self) -> dict[str, np.ndarray]:
        return {"components": self.components_}

    def _restore_fitted(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        dtype = float_dtype_from_name(meta.get("dtype"))
        self.components_ = require_array(
            arrays, "components", (self.n_components_, self.n_features_in_), (dtype,)
        )
