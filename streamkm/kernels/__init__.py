"""Kernels K(x, y) = <phi(x), phi(y)>: a registry of kernel types and their resolved specs.

Each kernel is one module registering a :class:`KernelType` (``rbf``, ``laplacian``,
``polynomial``, ``cosine``, ``linear``, seed 002's graph kernels ``knn`` and ``heat``, the
anchor-graph heat kernel ``anchor`` and the density level-set kernel ``level_set``);
:class:`KernelSpec` holds one with resolved parameters and computes kernel blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from streamkm.kernels import (  # noqa: F401
    anchor, cosine, heat, knn, laplacian, level_set, linear, polynomial, rbf,
)
from streamkm.kernels._auto import choose_auto_kernel
from streamkm.kernels._decision import AutoDecision
from streamkm.kernels._registry import KernelType, get_kernel_type, kernel_names, register
from streamkm.kernels._spec import KernelSpec
from streamkm.kernels._width import GAMMA_RULES, median_heuristic_gamma, resolve_gamma

__all__ = [
    "GAMMA_RULES", "KERNELS", "KernelSpec", "KernelType", "build_kernel", "get_kernel_type",
    "kernel_names", "median_heuristic_gamma", "pairwise_kernel", "register", "resolve_gamma",
]

KERNELS = kernel_names()


def build_kernel(
    name: str, gamma: Any, *, sample: np.ndarray, rng: np.random.Generator,
    n_clusters: int, degree: int = 3, coef0: float = 1.0,
    kernel_params: dict[str, Any] | None = None, landmarks: np.ndarray | None = None,
    allow_graph: bool = False,
    on_decision: Callable[[AutoDecision], None] | None = None,
) -> KernelSpec:
    """A ready :class:`KernelSpec`: gamma resolved on ``sample``, fitted on ``landmarks``.

    ``gamma``: a positive float, ``"auto"``, ``"median"``, ``"eigengap"`` or None
    (= ``"auto"``), used by kernels with the ``needs_gamma`` trait (see
    :func:`resolve_gamma`). Fitted (graph) kernels are fitted on ``landmarks`` (default:
    ``sample``). With ``allow_graph``, ``"auto"`` on a shift-invariant kernel may resolve
    to the anchor-graph or the level-set kernel fitted on ``landmarks`` (:func:`streamkm.kernels._auto.choose_auto_kernel`); without it ``"auto"``
    is the median rule. ``on_decision`` is called with ``"auto"``'s
    :class:`~streamkm.kernels._decision.AutoDecision` when one was made.
    """
    kind = get_kernel_type(name)
    resolved = None
    if kind.needs_gamma:
        resolved = resolve_gamma(kind, gamma, sample, rng, n_clusters)
        if gamma in (None, "auto") and kind.shift_invariant and not kernel_params:
            return choose_auto_kernel(kind, resolved, sample, n_clusters,
                                      allow_graph=allow_graph, landmarks=landmarks,
                                      on_decision=on_decision)
    spec = KernelSpec(name, resolved, degree, float(coef0), dict(kernel_params or {}))
    return spec.fit(sample if landmarks is None else landmarks, n_clusters)


def pairwise_kernel(
    x: np.ndarray,
    y: np.ndarray | None = None,
    kernel: str = "rbf",
    *,
    gamma: float | None = None,
    degree: int = 3,
    coef0: float = 1.0,
) -> np.ndarray:
    """K(x, y) for 2-D float arrays (y defaults to x) of an unfitted kernel; gamma must be
    given where used."""
    xa = np.ascontiguousarray(x)
    if xa.dtype not in (np.float32, np.float64):
        xa = xa.astype(np.float64)
    ya = xa if y is None else np.ascontiguousarray(y, dtype=xa.dtype)
    return KernelSpec(kernel, gamma, degree, coef0).block(xa, ya)
