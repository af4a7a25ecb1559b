"""streamkm: streaming kernel k-means.

Sliding-window mini-batch kernel k-means (``MiniBatchKernelKMeans``) usable embedded
(``partial_fit`` / ``predict``) or as a long-running service (``streamkm run``).

The public names below are imported on first use (module ``__getattr__``), so that
``import streamkm`` and the ``streamkm`` command stay fast: scikit-learn, scipy and numba
are loaded when an estimator (or a function that needs them) is first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from streamkm._core.lazy_names import lazy_names

from streamkm._version import __version__

if TYPE_CHECKING:  # for type checkers and IDEs; at run time see __getattr__
    from streamkm._core.threads import get_num_threads, num_threads, set_num_threads
    from streamkm.cluster import MiniBatchKernelKMeans, StepReport
    from streamkm.drift import kernel_bisect, rscd_pairs, rtmm_pairs
    from streamkm.exceptions import (
        CheckpointError,
        ConfigError,
        DecodeError,
        InputTypeError,
        NotFittedError,
        ParameterError,
        StateError,
        StreamkmError,
        ValidationError,
    )
    from streamkm.sketch import SketchedKernelKMeans

#: Where each public name lives (imported by :func:`__getattr__` on first access).
_PUBLIC: dict[str, str] = {
    "get_num_threads": "streamkm._core.threads",
    "num_threads": "streamkm._core.threads",
    "set_num_threads": "streamkm._core.threads",
    "MiniBatchKernelKMeans": "streamkm.cluster",
    "SketchedKernelKMeans": "streamkm.sketch",
    "StepReport": "streamkm.cluster",
    "kernel_bisect": "streamkm.drift",
    "rscd_pairs": "streamkm.drift",
    "rtmm_pairs": "streamkm.drift",
    "CheckpointError": "streamkm.exceptions",
    "ConfigError": "streamkm.exceptions",
    "DecodeError": "streamkm.exceptions",
    "InputTypeError": "streamkm.exceptions",
    "NotFittedError": "streamkm.exceptions",
    "ParameterError": "streamkm.exceptions",
    "StateError": "streamkm.exceptions",
    "StreamkmError": "streamkm.exceptions",
    "ValidationError": "streamkm.exceptions",
}

__all__ = ["__version__", "datasets", *_PUBLIC]


def _datasets() -> Any:
    """The ``streamkm.datasets`` submodule, imported on first use like the names above."""
    return importlib.import_module("streamkm.datasets")


__getattr__, __dir__ = lazy_names("streamkm", globals(), _PUBLIC, computed={"datasets": _datasets})
