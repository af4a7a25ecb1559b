"""The package's one test for scipy sparse input (no scipy import needed to ask)."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["is_sparse"]


def is_sparse(x: Any) -> bool:
    """True if ``x`` is a scipy sparse matrix or array.

    scipy is not imported here: if ``scipy.sparse`` was never imported, no object can be one
    of its matrices, so dense-only users do not need scipy loaded.
    """
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and bool(sparse.issparse(x))
