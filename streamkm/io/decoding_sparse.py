"""The sparse JSON record format: ``{"id": ..., "indices": [...], "values": [...]}``.

A record lists the nonzero features of a vector of ``dim`` features: strictly increasing
integer column indices in ``[0, dim)`` and one number per index. A batch decodes into one
scipy CSR matrix (never densified). Refused records get a reason:

``length_mismatch``
    ``indices`` and ``values`` have different lengths.
``index_out_of_range``
    an index is negative or ``>= dim``.
``unsorted_indices``
    indices are not strictly increasing (unsorted, or a duplicate index).

plus the reasons shared with the dense formats (``unparseable``, ``missing_field``,
``empty``, ``encoding``, ``non_finite``, ``magnitude``). As in the dense JSON path, the
per-record Python work is one ``json.loads`` and a few type checks; conversion and range
checks run once per batch in numpy.
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Any

import msgspec
import numpy as np

from streamkm._core.sparse import is_sparse
from streamkm.io.rejection import (
    Rejection,
    RejectReason,
    json_object,
    json_record_id,
    quote,
    reject,
    text_of,
    typed_json_decoder,
)
from streamkm.io.sources import RawRecord

__all__ = ["decode_sparse_json", "stack_batch_rows"]

def stack_batch_rows(chunks: list[Any], dim: int, dtype: Any) -> Any:
    """Concatenate decoded chunks: dense arrays with numpy, CSR chunks into one CSR matrix.

    An empty list gives an empty dense (0, dim) array.
    """
    if not chunks:
        return np.empty((0, dim), dtype=dtype)
    if is_sparse(chunks[0]):
        import scipy.sparse as sp

        return sp.vstack(chunks, format="csr").astype(dtype, copy=False)
    return np.concatenate(chunks).astype(dtype, copy=False)


def _empty_csr(dim: int, dtype: Any) -> Any:
    import scipy.sparse as sp

    return sp.csr_matrix((0, dim), dtype=dtype)


def decode_sparse_json(decoder: Any, records: list[RawRecord], rejections: list[Any]
                       ) -> tuple[Any, list[str], list[RawRecord]]:
    """Decode sparse JSON records; append refusals to ``rejections``.

    Parameters
    ----------
    decoder : RecordDecoder
        Supplies ``dim``, ``id_field``, ``indices_field``, ``values_field``,
        ``max_abs_value`` and ``dtype``.
    records : list of RawRecord
        Records without a framing error.
    rejections : list
        Receives a :class:`~streamkm.io.decoding.Rejection` per refused record.

    Returns
    -------
    x : scipy.sparse.csr_matrix of shape (n_accepted, dim)
    ids : list of str
    accepted : list of RawRecord
    """

    loads = json.JSONDecoder().decode
    id_field, idx_field, val_field = decoder.id_field, decoder.indices_field, decoder.values_field
    typed = typed_json_decoder(id_field, (("indices", idx_field, list[int]),
                                          ("values", val_field, list[float]))).decode
    index_rows: list[list[Any]] = []
    value_rows: list[list[Any]] = []
    ids: list[str] = []
    good: list[RawRecord] = []
    suspicious = False
    for record in records:
        value = record.value
        try:
            # msgspec skips unknown fields without checking their UTF-8: such records take
            # the slow path, which refuses them as ``encoding``.
            fast = typed(value if value.isascii() or text_of(value) is not None else b"")
        except msgspec.DecodeError:
            obj = json_object(record, loads)
            if isinstance(obj, Rejection):
                rejections.append(obj)
                continue
            missing = [f for f in (idx_field, val_field) if f not in obj]
            if missing:
                rejections.append(reject(RejectReason.MISSING_FIELD,
                                         f"field {missing[0]!r} missing in {quote(value)}",
                                         record))
                continue
            indices, values, raw_id = obj[idx_field], obj[val_field], obj.get(id_field)
            not_list = [(f, v) for f, v in ((idx_field, indices), (val_field, values))
                        if type(v) is not list]
            if not_list:
                field, bad = not_list[0]
                rejections.append(reject(
                    RejectReason.UNPARSEABLE,
                    f"field {field!r} must be a list, got {quote(json.dumps(bad))}", record))
                continue
            if not suspicious and (b"true" in value or b"false" in value):
                suspicious = True
        else:
            indices, values, raw_id = fast.indices, fast.values, fast.id
        if len(indices) != len(values):
            rejections.append(reject(
                RejectReason.LENGTH_MISMATCH,
                f"{idx_field!r} has {len(indices)} entries but {val_field!r} has "
                f"{len(values)}: {quote(value)}", record))
            continue
        rid = json_record_id(raw_id, id_field, record)
        if isinstance(rid, Rejection):
            rejections.append(rid)
            continue
        index_rows.append(indices)
        value_rows.append(values)
        ids.append(rid)
        good.append(record)
    return _rows_to_csr(decoder, index_rows, value_rows, ids, good, rejections,
                        strict=suspicious)


def _flat(rows: list[list[Any]], kinds: str) -> np.ndarray | None:
    """All rows' entries as one array if numpy sees only ``kinds``, else None."""
    flat = list(chain.from_iterable(rows))
    if not flat:
        return np.empty(0, dtype=np.int64 if kinds == "i" else np.float64)
    try:
        arr = np.array(flat)
    except (ValueError, TypeError, OverflowError):
        return None
    return arr if arr.ndim == 1 and arr.dtype.kind in kinds else None


