"""Building a ready kernel: :func:`build_kernel` (gamma resolved, fitted, or chosen by
``gamma="auto"``) and :func:`pairwise_kernel` (a kernel block of an unfitted kernel)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from streamkm.kernels._auto import choose_auto_kernel
from streamkm.kernels._decision import AutoDecision
from streamkm.kernels._registry import get_kernel_type
from streamkm.kernels._spec import KernelSpec
from streamkm.kernels._width import resolve_gamma

__all__ = ["build_kernel", "pairwise_kernel"]


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
    to the linear kernel, or the anchor-graph or the level-set kernel fitted on ``landmarks`` (:func:`streamkm.kernels._auto.choose_auto_kernel`); without it ``"auto"``
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
