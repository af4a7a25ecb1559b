"""Checks of one scalar parameter (an int, a number, a choice) in plain Python: each returns
the value or raises :class:`~streamkm.exceptions.ParameterError` naming the parameter and
quoting the value. numpy's integers and floats count as ints and numbers (numpy registers
them with :mod:`numbers`); nothing here imports numpy."""

from __future__ import annotations

import math
import numbers
from typing import Any

from streamkm.exceptions import parameter_error

__all__ = ["check_int", "check_float", "check_choice"]


def check_int(value: Any, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int within [low, high], else a ParameterError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise parameter_error(f"{name} must be an int, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise parameter_error(f"{name} must be {bounds}, got {value!r}")
    return int(value)


def check_float(
    value: Any, name: str, *, low: float | None = None, high: float | None = None,
    low_inclusive: bool = True,
) -> float:
    """``value`` as a finite float within bounds, else a ParameterError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise parameter_error(f"{name} must be a number, got {value!r}")
    v = float(value)
    ok = math.isfinite(v)
    if ok and low is not None:
        ok = v >= low if low_inclusive else v > low
    if ok and high is not None:
        ok = v <= high
    if not ok:
        op = ">=" if low_inclusive else ">"
        bounds = "finite" if low is None else f"{op} {low}" + ("" if high is None else f" and <= {high}")
        raise parameter_error(f"{name} must be {bounds}, got {value!r}")
    return v


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else a ParameterError naming it."""
    if not isinstance(value, str) or value not in choices:
        raise parameter_error(f"{name} must be one of {choices}, got {value!r}")
    return value