def _row_types_ok(decoder: Any, indices: list[Any], values: list[Any], record: RawRecord,
                  rejections: list[Any]) -> bool:
    """Strict per-element check of one row (the slow path that names the culprit)."""
    for j, v in enumerate(indices):
        if type(v) is not int:
            rejections.append(reject(
                RejectReason.UNPARSEABLE,
                f"{decoder.indices_field!r}[{j}] is not an integer: {quote(json.dumps(v))}",
                record))
            return False
        if not 0 <= v < decoder.dim:
            rejections.append(reject(
                RejectReason.INDEX_OUT_OF_RANGE,
                f"index {v} at position {j} is outside [0, {decoder.dim}) "
                f"in {quote(record.value)}",
                record))
            return False
    for j, v in enumerate(values):
        if type(v) not in (int, float):
            rejections.append(reject(
                RejectReason.UNPARSEABLE,
                f"{decoder.values_field!r}[{j}] is not a number: {quote(json.dumps(v))}",
                record))
            return False
        try:
            float(v)
        except OverflowError:
            rejections.append(reject(
                RejectReason.MAGNITUDE,
                f"{decoder.values_field!r}[{j}] = {quote(str(v))} exceeds "
                f"max_abs_value={decoder.max_abs_value:g}", record))
            return False
    return True


def _rows_to_csr(decoder: Any, index_rows: list[list[Any]], value_rows: list[list[Any]],
                 ids: list[str], good: list[RawRecord], rejections: list[Any], *,
                 strict: bool) -> tuple[Any, list[str], list[RawRecord]]:
    dim, dtype = decoder.dim, decoder.dtype
    if not good:
        return _empty_csr(dim, dtype), ids, good
    idx = None if strict else _flat(index_rows, "i")
    vals = None if strict else _flat(value_rows, "fi")
    if idx is None or vals is None:
        keep = [i for i in range(len(good))
                if _row_types_ok(decoder, index_rows[i], value_rows[i], good[i], rejections)]
        index_rows = [index_rows[i] for i in keep]
        value_rows = [value_rows[i] for i in keep]
        ids = [ids[i] for i in keep]
        good = [good[i] for i in keep]
        if not good:
            return _empty_csr(dim, dtype), ids, good
        idx = np.array(list(chain.from_iterable(index_rows)), dtype=np.int64)
        vals = np.array(list(chain.from_iterable(value_rows)), dtype=np.float64)
    idx = idx.astype(np.int64, copy=False)
    vals = vals.astype(np.float64, copy=False)
    lengths = np.fromiter((len(r) for r in index_rows), dtype=np.int64, count=len(index_rows))
    row_of = np.repeat(np.arange(len(good)), lengths)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))

    bad = np.zeros(len(good), dtype=bool)
    with np.errstate(invalid="ignore"):
        absv = np.abs(vals)
        checks = [
            (RejectReason.INDEX_OUT_OF_RANGE, (idx < 0) | (idx >= dim)),
            (RejectReason.UNSORTED_INDICES, np.concatenate(
                ([False], (row_of[1:] == row_of[:-1]) & (idx[1:] <= idx[:-1])))),
            (RejectReason.NON_FINITE, ~np.isfinite(vals)),
            (RejectReason.MAGNITUDE, ~(absv <= decoder.max_abs_value) & np.isfinite(vals)),
        ]
    for reason, element_bad in checks:
        if not element_bad.any():
            continue
        first_bad = {}
        for pos in np.flatnonzero(element_bad):
            row = int(row_of[pos])
            if not bad[row] and row not in first_bad:
                first_bad[row] = int(pos)
        for row, pos in first_bad.items():
            j = pos - int(starts[row])
            quoted = quote(good[row].value)
            if reason is RejectReason.INDEX_OUT_OF_RANGE:
                detail = (f"index {int(idx[pos])} at position {j} is outside [0, {dim}) "
                          f"in {quoted}")
            elif reason is RejectReason.UNSORTED_INDICES:
                kind = "duplicate" if idx[pos] == idx[pos - 1] else "unsorted"
                detail = (f"{kind} index {int(idx[pos])} after {int(idx[pos - 1])} at position "
                          f"{j}: indices must be strictly increasing, in {quoted}")
            elif reason is RejectReason.NON_FINITE:
                detail = f"value {j} is {float(vals[pos])!r} (not finite) in {quoted}"
            else:
                detail = (f"value {j} = {float(vals[pos])!r} exceeds max_abs_value="
                          f"{decoder.max_abs_value:g} in {quoted}")
            rejections.append(reject(reason, detail, good[row]))
            bad[row] = True
    import scipy.sparse as sp

    if bad.any():
        keep_rows = np.flatnonzero(~bad)
        keep_el = ~bad[row_of]
        idx, vals = idx[keep_el], vals[keep_el]
        lengths = lengths[keep_rows]
        ids = [ids[i] for i in keep_rows]
        good = [good[i] for i in keep_rows]
    indptr = np.zeros(len(good) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    index_dtype = np.int32 if dim < 2**31 else np.int64
    x = sp.csr_matrix((vals.astype(dtype), idx.astype(index_dtype), indptr.astype(index_dtype)),
                      shape=(len(good), dim))
    return x, ids, good
