"""Top singular vectors of a dense matrix, exactly or by a randomized range finder."""

from __future__ import annotations

import numpy as np

__all__ = ["top_right_singular_vectors"]


def _flip_signs(vt: np.ndarray) -> np.ndarray:
    """Make the largest-magnitude entry of each row positive (a deterministic sign)."""
    cols = np.argmax(np.abs(vt), axis=1)
    signs = np.sign(vt[np.arange(vt.shape[0]), cols])
    signs[signs == 0] = 1.0
    return vt * signs[:, None]


def top_right_singular_vectors(
    a: np.ndarray,
    k: int,
    *,
    randomized: bool,
    rng: np.random.Generator,
    n_oversamples: int = 10,
    n_power_iter: int = 4,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k singular values and right singular vectors of ``a``.

    With ``randomized`` the range of ``a`` is captured by ``a`` times k + n_oversamples
    Gaussian columns, refined by ``n_power_iter`` QR-stabilised power iterations
    (Halko, Martinsson & Tropp, 2011), and the small projected matrix is decomposed exactly.
    Computation is in float64.

    Returns
    -------
    singular_values : numpy.ndarray of shape (k,), descending
    vt : numpy.ndarray of shape (k, n_features), orthonormal rows, signs fixed so that each
        row's largest-magnitude entry is positive
    """
    a64 = np.asarray(a, dtype=np.float64)
    if not randomized:
        _, s, vt = np.linalg.svd(a64, full_matrices=False)
        return s[:k], _flip_signs(vt[:k])
    width = min(k + n_oversamples, min(a64.shape))
    q, _ = np.linalg.qr(a64 @ rng.standard_normal((a64.shape[1], width)))
    for _ in range(n_power_iter):
        z, _ = np.linalg.qr(a64.T @ q)
        q, _ = np.linalg.qr(a64 @ z)
    _, s, vt = np.linalg.svd(q.T @ a64, full_matrices=False)
    return s[:k], _flip_signs(vt[:k])
