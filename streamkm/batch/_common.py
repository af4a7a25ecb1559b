"""Checks and small helpers shared by the batch estimators."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from streamkm._core.validation import check_int
from streamkm.exceptions import NotFittedError, ParameterError

__all__ = ["check_n_clusters", "check_is_fitted", "row_chunks", "mean_feature_variance"]

# Rows per chunk are chosen so a (rows, cols) temporary holds about this many entries.
_CHUNK_ENTRIES = 1 << 22


def check_n_clusters(n_clusters: Any, n_samples: int | None = None) -> int:
    """``n_clusters`` as an int >= 1 and, when ``n_samples`` is given, <= n_samples."""
    k = check_int(n_clusters, "n_clusters", low=1)
    if n_samples is not None and k > n_samples:
        raise ParameterError(
            f"n_clusters={k!r} is larger than the number of samples n_samples={n_samples!r}"
        )
    return k


def check_is_fitted(estimator: object, attribute: str) -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has the fitted ``attribute``."""
    if not hasattr(estimator, attribute):
        raise NotFittedError(
            f"this {type(estimator).__name__} instance is not fitted yet; call 'fit' first"
        )


def row_chunks(n_rows: int, n_cols: int) -> Iterator[slice]:
    """Slices of consecutive rows such that a (rows, n_cols) temporary stays bounded."""
    step = max(1, _CHUNK_ENTRIES // max(1, n_cols))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def mean_feature_variance(x: np.ndarray) -> float:
    """Mean over features of the per-feature variance (the scale of a k-means tolerance)."""
    return float(np.mean(np.var(x, axis=0, dtype=np.float64)))
