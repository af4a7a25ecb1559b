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

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    """Import a public name's module on first access and cache the name here;
    ``KERNELS`` is the names of the kernels registered at that moment."""
    if name == "KERNELS":
        from streamkm.kernels._registry import kernel_names as names

        return names()
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC) | {"KERNELS"})
