"""Online clustering estimators.

The names below are imported on first use (module ``__getattr__``), so that the estimator's
parameter table (:mod:`streamkm.cluster._params`) is read without loading scikit-learn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamkm._core.lazy_names import lazy_names

if TYPE_CHECKING:  # for type checkers and IDEs; at run time see __getattr__
    from streamkm.cluster._minibatch_kernel_kmeans import MiniBatchKernelKMeans
    from streamkm.model import StepReport

#: Where each public name lives (imported by :func:`__getattr__` on first access).
_PUBLIC: dict[str, str] = {
    "MiniBatchKernelKMeans": "streamkm.cluster._minibatch_kernel_kmeans",
    "StepReport": "streamkm.model",
}

__all__ = ["MiniBatchKernelKMeans", "StepReport"]


__getattr__, __dir__ = lazy_names(__name__, globals(), _PUBLIC)
