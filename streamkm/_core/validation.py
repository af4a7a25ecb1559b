"""Input and parameter checks shared by the estimators."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from streamkm._core.scalar_checks import check_choice, check_float, check_int
from streamkm.exceptions import ValidationError, parameter_error

__all__ = ["check_array", "check_finite", "check_random_state", "check_int", "check_float", "check_choice",
           "check_float_dtype"]


def check_array(x: Any, *, name: str = "X", n_features: int | None = None) -> np.ndarray:
    """Return ``x`` as a C-contiguous 2-D float32 or float64 array with finite values.

    float32 input stays float32, everything else numeric becomes float64. Raises
    :class:`ValidationError` quoting the problem: not 2-D, not numeric, empty, NaN/Inf
    (with the first offending position), or a feature count other than ``n_features``.
    """
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{name} could not be converted to an array: {exc}") from exc
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_
    ):
        raise ValidationError(f"{name} must be numeric, got dtype {arr.dtype!s}")
    if np.iscomplexobj(arr):
        raise ValidationError(f"{name} must be real, got dtype {arr.dtype!s}")
    if arr.ndim != 2:
        raise ValidationError(
            f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape!r}"
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValidationError(f"{name} must be non-empty, got shape {arr.shape!r}")
    dtype = np.float32 if arr.dtype == np.float32 else np.float64
    arr = np.ascontiguousarray(arr, dtype=dtype)
    check_finite(arr, name)
    if n_features is not None and arr.shape[1] != n_features:
        raise ValidationError(
            f"{name} has {arr.shape[1]} features, but the model was fitted with "
            f"{n_features} features"
        )
    return arr


def check_finite(arr: np.ndarray, name: str = "X") -> None:
    """Raise :class:`ValidationError` naming the first NaN or infinite entry of 2-D ``arr``."""
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValidationError(
            f"{name} must be finite, got {float(arr[bad[0], bad[1]])!r} at row "
            f"{int(bad[0])}, column {int(bad[1])} (NaN and infinity are not accepted)"
        )


def check_random_state(seed: Any) -> np.random.Generator:
    """A numpy Generator from None, an int seed or a Generator."""
    if seed is None or isinstance(seed, (numbers.Integral, np.integer)):
        if seed is not None and int(seed) < 0:
            raise parameter_error(f"random_state must be a non-negative int, got {seed!r}")
        return np.random.default_rng(None if seed is None else int(seed))
    if isinstance(seed, np.random.Generator):
        return seed
    raise parameter_error(
        f"random_state must be None, an int or a numpy Generator, got {seed!r}"
    )


def check_float_dtype(value: Any, name: str = "dtype") -> np.dtype:
    """``value`` as float32 or float64 :class:`numpy.dtype`, else a ParameterError naming it."""
    try:
        dtype = np.dtype(value)
    except TypeError as exc:
        raise parameter_error(f"{name} must be float32 or float64, got {value!r}") from exc
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise parameter_error(f"{name} must be float32 or float64, got {value!r}")
    return dtype
