"""Kernels K(x, y) = <phi(x), phi(y)>: a registry of kernel types and their resolved specs.

Each kernel is one module registering a :class:`KernelType` (``rbf``, ``laplacian``,
``polynomial``, ``cosine``, ``linear``, seed 002's graph kernels ``knn`` and ``heat``, the
anchor-graph heat kernel ``anchor`` and the density level-set kernel ``level_set``);
:class:`KernelSpec` holds one with resolved parameters and computes kernel blocks.

The names below are imported on first use (module ``__getattr__``) and a built-in kernel's
module when the kernel is first used (:func:`get_kernel_type`), so that what only needs the
kernels' names and options (checking a configuration) loads neither numba nor scipy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamkm._core.lazy_names import lazy_names

if TYPE_CHECKING:  # for type checkers and IDEs; at run time see __getattr__
    from streamkm.kernels._build import build_kernel, pairwise_kernel
    from streamkm.kernels._registry import KernelType, get_kernel_type, kernel_names, register
    from streamkm.kernels._spec import KernelSpec
    from streamkm.kernels._width import GAMMA_RULES, median_heuristic_gamma, resolve_gamma

#: Where each public name lives (imported by :func:`__getattr__` on first access).
_PUBLIC: dict[str, str] = {
    "GAMMA_RULES": "streamkm.kernels._width",
    "KernelSpec": "streamkm.kernels._spec",
    "KernelType": "streamkm.kernels._registry",
    "build_kernel": "streamkm.kernels._build",
    "get_kernel_type": "streamkm.kernels._registry",
    "kernel_names": "streamkm.kernels._registry",
    "median_heuristic_gamma": "streamkm.kernels._width",
    "pairwise_kernel": "streamkm.kernels._build",
    "register": "streamkm.kernels._registry",
    "resolve_gamma": "streamkm.kernels._width",
}

__all__ = ["GAMMA_RULES", "KERNELS", "KernelSpec", "KernelType", "build_kernel",
    "get_kernel_type", "kernel_names", "median_heuristic_gamma", "pairwise_kernel",
    "register", "resolve_gamma"]


def _registered_kernel_names() -> tuple[str, ...]:
    """``KERNELS``: the names of the kernels registered at the moment it is read."""
    from streamkm.kernels._registry import kernel_names

    return kernel_names()


__getattr__, __dir__ = lazy_names(__name__, globals(), _PUBLIC,
                                  computed={"KERNELS": _registered_kernel_names})
