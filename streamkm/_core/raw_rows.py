"""Raw (pre-sketch) rows carried beside the engine's rows: dense arrays or CSR matrices.

When features are sketched before the engine, the engine keeps each support row's raw
version too, so that a new sketch can re-project the supports.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm._core.sparse import is_sparse

__all__ = ["RawRows", "stack_rows", "cluster_means", "raw_to_arrays",
           "raw_from_arrays"]

RawRows = Any  # np.ndarray or scipy.sparse.csr_matrix / csr_array


def stack_rows(parts: list[RawRows]) -> RawRows:
    """Concatenate row blocks of one kind (all dense or all CSR)."""
    if is_sparse(parts[0]):
        import scipy.sparse as sp

        return sp.vstack(parts, format="csr")
    return np.ascontiguousarray(np.concatenate(parts))


def cluster_means(raw: RawRows, labels: np.ndarray, counts: np.ndarray,
                  sample_weight: np.ndarray | None = None) -> np.ndarray:
    """Dense (k, D) float64 means of the raw rows of each cluster (0 for empty clusters).

    With ``sample_weight`` each row counts that many times (``counts`` are then the
    weighted counts)."""
    k = counts.shape[0]
    w = np.ones(labels.shape[0]) if sample_weight is None else np.asarray(sample_weight,
                                                                          np.float64)
    if is_sparse(raw):
        import scipy.sparse as sp

        onehot = sp.csr_matrix((w, (labels, np.arange(labels.shape[0]))),
                               shape=(k, labels.shape[0]))
        sums = np.asarray((onehot @ raw).todense(), dtype=np.float64)
    else:
        sums = np.zeros((k, raw.shape[1]))
        np.add.at(sums, labels, raw * w[:, None] if sample_weight is not None else raw)
    return np.divide(sums, counts[:, None], out=np.zeros_like(sums), where=counts[:, None] > 0)


def raw_to_arrays(raw: RawRows, prefix: str) -> dict[str, np.ndarray]:
    """Plain arrays for a state file: ``<prefix>`` (dense) or its CSR components."""
    if is_sparse(raw):
        csr = raw.tocsr()
        return {
            f"{prefix}_data": csr.data, f"{prefix}_indices": csr.indices.astype(np.int64),
            f"{prefix}_indptr": csr.indptr.astype(np.int64),
            f"{prefix}_shape": np.asarray(csr.shape, dtype=np.int64),
        }
    return {prefix: raw}


def raw_from_arrays(arrays: dict[str, np.ndarray], prefix: str) -> RawRows | None:
    """Inverse of :func:`raw_to_arrays`; None when the state has no raw rows."""
    if prefix in arrays:
        return np.ascontiguousarray(arrays[prefix])
    if f"{prefix}_data" in arrays:
        import scipy.sparse as sp

        return sp.csr_matrix(
            (arrays[f"{prefix}_data"], arrays[f"{prefix}_indices"], arrays[f"{prefix}_indptr"]),
            shape=tuple(int(v) for v in arrays[f"{prefix}_shape"]),
        )
    return None
