"""Online clustering estimators.

The names below are imported on first use (module ``__getattr__``), so that the estimator's
parameter table (:mod:`streamkm.cluster._params`) is read without loading scikit-learn.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers and IDEs; at run time see __getattr__
    from streamkm.cluster._minibatch_kernel_kmeans import MiniBatchKernelKMeans
    from streamkm.model import StepReport

#: Where each public name lives (imported by :func:`__getattr__` on first access).
_PUBLIC: dict[str, str] = {
    "MiniBatchKernelKMeans": "streamkm.cluster._minibatch_kernel_kmeans",
    "StepReport": "streamkm.model",
}

__all__ = ["MiniBatchKernelKMeans", "StepReport"]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first access and cache the name here."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
