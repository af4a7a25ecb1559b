"""Checks of what a step of :class:`~streamkm.cluster.MiniBatchKernelKMeans` is given
besides X: the raw rows behind sketched features and the rows' multiplicities."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm._core.raw_rows import RawRows
from streamkm.exceptions import ValidationError

__all__ = ["check_raw", "check_sample_weight"]


def check_raw(model: Any, raw: RawRows | None, n: int, *, first: bool) -> None:
    """Refuse ``raw`` rows that do not fit ``model`` and a batch of ``n`` rows; the first
    step records the raw feature count (``model._raw_n_features``)."""
    keeps_raw = raw is not None if first else model._centers.raw is not None
    if keeps_raw and raw is None:
        raise ValidationError(
            "this model keeps raw support rows (it was started with raw=...): "
            "pass raw= with every batch"
        )
    if not keeps_raw and raw is not None:
        raise ValidationError("this model was started without raw rows: raw= is not accepted")
    if raw is not None:
        if getattr(raw, "ndim", 2) != 2 or raw.shape[0] != n:
            raise ValidationError(
                f"raw must have one row per row of X ({n}), got shape {raw.shape!r}"
            )
        if first:
            model._raw_n_features = int(raw.shape[1])
        elif raw.shape[1] != model._raw_n_features:
            raise ValidationError(
                f"raw has {raw.shape[1]} features, but the model was started with "
                f"{model._raw_n_features}"
            )


def check_sample_weight(sample_weight: Any, n: int) -> np.ndarray:
    """Positive integer multiplicities as float64, one per row."""
    w = np.asarray(sample_weight)
    if w.ndim != 1 or w.shape[0] != n:
        raise ValidationError(
            f"sample_weight must have shape ({n},), got {w.shape!r}"
        )
    if w.dtype.kind not in "iuf" or (w.dtype.kind == "f" and not np.all(np.isfinite(w))):
        raise ValidationError(f"sample_weight must be numeric and finite, got dtype {w.dtype}")
    if n and (w.min() < 1 or np.any(w != np.rint(w)) or w.max() > 2**52):
        bad = w[(w < 1) | (w != np.rint(w)) | (w > 2**52)][0]
        raise ValidationError(
            f"sample_weight must hold integers in [1, 2**52], got {bad!r}"
        )
    return w.astype(np.float64)
