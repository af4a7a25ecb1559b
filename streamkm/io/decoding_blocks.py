"""Decoding a whole :class:`~streamkm.io.blocks.RecordBlock` at once.

The fast path of the dense formats: float32 records are read straight from the block's
buffer; JSON objects and CSV rows of the common shape are parsed by the numba kernels of
:mod:`streamkm._numba.text_rows` into one preallocated float64 array, with the same values
the per-record decoder gives (the decimal conversion is exact, see
:mod:`streamkm._numba.decimal`). Every record the fast path does not take whole, and every
record whose values fail the range check, is decoded by
:meth:`~streamkm.io.decoding.RecordDecoder.decode_many` as a :class:`RawRecord` built for it,
so its rejection (reason and detail) is exactly the per-record decoder's. The outputs are
those of ``decode_many`` on all the block's records, with the accepted records given as row
numbers of the block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm._numba.text_rows import parse_csv_rows, parse_json_rows
from streamkm.io.blocks import RecordBlock
from streamkm.io.rejection import Rejection

__all__ = ["decode_block"]

_NO_ROWS = np.empty(0, dtype=np.int64)


def decode_block(decoder: Any, block: RecordBlock
                 ) -> tuple[np.ndarray, list[str], np.ndarray, list[Rejection]]:
    """Decode every record of ``block``.

    Parameters
    ----------
    decoder : RecordDecoder
        The configured decoder (format, dim, fields, limits, dtype).
    block : RecordBlock
        Complete records of one file.

    Returns
    -------
    x : ndarray of shape (n_accepted, dim)
        The accepted rows in block order, C-contiguous, of the decoder's dtype (a CSR
        matrix for ``json_sparse``, which has no fast path).
    ids : list of str
        Their ids.
    rows : ndarray of int64
        Their row numbers in the block.
    rejections : list of Rejection
        The refused records in block order (CSV header lines are in neither list).
    """
    n = len(block)
    if decoder.format == "json_sparse" or n == 0:
        if n == 0:
            x, ids, _, rejections = decoder.decode_many([])
            return x, ids, _NO_ROWS, rejections
        slow = _SlowRows.decode(decoder, block, np.arange(n, dtype=np.int64))
        return slow.x, slow.ids, slow.rows, slow.rejections
    first: _SlowRows | None = None
    if decoder.format == "csv" and decoder.is_header(block.record(0)):
        first = _SlowRows.decode(decoder, block, np.zeros(1, dtype=np.int64))
    out, ok, spans = _fast_rows(decoder, block)
    if first is not None:
        ok[0] = False
    limit = decoder.max_record_bytes
    if limit is not None:
        ok &= (block.ends - block.starts) <= limit
    with np.errstate(invalid="ignore"):
        row_max = np.abs(out).max(axis=1).astype(np.float64, copy=False)
    ok &= row_max <= decoder.max_abs_value  # False for NaN, Inf and too large
    slow_rows = np.flatnonzero(~ok)
    if first is not None:
        slow_rows = slow_rows[1:]
    slow = _SlowRows.decode(decoder, block, slow_rows)
    if first is not None:
        slow = first.then(slow)
    if not slow.rows.size:
        kept = None if ok.all() else np.flatnonzero(ok)
    else:
        if out.dtype != np.float64:  # float32 records: a view of the block's buffer
            out = out.astype(np.float64)
        out[slow.rows] = slow.x
        ok[slow.rows] = True
        kept = np.flatnonzero(ok)
    x = out if kept is None else out[kept]
    rows = np.arange(n, dtype=np.int64) if kept is None else kept
    ids = _ids(decoder, block, rows, spans, slow)
    return np.ascontiguousarray(x, dtype=decoder.dtype), ids, rows, slow.rejections


class _SlowRows:
    """What ``decode_many`` made of some rows of a block: accepted rows, their x and ids,
    and the rejections."""

    __slots__ = ("rows", "x", "ids", "rejections")

    def __init__(self, rows: np.ndarray, x: np.ndarray, ids: list[str],
                 rejections: list[Rejection]) -> None:
        self.rows, self.x, self.ids, self.rejections = rows, x, ids, rejections

    @classmethod
    def decode(cls, decoder: Any, block: RecordBlock, rows: np.ndarray) -> _SlowRows:
        if not rows.size:
            return cls(_NO_ROWS, np.empty((0, decoder.dim)), [], [])
        records = block.records(rows)
        x, ids, accepted, rejections = decoder.decode_many(records)
        row_of = {id(record): int(row) for record, row in zip(records, rows)}
        accepted_rows = np.array([row_of[id(r)] for r in accepted], dtype=np.int64)
        return cls(accepted_rows, x, ids, rejections)

    def then(self, other: _SlowRows) -> _SlowRows:
        """These rows followed by ``other`` 's (which come later in the block)."""
        if not self.rows.size:
            x = other.x
        elif not other.rows.size:
            x = self.x
        else:
            x = np.concatenate([self.x, other.x])
        return _SlowRows(np.concatenate([self.rows, other.rows]), x, self.ids + other.ids,
                         self.rejections + other.rejections)


