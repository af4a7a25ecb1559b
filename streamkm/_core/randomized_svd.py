"""The one randomized SVD of streamkm (used by ``sketch.ApproxSVD`` and ``batch``).

Halko, Martinsson & Tropp (2011): the range of X is captured by Y = X Omega with
``width`` Gaussian columns (k plus oversampling), refined by ``n_power_iter`` power
iterations (each re-orthonormalised by QR, so small singular values do not drown in
rounding), and the small projected matrix Q^T X is decomposed exactly. Products with X run
in X's dtype and never densify a sparse X (CSR stays CSR); the QR factorisations and the
small SVD run in float64. Signs are fixed (largest-magnitude entry of each right singular
vector positive), so the result does not depend on LAPACK's sign choice.
"""

from __future__ import annotations

import numpy as np

from streamkm._core.sparse_input import SketchInput, left_multiply_transposed, right_multiply
from streamkm.exceptions import ValidationError

__all__ = ["flip_signs", "randomized_svd", "top_right_singular_vectors"]


def flip_signs(vt: np.ndarray) -> np.ndarray:
    """Make the largest-magnitude entry of each row positive (a deterministic sign)."""
    cols = np.argmax(np.abs(vt), axis=1)
    signs = np.sign(vt[np.arange(vt.shape[0]), cols])
    signs[signs == 0] = 1.0
    return vt * signs[:, None]


def _orth(y: np.ndarray) -> np.ndarray:
    q, _ = np.linalg.qr(np.asarray(y, dtype=np.float64))
    return q


def randomized_svd(
    x: SketchInput,
    n_components: int,
    *,
    width: int,
    n_power_iter: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Top ``n_components`` singular values and right singular vectors of x (dense or CSR).

    Parameters
    ----------
    x : numpy.ndarray or scipy CSR matrix, shape (n_samples, n_features)
    n_components : int
        k, at most min(n_samples, n_features).
    width : int
        Gaussian test columns (k + oversampling); capped at min(n_samples, n_features).
    n_power_iter : int
        Power iterations (0: the plain range finder of seed 000's Lemma 4).
    rng : numpy.random.Generator

    Returns
    -------
    singular_values : ndarray (k,), float64, descending
    vt : ndarray (k, n_features), float64, orthonormal rows, signs fixed
    """
    n_samples, n_features = x.shape
    if n_components > min(n_samples, n_features):
        raise ValidationError(
            f"n_components={n_components!r} exceeds min(n_samples, n_features) = "
            f"{min(n_samples, n_features)} of the input of shape {x.shape!r}"
        )
    width = max(n_components, min(int(width), n_samples, n_features))
    dtype = x.dtype
    omega = rng.standard_normal((n_features, width)).astype(dtype)
    q = _orth(right_multiply(x, omega))
    for _ in range(int(n_power_iter)):
        z = _orth(left_multiply_transposed(x, q.astype(dtype)).T)
        q = _orth(right_multiply(x, z.astype(dtype)))
    b = left_multiply_transposed(x, q.astype(dtype)).astype(np.float64)
    _, s, vt = np.linalg.svd(b, full_matrices=False)
    return s[:n_components], flip_signs(vt[:n_components])


def top_right_singular_vectors(
    a: np.ndarray,
    k: int,
    *,
    randomized: bool,
    rng: np.random.Generator,
    n_oversamples: int = 10,
    n_power_iter: int = 4,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k singular values and right singular vectors of ``a``: exact (LAPACK) or by
    :func:`randomized_svd` with k + ``n_oversamples`` columns. Computed in float64."""
    if not randomized:
        _, s, vt = np.linalg.svd(np.asarray(a, dtype=np.float64), full_matrices=False)
        return s[:k], flip_signs(vt[:k])
    return randomized_svd(np.asarray(a, dtype=np.float64), k, width=k + n_oversamples,
                          n_power_iter=n_power_iter, rng=rng)
