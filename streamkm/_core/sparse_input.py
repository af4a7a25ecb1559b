"""Dense-or-CSR input handling for the sketchers, without densifying sparse input.

scipy is imported lazily: if ``scipy.sparse`` was never imported, no input can be a scipy
sparse matrix, so dense-only users do not need scipy installed.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from streamkm._core.sparse import is_sparse
from streamkm._core.validation import check_array
from streamkm.exceptions import ValidationError

__all__ = [
    "SketchInput",
    "check_sketch_input",
    "right_multiply",
    "left_multiply_transposed",
    "select_columns",
]

#: A validated input: a C-contiguous float array or a scipy CSR matrix/array of floats.
SketchInput = Union[np.ndarray, Any]


def _float_dtype(dtype: np.dtype) -> type:
    return np.float32 if dtype == np.float32 else np.float64


def check_sketch_input(x: Any, *, name: str = "X", n_features: int | None = None) -> SketchInput:
    """Validate ``x`` for a sketcher: dense via ``check_array``, sparse kept sparse as CSR.

    Sparse input in another format (COO, CSC, ...) is converted to CSR, which stays sparse.
    float32 stays float32, other numeric dtypes become float64. Stored values must be finite.

    Parameters
    ----------
    x : array-like or scipy sparse matrix of shape (n_samples, n_features)
        The input.
    name : str, default="X"
        Name used in error messages.
    n_features : int or None, default=None
        Required feature count (the one seen in ``fit``), or None for any.

    Returns
    -------
    numpy.ndarray or scipy.sparse CSR matrix
        The checked input.

    Raises
    ------
    ValidationError
        Not 2-D, empty, not numeric, NaN/Inf, or a feature count other than ``n_features``.
    """
    if not is_sparse(x):
        return check_array(x, name=name, n_features=n_features)
    if x.ndim != 2:
        raise ValidationError(f"{name} must be 2-D (n_samples, n_features), got shape {x.shape!r}")
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValidationError(f"{name} must be non-empty, got shape {x.shape!r}")
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_) or np.iscomplexobj(x.data):
        raise ValidationError(f"{name} must be real and numeric, got dtype {x.dtype!s}")
    csr = x.tocsr()
    dtype = _float_dtype(csr.dtype)
    if csr.dtype != dtype:
        csr = csr.astype(dtype)
    finite = np.isfinite(csr.data)
    if not finite.all():
        pos = int(np.flatnonzero(~finite)[0])
        row = int(np.searchsorted(csr.indptr, pos, side="right") - 1)
        raise ValidationError(
            f"{name} must be finite, got {float(csr.data[pos])!r} at row {row}, "
            f"column {int(csr.indices[pos])} (NaN and infinity are not accepted)"
        )
    if n_features is not None and csr.shape[1] != n_features:
        raise ValidationError(
            f"{name} has {csr.shape[1]} features, but the sketcher was fitted with "
            f"{n_features} features"
        )
    return csr


def _dense_result(product: Any, dtype: np.dtype) -> np.ndarray:
    if is_sparse(product):
        product = product.toarray()
    return np.ascontiguousarray(np.asarray(product), dtype=dtype)


def right_multiply(x: SketchInput, matrix: Any) -> np.ndarray:
    """Dense ``x @ matrix`` for dense or CSR ``x`` and dense or sparse ``matrix``.

    The result has ``x``'s dtype; ``matrix`` must already have it.
    """
    if is_sparse(matrix) and not is_sparse(x):
        # dense @ sparse: let the sparse operand drive, (M^T x^T)^T
        return _dense_result((matrix.T @ x.T).T, x.dtype)
    return _dense_result(x @ matrix, x.dtype)


def left_multiply_transposed(x: SketchInput, q: np.ndarray) -> np.ndarray:
    """Dense ``q.T @ x`` of shape (q.shape[1], n_features) for dense or CSR ``x``."""
    if is_sparse(x):
        return _dense_result((x.T @ q).T, x.dtype)
    return _dense_result(q.T @ x, x.dtype)


def select_columns(x: SketchInput, columns: np.ndarray) -> np.ndarray:
    """Dense copy of the given columns of ``x`` (repeats allowed), shape (n_samples, len(columns))."""
    if is_sparse(x):
        return _dense_result(x[:, columns], x.dtype)
    return np.ascontiguousarray(x[:, columns])
