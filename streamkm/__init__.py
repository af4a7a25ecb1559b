"""streamkm: streaming kernel k-means.

Sliding-window mini-batch kernel k-means (``MiniBatchKernelKMeans``) usable embedded
(``partial_fit`` / ``predict``) or as a long-running service (``streamkm run``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from streamkm._threads import get_num_threads, num_threads, set_num_threads
from streamkm._version import __version__
from streamkm.cluster import MiniBatchKernelKMeans, StepReport
from streamkm.drift import kernel_bisect, rscd_pairs, rtmm_pairs
from streamkm.sketch import SketchedKernelKMeans
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

__all__ = [
    "__version__",
    "datasets",
    "get_num_threads",
    "num_threads",
    "set_num_threads",
    "MiniBatchKernelKMeans",
    "SketchedKernelKMeans",
    "StepReport",
    "kernel_bisect",
    "rscd_pairs",
    "rtmm_pairs",
    "CheckpointError",
    "ConfigError",
    "DecodeError",
    "InputTypeError",
    "NotFittedError",
    "ParameterError",
    "StateError",
    "StreamkmError",
    "ValidationError",
]


def __getattr__(name: str) -> ModuleType:
    """Submodules imported on first use (``streamkm.datasets``), so ``import streamkm``
    stays as fast as without them."""
    if name == "datasets":
        return importlib.import_module("streamkm.datasets")
    raise AttributeError(f"module 'streamkm' has no attribute {name!r}")
