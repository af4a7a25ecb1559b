"""Linear kernel <x, y>: explicit features, the engine's fast path."""

from __future__ import annotations

from streamkm.kernels._common import InnerProductKernel
from streamkm.kernels._registry import register

__all__ = ["Linear"]


@register
class Linear(InnerProductKernel):
    name = "linear"
