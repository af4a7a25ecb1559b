"""Approximate top-k right singular vectors and the SVD sketch (Lemma 4, Theorem 13 of Boutsidis et al.)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from streamkm._validation import check_float, check_int, check_random_state
from streamkm.exceptions import ValidationError
from streamkm.sketch._base import BaseSketcher, float_dtype_from_name, require_array
from streamkm.sketch._sparse import SketchInput, left_multiply_transposed, right_multiply

__all__ = ["ApproxSVD", "approximate_right_singular_vectors", "range_finder_width"]


def range_finder_width(n_components: int, eps: float) -> int:
    """Number of Gaussian test columns ``k + ceil(k / eps) + 1`` of Lemma 4."""
    return n_components + math.ceil(n_components / eps) + 1


def flip_signs_by_largest_entry(vectors: np.ndarray) -> np.ndarray:
    """Make the largest-magnitude entry of each column positive (a deterministic sign)."""
    rows = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[rows, np.arange(vectors.shape[1])])
    signs[signs == 0] = 1.0
    return vectors * signs


def approximate_right_singular_vectors(
    x: SketchInput, n_components: int, eps: float, rng: np.random.Generator
) -> np.ndarray:
    """Orthonormal Z (n_features, k) spanning approximately the top-k right singular vectors.

    The construction of Lemma 4: Y = X Omega with ``k + ceil(k/eps) + 1`` i.i.d. N(0, 1)
    columns, Q = orth(Y), Z = the top-k right singular vectors of Q^T X. Then
    E||X - X Z Z^T||_F^2 <= (1 + eps) ||X - X_k||_F^2. Products with X run in X's dtype
    (sparse X stays sparse); the QR and the small SVD run in float64. Each column's
    largest-magnitude entry is made positive, so Z does not depend on LAPACK's sign choice.

    Parameters
    ----------
    x : numpy.ndarray or scipy CSR matrix of shape (n_samples, n_features)
        Checked input (see :func:`streamkm.sketch._sparse.check_sketch_input`).
    n_components : int
        k, at most min(n_samples, n_features).
    eps : float
        Accuracy parameter in (0, 1].
    rng : numpy.random.Generator
        Source of the Gaussian test matrix.

    Returns
    -------
    numpy.ndarray of shape (n_features, n_components), float64
    """
    n_samples, n_features = x.shape
    if n_components > min(n_samples, n_features):
        raise ValidationError(
            f"n_components={n_components!r} exceeds min(n_samples, n_features) = "
            f"{min(n_samples, n_features)} of the input of shape {x.shape!r}"
        )
    width = range_finder_width(n_components, eps)
    omega = rng.standard_normal((n_features, width)).astype(x.dtype)
    y = right_multiply(x, omega).astype(np.float64)
    q, _ = np.linalg.qr(y)
    b = left_multiply_transposed(x, q.astype(x.dtype)).astype(np.float64)
    _, _, vt = np.linalg.svd(b, full_matrices=False)
    return np.ascontiguousarray(flip_signs_by_largest_entry(vt[:n_components].T))


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
    """

    _PARAM_NAMES = ("n_components", "eps", "random_state")

    components_: np.ndarray

    def __init__(self, n_components: int, eps: float = 0.5, random_state: Any = None) -> None:
        self.n_components = n_components
        self.eps = eps
        self.random_state = random_state

    def _validate_params(self, n_features: int) -> None:
        check_int(self.n_components, "n_components", low=1)
        check_float(self.eps, "eps", low=0.0, high=1.0, low_inclusive=False)
        check_random_state(self.random_state)

    def _fit(self, x: SketchInput) -> None:
        k = int(self.n_components)
        z = approximate_right_singular_vectors(
            x, k, float(self.eps), check_random_state(self.random_state)
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
