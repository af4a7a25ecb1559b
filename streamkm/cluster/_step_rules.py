"""What both center stores of the mini-batch engine share: the outcome of a step, the
nearest-center assignment, the learning rates, weighted counts and means, and the screen
that may leave rows out of an update."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from streamkm._core.raw_rows import RawRows
from streamkm._numba import centers as _nc
from streamkm.exceptions import ValidationError

__all__ = ["Screen", "StepOutcome", "learning_rates", "sq_norms"]

#: ``screen(labels, sq_distances, support_scores) -> excluded`` is called by a step between
#: assignment and update: a boolean mask of the batch rows to leave out of the update, or
#: None for none. ``support_scores`` is each row's mean squared feature distance to its
#: ``screen.neighbours`` nearest support rows (None from a store without support rows, or
#: when the screen's ``neighbours`` is 0).
Screen = Callable[[np.ndarray, np.ndarray, "np.ndarray | None"], "np.ndarray | None"]


def _check_split_raw(keeps_raw: bool, raw_a: RawRows | None, raw_b: RawRows | None) -> None:
    if keeps_raw and (raw_a is None or raw_b is None):
        raise ValidationError("this store keeps raw rows: split needs raw_a and raw_b")
    if not keeps_raw and (raw_a is not None or raw_b is not None):
        raise ValidationError("this store keeps no raw rows: raw_a / raw_b are not accepted")


def _raw_mean(raw: RawRows) -> np.ndarray:
    """Dense float64 mean of raw rows (dense or CSR)."""
    return np.asarray(raw.mean(axis=0), dtype=np.float64).ravel()


def sq_norms(x: np.ndarray) -> np.ndarray:
    """Squared Euclidean norm of each row, in x's dtype."""
    return np.einsum("ij,ij->i", x, x)


def learning_rates(
    kind: str, batch_counts: np.ndarray, batch_size: int, counts: np.ndarray
) -> np.ndarray:
    """alpha_j: ``"sqrt"`` -> sqrt(b_j / b); ``"count"`` -> b_j / (v_j + b_j) (0 where b_j = 0)."""
    bc = batch_counts.astype(np.float64)
    if kind == "sqrt":
        return np.sqrt(bc / float(batch_size))
    denom = counts.astype(np.float64) + bc
    return np.divide(bc, denom, out=np.zeros_like(bc), where=denom > 0)


@dataclass(frozen=True)
class StepOutcome:
    """What one pass of a batch through a center store found and did.

    ``second_labels`` / ``second_sq_distances``: each row's second-nearest center (-1 and
    +inf with one center); ``batch_counts`` count every assigned row, also those a screen
    left out of the update."""

    labels: np.ndarray
    min_sq_distances: np.ndarray
    batch_counts: np.ndarray
    objective_before: float
    objective_after: float | None
    second_labels: np.ndarray
    second_sq_distances: np.ndarray


def _assign(diag: np.ndarray, inner: np.ndarray, cc: np.ndarray, dtype: np.dtype
            ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]:
    n = inner.shape[0]
    labels = np.empty(n, dtype=np.int64)
    mind = np.empty(n, dtype=dtype)
    second = np.empty(n, dtype=np.int64)
    second_d = np.empty(n, dtype=dtype)
    total = _nc.nearest_two_centers(diag, inner, cc, labels, mind, second, second_d)
    return labels, mind, float(total) / n, second, second_d


def _kept_rows(excluded: np.ndarray | None) -> np.ndarray | None:
    """Indices of the rows a screen kept in the update (None: all of them)."""
    return None if excluded is None else np.flatnonzero(~excluded)


def _weighted_mean(values: np.ndarray, sample_weight: np.ndarray) -> float:
    """sum_i w_i v_i / sum_i w_i in float64 (the weighted batch objective)."""
    return float(np.dot(sample_weight, values.astype(np.float64)) / sample_weight.sum())


def _weighted_counts(labels: np.ndarray, k: int, sample_weight: np.ndarray) -> np.ndarray:
    """Per-cluster sums of integer multiplicities, exact as int64."""
    return np.rint(np.bincount(labels, weights=sample_weight, minlength=k)).astype(np.int64)
