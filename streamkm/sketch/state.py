"""Rebuild any sketcher from its ``get_state`` output, by the type recorded in the meta."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm.exceptions import StateError
from streamkm.sketch._base import BaseSketcher
from streamkm.sketch.leverage import LeverageScoreSelector
from streamkm.sketch.projection import RandomProjection
from streamkm.sketch.svd import ApproxSVD

__all__ = ["SKETCHER_TYPES", "sketcher_from_state"]

#: Sketcher classes by the name ``get_state`` records under ``meta["sketcher"]``.
SKETCHER_TYPES: dict[str, type[BaseSketcher]] = {
    cls.__name__: cls for cls in (RandomProjection, ApproxSVD, LeverageScoreSelector)
}


def sketcher_from_state(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> BaseSketcher:
    """The sketcher saved by ``get_state``, whatever its type.

    Raises
    ------
    StateError
        Unknown sketcher type or a malformed state.
    """
    name = meta.get("sketcher") if isinstance(meta, dict) else None
    if name not in SKETCHER_TYPES:
        raise StateError(f"unknown sketcher type {name!r} in state; known: {sorted(SKETCHER_TYPES)}")
    return SKETCHER_TYPES[name].from_state(arrays, meta)
