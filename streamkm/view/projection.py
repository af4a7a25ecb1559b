"""Two coordinates per sampled row, for a scatter plot of the clusters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PlaneProjection", "project_to_plane"]


@dataclass(frozen=True)
class PlaneProjection:
    """Rows placed in a plane.

    Attributes
    ----------
    coords : ndarray of shape (n, 2), float64
        The coordinates.
    axes : tuple of str
        What each coordinate is (``"x0"``, ``"PC1 (62% of variance)"``, ...).
    method : str
        ``"raw"`` (the records' own coordinates), ``"pca"`` or ``"none"`` (no rows).
    """

    coords: np.ndarray
    axes: tuple[str, str]
    method: str


def project_to_plane(rows: np.ndarray, *, prefix: str = "") -> PlaneProjection:
    """Place ``rows`` in a plane: their own coordinates when d <= 2, else the first two
    principal components of the rows.

    The sign of each component is fixed (largest loading positive) so that successive
    projections of a slowly changing sample do not mirror the picture.

    Parameters
    ----------
    rows : ndarray of shape (n, d)
    prefix : str, default=""
        Prepended to the axis names (e.g. ``"random projection, "``).

    Returns
    -------
    PlaneProjection

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(100, 5)) * np.array([10.0, 3.0, 0.1, 0.1, 0.1])
    >>> plane = project_to_plane(x)
    >>> plane.method, plane.coords.shape, plane.axes[0].startswith("PC1")
    ('pca', (100, 2), True)
    """
    x = np.asarray(rows, dtype=np.float64)
    n = x.shape[0]
    if n == 0:
        return PlaneProjection(np.zeros((0, 2)), ("x0", "x1"), "none")
    d = x.shape[1] if x.ndim == 2 else 0
    if d <= 2:
        coords = np.zeros((n, 2))
        coords[:, :d] = x[:, :d]
        return PlaneProjection(coords, (f"{prefix}x0", f"{prefix}x1"), "raw")
    centered = x - x.mean(axis=0)
    _, s, vt = np.linalg.svd(centered, full_matrices=False)
    components = vt[:2]
    for i in range(components.shape[0]):
        if components[i, np.argmax(np.abs(components[i]))] < 0:
            components[i] = -components[i]
    coords = np.zeros((n, 2))
    coords[:, :components.shape[0]] = centered @ components.T
    total = float(np.sum(s ** 2))
    shares = [float(s[i] ** 2) / total if total > 0 and i < len(s) else 0.0 for i in range(2)]
    axes = (f"{prefix}PC1 ({shares[0]:.0%} of variance)",
            f"{prefix}PC2 ({shares[1]:.0%} of variance)")
    return PlaneProjection(coords, axes, "pca")
