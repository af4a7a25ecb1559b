"""The kernels streamkm ships, known by name before any of them is imported.

Each built-in kernel is a module of this package (numba and scipy behind it); the registry
(:mod:`streamkm.kernels._registry`) imports one when its kernel is first used. Their names
and ``kernel_params`` options are listed here, in plain Python, so that a configuration is
checked without loading the kernels (``streamkm config check``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["BUILTIN_KERNELS", "GAMMA_RULES", "OPTION_DEFAULTS"]

#: The rules ``gamma`` may name instead of a number (:func:`streamkm.kernels.resolve_gamma`).
GAMMA_RULES = ("auto", "median", "eigengap")

#: Built-in kernel name -> the module that registers it, in registration order.
BUILTIN_KERNELS: dict[str, str] = {
    name: f"streamkm.kernels.{name}"
    for name in ("anchor", "cosine", "heat", "knn", "laplacian", "level_set", "linear",
                 "polynomial", "rbf")
}

#: The ``kernel_params`` options of each built-in kernel with their defaults (the kernel's
#: ``option_defaults``); a kernel not listed has none.
OPTION_DEFAULTS: dict[str, dict[str, Any]] = {
    "anchor": {"n_anchors": 1500, "n_nearest": 10, "t": "auto", "n_components": 50},
    "heat": {"n_neighbors": 30, "t": "auto", "n_components": 50, "dense_limit": 2000,
             "weights": "binary"},
    "knn": {"n_neighbors": 30},
    "level_set": {"n_neighbors": 20, "graph_neighbors": 10, "n_nearest": 10,
                  "min_keep": 0.75, "min_size": 0.05, "n_rows": 5000, "relative": 0.5},
}