def _fast_rows(decoder: Any, block: RecordBlock
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Rows the fast path parsed: ``(out, ok, id spans)``; rows with ``ok`` False are
    undefined (the id spans are None for formats whose ids come from positions)."""
    n, dim = len(block), decoder.dim
    fmt = decoder.format
    if fmt == "float32":
        if block.record_size == 4 * dim:
            offset = int(block.starts[0])
            out = np.frombuffer(block.data, dtype="<f4", count=n * dim, offset=offset)
            return out.reshape(n, dim), np.ones(n, dtype=bool), None
        return np.zeros((n, dim)), np.zeros(n, dtype=bool), None
    out = np.empty((n, dim), dtype=np.float64)
    ok = np.empty(n, dtype=bool)
    spans = np.empty((n, 3), dtype=np.int64)
    buf = np.frombuffer(block.data, dtype=np.uint8)
    if fmt == "json":
        parse_json_rows(buf, block.starts, block.ends, _key(decoder.x_field),
                        _key(decoder.id_field), out, ok, spans)
        return out, ok, spans
    id_column = decoder.csv_id_index()
    if id_column is None:  # a named id column not resolved yet: the general decoder
        ok[:] = False
        return out, ok, spans
    parse_csv_rows(buf, block.starts, block.ends, id_column, out, ok, spans)
    return out, ok, spans if id_column >= 0 else None


def _key(name: str) -> np.ndarray:
    return np.frombuffer(name.encode("utf-8"), dtype=np.uint8)


def _ids(decoder: Any, block: RecordBlock, rows: np.ndarray, spans: np.ndarray | None,
         slow: _SlowRows) -> list[str]:
    """The ids of the accepted ``rows``: from the records' id spans, else their positions
    (``file:offset``), the slow rows' from ``decode_many``."""
    if spans is None:  # ids derived from positions (float32; CSV without an id column)
        return block.position_ids(rows)
    text = block.data.decode("latin-1")  # the spans are ASCII: one str, sliced per id
    csv = decoder.format == "csv"
    slow_ids = dict(zip(slow.rows.tolist(), slow.ids)) if slow.rows.size else {}
    base_ids: list[str] | None = None
    kinds, first, last = spans[rows, 0], spans[rows, 1], spans[rows, 2]
    if not slow_ids and not csv and bool((kinds != 0).all()):
        return [text[s:e] for s, e in zip(first.tolist(), last.tolist())]
    out: list[str] = []
    for k, (row, kind, s, e) in enumerate(zip(rows.tolist(), kinds.tolist(), first.tolist(),
                                              last.tolist())):
        if row in slow_ids:
            out.append(slow_ids[row])
            continue
        rid = text[s:e] if kind else ""
        if csv:
            rid = rid.strip().strip('"')
        if not rid and (kind == 0 or csv):
            if base_ids is None:
                base_ids = block.position_ids(rows)
            rid = base_ids[k]
        out.append(rid)
    return out
