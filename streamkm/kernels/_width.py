"""Resolving ``gamma`` (kernel width) from data, without labels.

``"median"``: the median heuristic of the kernel type (rbf: 1 / median squared pairwise
distance; laplacian: 1 / median L1 distance; polynomial: 1 / n_features) on at most 1000
rows of the initialisation sample.

``"eigengap"``: candidate widths g_j = g_median * 2^j, j = 0..6, are compared on a
subsample (at most 800 rows) of the initialisation sample by the eigengap of the
degree-normalised kernel matrix D^-1/2 K D^-1/2: the width whose k-th and (k+1)-th
eigenvalues are furthest apart (k = n_clusters). Polynomial falls back to ``"median"``.

``"auto"`` (the default): ``"median"`` here; for shift-invariant kernels
:func:`streamkm.kernels.build_kernel` may instead choose the linear, the anchor-graph or the
level-set kernel (:mod:`streamkm.kernels._auto`). The eigengap rule was measured and not
adopted: on blobs and digits it ties the median heuristic, on PenDigits it is worse (ARI
0.600 vs the median's), on moons and circles it does not help (docs/kernels.md), and its
narrower widths blunt drift detection.
Every rule is applied once, on the initialisation sample; the value is kept in the model
state (``gamma_``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm.exceptions import parameter_error
from streamkm.kernels._builtin import GAMMA_RULES
from streamkm.kernels._registry import KernelType, get_kernel_type

__all__ = ["GAMMA_RULES", "eigengap_gamma", "finite_width", "median_heuristic_gamma",
           "resolve_gamma"]

_AUTO_SAMPLE = 800
_AUTO_STEPS = tuple(range(0, 7))


def finite_width(gamma: float, dtype: np.dtype) -> float:
    """``gamma`` capped at 1 / (smallest normal number of ``dtype``).

    A width rule divides by a typical (squared) distance; for rows that differ only by
    subnormal amounts that distance is (nearly) 0 and 1 / distance overflows the data's
    dtype (float32 [[1e-45], [0]] gave gamma ~5e89 = inf in float32, and inf * 0 = NaN
    kernel values). With the cap gamma is finite in the dtype, so every kernel value and
    distance is finite for finite input.
    """
    dt = np.dtype(dtype) if np.dtype(dtype).kind == "f" else np.dtype(np.float64)
    return float(min(gamma, 1.0 / float(np.finfo(dt).tiny)))


def median_heuristic_gamma(x: np.ndarray, kernel: str, rng: np.random.Generator) -> float:
    """The ``"median"`` rule of ``kernel`` on the sample ``x`` (1.0 if all rows are equal),
    finite in x's dtype (:func:`finite_width`)."""
    return finite_width(float(get_kernel_type(kernel).default_gamma(x, rng)), x.dtype)


def _eigengap(kernel_matrix: np.ndarray, n_clusters: int) -> float:
    deg = kernel_matrix.sum(axis=1)
    inv = 1.0 / np.sqrt(np.maximum(deg, np.finfo(np.float64).tiny))
    lam = np.linalg.eigvalsh(kernel_matrix * inv[:, None] * inv[None, :])[::-1]
    return float(lam[n_clusters - 1] - lam[n_clusters]) if lam.size > n_clusters else 0.0


def eigengap_gamma(kind: KernelType, x: np.ndarray, rng: np.random.Generator,
               n_clusters: int) -> float:
    """The ``"eigengap"`` rule (module docstring)."""
    from streamkm.kernels._spec import KernelSpec

    base = finite_width(float(kind.default_gamma(x, rng)), x.dtype)
    if not kind.shift_invariant or x.shape[0] <= n_clusters + 1:
        return base
    if x.shape[0] > _AUTO_SAMPLE:
        x = x[np.sort(rng.choice(x.shape[0], _AUTO_SAMPLE, replace=False))]
    x64 = np.ascontiguousarray(x, dtype=np.float64)
    best, best_gap = base, -np.inf
    for step in _AUTO_STEPS:
        gamma = finite_width(base * 2.0 ** step, x.dtype)
        gap = _eigengap(KernelSpec(kind.name, gamma).block(x64, x64), n_clusters)
        if gap > best_gap:
            best, best_gap = gamma, gap
    return best


def resolve_gamma(kind: KernelType, gamma: Any, sample: np.ndarray,
                  rng: np.random.Generator, n_clusters: int) -> float:
    """A positive gamma from a float, a rule in ``GAMMA_RULES`` or None (= ``"auto"``)."""
    if gamma is None or isinstance(gamma, str):
        rule = "auto" if gamma is None else gamma
        if rule in ("auto", "median"):
            return median_heuristic_gamma(sample, kind.name, rng)
        if rule == "eigengap":
            return eigengap_gamma(kind, sample, rng, n_clusters)
        raise parameter_error(f"gamma must be a positive number or one of {GAMMA_RULES}, got {gamma!r}")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.integer, np.floating)) \
            or not np.isfinite(gamma) or gamma <= 0:
        raise parameter_error(f"gamma must be a positive number or one of {GAMMA_RULES}, got {gamma!r}")
    return float(gamma)
