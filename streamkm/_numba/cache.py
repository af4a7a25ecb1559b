"""Whether numba's on-disk cache holds the compiled kernels of this install.

Every kernel is ``@njit(cache=True)``: the first process that calls it compiles it and
writes the machine code next to the module (``__pycache__``, or numba's user-wide cache
folder when that one is read-only); later processes load it. :func:`cold_kernels` names the
kernels without a valid cache entry (none written yet, or written for another version of
the source); :func:`first_compile_pending` is true when none has one, as after an install
or an upgrade (every source file is new then), so a command can say that it compiles.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

__all__ = ["cold_kernels", "first_compile_pending"]


def _cached_dispatchers() -> dict[str, Any]:
    import streamkm._numba as package

    found: dict[str, Any] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name == "cache":
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, obj in vars(module).items():
            cache = getattr(obj, "_cache", None)
            if getattr(obj, "__module__", None) == module.__name__ and hasattr(
                    cache, "_cache_file"):
                found[f"{info.name}.{name}"] = obj
    return found


def cold_kernels() -> list[str] | None:
    """The kernels (``module.function``) the next call compiles instead of loading from
    numba's cache; ``None`` when this numba's cache cannot be read this way."""
    cold = []
    try:
        for name, dispatcher in sorted(_cached_dispatchers().items()):
            if not dispatcher._cache._cache_file._load_index():  # {}: none, or stale
                cold.append(name)
    except (AttributeError, OSError, EOFError, ValueError):
        return None
    return cold


def first_compile_pending() -> bool:
    """Whether no kernel of this install has a valid cache entry (the first run compiles
    them all); ``False`` when that cannot be told."""
    cold = cold_kernels()
    return bool(cold) and len(cold) == len(_cached_dispatchers())
