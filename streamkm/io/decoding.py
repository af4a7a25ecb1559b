"""Decoding and validation of raw records into feature vectors.

A :class:`RecordDecoder` turns :class:`~streamkm.io.sources.RawRecord` values into rows of a
float matrix, or into a :class:`Rejection` naming why the record must go to the
dead-letter sink instead of the model. Three wire formats:

``"json"``
    One JSON object per record, ``{"id": "a1", "x": [0.5, 1.25, ...]}`` (field names
    configurable). A missing or ``null`` id is derived from the record's position
    (``"path:offset"``, undecodable file-name bytes written ``\\xNN``). A string id that no
    UTF-8 output can carry (a lone surrogate escape) is ``invalid_id``. ``NaN`` /
    ``Infinity`` literals are parsed and then rejected as non-finite. ``true`` / ``false`` /
    strings / nested lists in ``x`` are unparseable.
``"csv"``
    Comma-separated numbers (no quoting, except an id may be wrapped in double quotes),
    optionally with an id column (``csv_id_column``, an index
    or a header name) and a header line. The header is the first line of each file
    (position offset 0 of a position with a ``"file"``): it is skipped, neither accepted
    nor rejected, and it is where a named id column is looked up.
``"float32"``
    Raw little-endian float32 records of exactly ``4 * dim`` bytes (fixed framing); the
    id is derived from the position.

``"json_sparse"``
    One JSON object per record listing the nonzero features,
    ``{"id": "a1", "indices": [3, 17, 40], "values": [0.5, 1.0, 2.25]}`` (field names
    configurable): strictly increasing integer indices in ``[0, dim)``, one value each.
    A batch decodes into a scipy CSR matrix; see :mod:`streamkm.io.decoding_sparse` for the
    checks (``length_mismatch``, ``index_out_of_range``, ``unsorted_indices``).

Every accepted row is finite and within ``max_abs_value`` in absolute value. The batch
path :meth:`RecordDecoder.decode_many` is the service's hot path: per record it does only
the unavoidable Python work (one typed msgspec decode / one ``split``), and the numeric
conversion and all range checks run once per batch in numpy. A JSON record the typed
decoder refuses is decoded again by the standard library, which names the exact reason. float32 batches are a single
``np.frombuffer`` over the joined records.

:meth:`RecordDecoder.decode_block` decodes a whole :class:`~streamkm.io.blocks.RecordBlock`
(what the file source hands out) without an object per record: numba parsers for the common
JSON and CSV shapes and float32 read straight from the buffer, with every other record
through :meth:`RecordDecoder.decode_many` (see :mod:`streamkm.io.decoding_blocks`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import numpy as np

from streamkm._core.sparse import is_sparse
from streamkm._core.validation import check_float_dtype
from streamkm.exceptions import ParameterError
from streamkm.io.blocks import RecordBlock
from streamkm.io.decoding_blocks import decode_block
from streamkm.io.decoding_sparse import decode_sparse_json
from streamkm.io.rejection import (
    QUOTE_MAX_BYTES,
    RejectReason,
    Rejection,
    encoding_rejection,
    framing_rejection,
    json_object,
    json_record_id,
    position_id,
    quote,
    reject,
    safe_text,
    text_of,
    typed_json_decoder,
)
from streamkm.io.sources import RawRecord

__all__ = ["RejectReason", "DecodedRecord", "Rejection", "RecordDecoder", "position_id",
           "safe_text"]

_HEADER_PROBE_BYTES = 65536
_MISSING = object()


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    """A valid record: its id and its feature vector (1-D, the decoder's dtype)."""

    id: str
    x: np.ndarray


class RecordDecoder:
    """Decode and validate raw records of one wire format into float vectors of ``dim``.

    Parameters
    ----------
    format : {"json", "csv", "float32", "json_sparse"}
        Wire format of the record values (see the module docstring).
    dim : int
        Number of features every record must have.
    id_field, x_field : str
        JSON field names of the id and of the feature list.
    indices_field, values_field : str
        JSON field names of the column indices and of their values (``"json_sparse"``).
    csv_header : bool
        CSV files start with a header line (skipped; see :meth:`is_header`).
    csv_id_column : int, str or None
        CSV column holding the record id: an index (negative counts from the end), a
        header name (needs ``csv_header=True``), or None when every column is a feature.
        A name is looked up in the last header seen; if a partition resumed in the middle
        of a file, the header is read from the first line of the record's ``"file"``.
    max_abs_value : float
        Largest accepted absolute feature value; larger ones are rejected as ``magnitude``.
    dtype : numpy dtype
        float64 (default) or float32: dtype of the decoded vectors.
    max_record_bytes : int or None
        Optional size limit applied by the decoder itself (for transports that do not
        enforce one); longer values are rejected as ``oversized``. None: no limit here.

    Notes
    -----
    The decoder holds no state that matters for correctness except the learnt CSV header
    position of a named id column, which is re-learnt from the files after a restart.
    """

    def __init__(
        self,
        *,
        format: Literal["json", "csv", "float32"],
        dim: int,
        id_field: str = "id",
        x_field: str = "x",
        indices_field: str = "indices",
        values_field: str = "values",
        csv_header: bool = False,
        csv_id_column: str | int | None = None,
        max_abs_value: float = 1e12,
        dtype: Any = np.float64,
        max_record_bytes: int | None = None,
    ) -> None:
        if format not in ("json", "csv", "float32", "json_sparse"):
            raise ParameterError(
                f"format must be 'json', 'csv', 'float32' or 'json_sparse', got {format!r}")
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
            raise ParameterError(f"dim must be a positive int, got {dim!r}")
        if not isinstance(id_field, str) or not isinstance(x_field, str) or id_field == x_field:
            raise ParameterError(
                f"id_field and x_field must be two different strings, got {id_field!r} "
                f"and {x_field!r}")
        sparse_fields = (id_field, indices_field, values_field)
        if format == "json_sparse" and (
                not all(isinstance(f, str) for f in sparse_fields)
                or len(set(sparse_fields)) != 3):
            raise ParameterError(
                f"id_field, indices_field and values_field must be three different strings, "
                f"got {id_field!r}, {indices_field!r} and {values_field!r}")
        if csv_id_column is not None and (
            isinstance(csv_id_column, bool) or not isinstance(csv_id_column, (str, int))
        ):
            raise ParameterError(
                f"csv_id_column must be an int, a str or None, got {csv_id_column!r}")
        if isinstance(csv_id_column, str) and not csv_header:
            raise ParameterError(
                f"csv_id_column {csv_id_column!r} is a column name, which needs csv_header=True")
        if isinstance(csv_id_column, int) and not -(dim + 1) <= csv_id_column <= dim:
            raise ParameterError(
                f"csv_id_column must be in [{-(dim + 1)}, {dim}] for dim={dim}, "
                f"got {csv_id_column!r}")
        try:
            max_abs = float(max_abs_value)
        except (TypeError, ValueError):
            max_abs = math.nan
        if not max_abs > 0:
            raise ParameterError(f"max_abs_value must be a positive number, got {max_abs_value!r}")
        np_dtype = check_float_dtype(dtype)
        if max_record_bytes is not None and (
            isinstance(max_record_bytes, bool) or not isinstance(max_record_bytes, int)
            or max_record_bytes < 1
        ):
            raise ParameterError(
                f"max_record_bytes must be a positive int or None, got {max_record_bytes!r}")
        self.format = format
        self.dim = int(dim)
        self.id_field = id_field
        self.x_field = x_field
        self.indices_field = indices_field
        self.values_field = values_field
        self.csv_header = bool(csv_header)
        self.csv_id_column = csv_id_column
        self.max_abs_value = max_abs
        self.dtype = np_dtype
        self.max_record_bytes = max_record_bytes
        # Column index of the id in a CSV row (None: no id column / name not resolved yet).
        self._csv_id_index: int | None = None
        if isinstance(csv_id_column, int):
            self._csv_id_index = csv_id_column % (self.dim + 1)
        self._header_probed: set[str] = set()  # files whose header was read for the id column
        self._json_loads = json.JSONDecoder().decode
        self._typed_dense = typed_json_decoder(id_field, (("x", x_field, list[float]),))

    # ------------------------------------------------------------------ public API

    def is_header(self, record: RawRecord) -> bool:
        """True if ``record`` is a CSV header line (CSV with ``csv_header=True`` and the
        first line of a file: a position with a ``"file"`` and offset 0)."""
        return (self.format == "csv" and self.csv_header and record.error is None
                and record.position.get("offset") == 0 and "file" in record.position)

    def decode(self, record: RawRecord) -> DecodedRecord | Rejection | None:
        """Decode one record: a :class:`DecodedRecord`, a :class:`Rejection`, or ``None``
        for a CSV header line (which is neither data nor an error)."""
        x, ids, _, rejections = self.decode_many([record])
        if rejections:
            return rejections[0]
        if ids:
            return DecodedRecord(ids[0], x[0].toarray()[0] if is_sparse(x) else x[0].copy())
        return None

    def decode_block(self, block: RecordBlock
                     ) -> tuple[np.ndarray, list[str], np.ndarray, list[Rejection]]:
        """Decode every record of a block (see :mod:`streamkm.io.decoding_blocks`): what
        :meth:`decode_many` gives for the block's records, with the accepted ones as row
        numbers of the block."""
        return decode_block(self, block)

    def csv_id_index(self) -> int | None:
        """Column of the CSV id: -1 without an id column, None for a named column whose
        header has not been seen yet."""
        if self.csv_id_column is None:
            return -1
        return self._csv_id_index

    def decode_many(
        self, records: list[RawRecord]
    ) -> tuple[np.ndarray, list[str], list[RawRecord], list[Rejection]]:
        """Decode a batch: the fast path of the service.

        Returns
        -------
        x : ndarray or scipy CSR matrix of shape (n_accepted, dim)
            The accepted rows, C-contiguous, in input order, of the decoder's dtype.
        ids : list of str
            Their ids.
        accepted : list of RawRecord
            Their raw records (for positions / assignment output).
        rejections : list of Rejection
            The refused records, in input order. CSV header lines appear in neither list.
        """
        rejections: list[Rejection] = []
        candidates: list[RawRecord] = []
        limit = self.max_record_bytes
        for record in records:
            if record.error is not None:
                rejections.append(framing_rejection(record))
            elif limit is not None and len(record.value) > limit:
                rejections.append(reject(
                    RejectReason.OVERSIZED,
                    f"record of {len(record.value)} bytes exceeds max_record_bytes={limit}: "
                    f"{quote(record.value[:QUOTE_MAX_BYTES])}", record))
            else:
                candidates.append(record)
        if self.format == "json_sparse":
            x, ids, accepted = decode_sparse_json(self, candidates, rejections)
        else:
            if self.format == "float32":
                x, ids, accepted = self._float32_batch(candidates, rejections)
            elif self.format == "json":
                x, ids, accepted = self._json_batch(candidates, rejections)
            else:
                x, ids, accepted = self._csv_batch(candidates, rejections)
            x, ids, accepted = self._check_values(x, ids, accepted, rejections)
        if len(rejections) > 1:
            order = {id(r): i for i, r in enumerate(records)}
            rejections.sort(key=lambda rej: order[id(rej.record)])
        return x, ids, accepted, rejections

    # ------------------------------------------------------------------ formats

    def _float32_batch(self, records: list[RawRecord], rejections: list[Rejection]
                       ) -> tuple[np.ndarray, list[str], list[RawRecord]]:
        width = 4 * self.dim
        good: list[RawRecord] = []
        for record in records:
            if len(record.value) == width:
                good.append(record)
            elif not record.value:
                rejections.append(reject(RejectReason.EMPTY, "empty record", record))
            else:
                rejections.append(reject(
                    RejectReason.WRONG_DIMENSION,
                    f"float32 record of {len(record.value)} bytes, expected 4 * dim = {width}: "
                    f"{quote(record.value)}", record))
        x = np.frombuffer(b"".join([r.value for r in good]), dtype="<f4")
        x = x.reshape(len(good), self.dim).astype(np.float64)
        return x, [position_id(r.position) for r in good], good

    def _json_batch(self, records: list[RawRecord], rejections: list[Rejection]
                    ) -> tuple[np.ndarray, list[str], list[RawRecord]]:
        typed = self._typed_dense.decode
        id_field, x_field, dim = self.id_field, self.x_field, self.dim
        rows: list[list[Any]] = []
        ids: list[str] = []
        good: list[RawRecord] = []
        all_typed = True  # every row is a list of Python floats (the typed decoder's output)
        suspicious = False  # some row may hold booleans, which numpy would turn into 0/1
        for record in records:
            value = record.value
            try:  # see decoding_sparse: invalid UTF-8 takes the slow path
                fast = typed(value if value.isascii() or text_of(value) is not None else b"")
            except msgspec.DecodeError:
                x, raw_id = self._json_fields(record, rejections)
                if x is None:
                    continue
                all_typed = False
                if not suspicious and (b"true" in value or b"false" in value):
                    suspicious = True
            else:
                x, raw_id = fast.x, fast.id
            if len(x) != dim:
                rejections.append(reject(
                    RejectReason.WRONG_DIMENSION,
                    f"field {x_field!r} has {len(x)} values, expected {dim}: {quote(value)}",
                    record))
                continue
            rid = json_record_id(raw_id, id_field, record)
            if isinstance(rid, Rejection):
                rejections.append(rid)
                continue
            rows.append(x)
            ids.append(rid)
            good.append(record)
        if all_typed and rows:
            return np.array(rows, dtype=np.float64).reshape(len(rows), dim), ids, good
        return self._rows_to_matrix(rows, ids, good, rejections, strict=suspicious)

    def _json_fields(self, record: RawRecord, rejections: list[Rejection]
                     ) -> tuple[list[Any] | None, Any]:
        """The slow path of one JSON record: ``(x, raw id)``, or ``(None, None)`` after
        appending the reason it is refused (everything but the dimension and the id)."""
        obj = json_object(record, self._json_loads)
        if isinstance(obj, Rejection):
            rejections.append(obj)
            return None, None
        x = obj.get(self.x_field, _MISSING)
        if x is _MISSING:
            rejections.append(reject(
                RejectReason.MISSING_FIELD,
                f"field {self.x_field!r} missing in {quote(record.value)}", record))
            return None, None
        if type(x) is not list:
            rejections.append(reject(
                RejectReason.UNPARSEABLE,
                f"field {self.x_field!r} must be a list of numbers, got {quote(json.dumps(x))}",
                record))
            return None, None
        return x, obj.get(self.id_field)

    def _csv_batch(self, records: list[RawRecord], rejections: list[Rejection]
                   ) -> tuple[np.ndarray, list[str], list[RawRecord]]:
        dim = self.dim
        has_id = self.csv_id_column is not None
        n_columns = dim + 1 if has_id else dim
        rows: list[list[str]] = []
        ids: list[str] = []
        good: list[RawRecord] = []
        for record in records:
            value = record.value
            text = text_of(value)
            if text is None:
                rejections.append(encoding_rejection(record))
                continue
            if isinstance(text, bytes):
                text = text.decode("ascii")
            if self.is_header(record):
                self._learn_header(text)
                continue
            if not text.strip():
                rejections.append(reject(RejectReason.EMPTY,
                                          f"empty record {quote(value)}", record))
                continue
            fields = text.rstrip("\r").split(",")
            if len(fields) != n_columns:
                n_values = len(fields) - 1 if has_id else len(fields)
                rejections.append(reject(
                    RejectReason.WRONG_DIMENSION,
                    f"{n_values} values, expected {dim}: {quote(value)}", record))
                continue
            if has_id:
                index = self._csv_id_index
                if index is None:
                    index = self._header_from_file(record)
                if index is None:
                    rejections.append(reject(
                        RejectReason.MISSING_FIELD,
                        f"id column {self.csv_id_column!r} not found (no header seen): "
                        f"{quote(value)}", record))
                    continue
                rid = fields.pop(index).strip().strip('"')
                if not rid:
                    rid = position_id(record.position)
            else:
                rid = position_id(record.position)
            rows.append(fields)
            ids.append(rid)
            good.append(record)
        return self._rows_to_matrix(rows, ids, good, rejections, strict=False)

    # ------------------------------------------------------------------ helpers

    def _learn_header(self, text: str) -> None:
        if not isinstance(self.csv_id_column, str):
            return
        names = [name.strip().strip('"') for name in text.rstrip("\r").split(",")]
        if self.csv_id_column in names:
            self._csv_id_index = names.index(self.csv_id_column)
        else:  # this file has no such column: its records are rejected as missing_field
            self._csv_id_index = None

    def _header_from_file(self, record: RawRecord) -> int | None:
        """Resolve a named id column from the first line of the record's file."""
        path = record.position.get("file")
        if not isinstance(path, str) or path in self._header_probed:
            return None
        if len(self._header_probed) >= 1024:
            self._header_probed.clear()
        self._header_probed.add(path)
        try:
            with open(path, "rb") as fh:
                first = fh.readline(_HEADER_PROBE_BYTES)
        except OSError:
            return None
        text = text_of(first.rstrip(b"\n"))
        if text is None:
            return None
        self._learn_header(text.decode("ascii") if isinstance(text, bytes) else text)
        return self._csv_id_index

    def _rows_to_matrix(self, rows: list[list[Any]], ids: list[str], good: list[RawRecord],
                        rejections: list[Rejection], *, strict: bool
                        ) -> tuple[np.ndarray, list[str], list[RawRecord]]:
        """One numpy conversion for the batch; per-row fallback to find the culprits."""
        if not rows:
            return np.empty((0, self.dim)), ids, good
        if not strict:
            try:
                if self.format == "json":
                    # Without a dtype numpy refuses strings/None/nested lists (non-numeric
                    # kinds); booleans are caught by the byte probe that sets ``strict``.
                    x = np.array(rows)
                else:
                    x = np.array(rows, dtype=np.float64)
            except (ValueError, TypeError, OverflowError):
                pass
            else:
                if x.dtype.kind in "fi" and x.shape == (len(rows), self.dim):
                    return x.astype(np.float64, copy=False), ids, good
        keep: list[int] = []
        out: list[list[float]] = []
        for i, (row, record) in enumerate(zip(rows, good)):
            converted = self._convert_row(row, record, rejections)
            if converted is not None:
                out.append(converted)
                keep.append(i)
        x = np.array(out, dtype=np.float64).reshape(len(out), self.dim)
        return x, [ids[i] for i in keep], [good[i] for i in keep]

    def _convert_row(self, row: list[Any], record: RawRecord,
                     rejections: list[Rejection]) -> list[float] | None:
        out: list[float] = []
        for j, v in enumerate(row):
            t = type(v)
            try:
                if t is float:
                    out.append(v)
                elif t is int:
                    out.append(float(v))
                elif t is str and self.format == "csv":
                    out.append(float(v))
                else:
                    raise TypeError
            except OverflowError:
                rejections.append(reject(
                    RejectReason.MAGNITUDE,
                    f"value {j} = {quote(str(v))} exceeds max_abs_value={self.max_abs_value:g}",
                    record))
                return None
            except (TypeError, ValueError):
                shown = v if self.format == "csv" else json.dumps(v)
                rejections.append(reject(
                    RejectReason.UNPARSEABLE,
                    f"value {j} is not a number: {quote(shown)}", record))
                return None
        return out

    def _check_values(self, x: np.ndarray, ids: list[str], good: list[RawRecord],
                      rejections: list[Rejection]
                      ) -> tuple[np.ndarray, list[str], list[RawRecord]]:
        """Reject rows with NaN/Inf or absurd magnitude; cast to the output dtype."""
        if len(good) == 0:
            return np.empty((0, self.dim), dtype=self.dtype), [], []
        with np.errstate(invalid="ignore"):
            absx = np.abs(x)
            row_max = absx.max(axis=1)
        ok = row_max <= self.max_abs_value  # False for NaN, Inf and too large
        if ok.all():
            return np.ascontiguousarray(x, dtype=self.dtype), ids, good
        for i in np.flatnonzero(~ok):
            row = x[i]
            finite = np.isfinite(row)
            if not finite.all():
                j = int(np.flatnonzero(~finite)[0])
                rejections.append(reject(
                    RejectReason.NON_FINITE,
                    f"value {j} is {float(row[j])!r} (not finite) in {quote(good[i].value)}",
                    good[i]))
            else:
                j = int(np.argmax(absx[i]))
                rejections.append(reject(
                    RejectReason.MAGNITUDE,
                    f"value {j} = {float(row[j])!r} exceeds max_abs_value="
                    f"{self.max_abs_value:g} in {quote(good[i].value)}", good[i]))
        keep = np.flatnonzero(ok)
        kept_ids = [ids[i] for i in keep]
        kept_records = [good[i] for i in keep]
        return np.ascontiguousarray(x[keep], dtype=self.dtype), kept_ids, kept_records
