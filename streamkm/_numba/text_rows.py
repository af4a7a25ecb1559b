"""Parsing a block of text records (JSON objects, CSV rows) into a float64 matrix.

The records are ``data[starts[r]:ends[r]]``. Each kernel writes record ``r``'s features into
row ``r`` of a preallocated ``(n, dim)`` array and sets ``ok[r]``; a record it cannot take
whole (any deviation from the common shape below, a number :func:`parse_decimal` refuses,
the wrong count of values) gets ``ok[r] = False`` and its row is left undefined: the caller
decodes those records with the general decoder, which names the reason.

JSON: an object whose keys are exactly the feature key and, optionally, the id key (each
once, in any order, no escapes in the keys); the features an array of JSON numbers; the id
an ASCII string without escapes or control characters, a canonical integer (not ``-0``) or
``null``. ``id_kind[r]`` is 0 for no id / ``null``, 1 for a string (its characters are
``data[id_start[r]:id_end[r]]``), 2 for an integer (its digits, likewise).

CSV: ``dim`` numbers separated by commas (the CSV field grammar of
:func:`~streamkm._numba.decimal.parse_decimal`), trailing carriage returns ignored; with an
id column (``id_column >= 0``) that field is one more column, located like the JSON id
(``id_kind`` 1) and taken as text by the caller.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streamkm._numba.decimal import parse_decimal

__all__ = ["parse_json_rows", "parse_csv_rows"]


@njit(cache=True, nogil=True, inline="always")
def _skip_ws(buf: np.ndarray, i: int, end: int) -> int:
    while i < end and (buf[i] == 32 or buf[i] == 9 or buf[i] == 13 or buf[i] == 10):
        i += 1
    return i


@njit(cache=True, nogil=True, inline="always")
def _string_end(buf: np.ndarray, i: int, end: int) -> int:
    """Index of the closing quote of the string whose first character is ``buf[i]``, or -1
    if it holds an escape, a control character or a non-ASCII byte (or never closes)."""
    while i < end:
        c = buf[i]
        if c == 34:  # '"'
            return i
        if c == 92 or c < 32 or c >= 128:
            return -1
        i += 1
    return -1


@njit(cache=True, nogil=True, inline="always")
def _same(buf: np.ndarray, i: int, j: int, key: np.ndarray) -> bool:
    if j - i != key.shape[0]:
        return False
    for k in range(key.shape[0]):
        if buf[i + k] != key[k]:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def _json_row(buf: np.ndarray, i: int, end: int, x_key: np.ndarray, id_key: np.ndarray,
              row: np.ndarray, spans: np.ndarray) -> int:
    """One JSON record into ``row``; the id's (kind, start, end) into ``spans``. Returns 1
    if taken, 0 if not."""
    dim = row.shape[0]
    spans[0] = 0
    i = _skip_ws(buf, i, end)
    if i >= end or buf[i] != 123:  # '{'
        return 0
    i = _skip_ws(buf, i + 1, end)
    seen_x = False
    seen_id = False
    while True:
        if i >= end or buf[i] != 34:
            return 0
        key_end = _string_end(buf, i + 1, end)
        if key_end < 0:
            return 0
        is_x = _same(buf, i + 1, key_end, x_key)
        is_id = not is_x and _same(buf, i + 1, key_end, id_key)
        if not (is_x or is_id) or (is_x and seen_x) or (is_id and seen_id):
            return 0
        i = _skip_ws(buf, key_end + 1, end)
        if i >= end or buf[i] != 58:  # ':'
            return 0
        i = _skip_ws(buf, i + 1, end)
        if i >= end:
            return 0
        if is_x:
            seen_x = True
            if buf[i] != 91:  # '['
                return 0
            i = _skip_ws(buf, i + 1, end)
            count = 0
            if i < end and buf[i] == 93:  # ']'
                i += 1
            else:
                while True:
                    if count == dim:
                        return 0
                    value, i, ok = parse_decimal(buf, i, end, True)
                    if not ok:
                        return 0
                    row[count] = value
                    count += 1
                    i = _skip_ws(buf, i, end)
                    if i < end and buf[i] == 44:  # ','
                        i = _skip_ws(buf, i + 1, end)
                    elif i < end and buf[i] == 93:
                        i += 1
                        break
                    else:
                        return 0
            if count != dim:
                return 0
        else:
            seen_id = True
            c = buf[i]
            if c == 34:
                close = _string_end(buf, i + 1, end)
                if close < 0:
                    return 0
                spans[0], spans[1], spans[2] = 1, i + 1, close
                i = close + 1
            elif c == 110:  # null
                if (i + 4 > end or buf[i + 1] != 117 or buf[i + 2] != 108
                        or buf[i + 3] != 108):
                    return 0
                i += 4
            else:
                start = i
                if c == 45:  # '-'
                    i += 1
                digits = i
                while i < end and 48 <= buf[i] <= 57:
                    i += 1
                if i == digits or (buf[digits] == 48 and (i - digits > 1 or digits > start)):
                    return 0  # no digits, a leading zero, or -0
                if i < end and (buf[i] == 46 or buf[i] == 101 or buf[i] == 69):
                    return 0  # a fractional id: the general decoder refuses it
                spans[0], spans[1], spans[2] = 2, start, i
        i = _skip_ws(buf, i, end)
        if i < end and buf[i] == 44:
            i = _skip_ws(buf, i + 1, end)
            continue
        if i < end and buf[i] == 125:  # '}'
            i = _skip_ws(buf, i + 1, end)
            break
        return 0
    return 1 if seen_x and i == end else 0


@njit(cache=True, nogil=True)
def parse_json_rows(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                    x_key: np.ndarray, id_key: np.ndarray, out: np.ndarray,
                    ok: np.ndarray, ids: np.ndarray) -> int:
    """Parse JSON records into ``out`` (n, dim); ``ok`` (n,) bool; ``ids`` (n, 3) int64
    (kind, start, end). Returns the count of records taken."""
    taken = 0
    for r in range(starts.shape[0]):
        got = _json_row(buf, starts[r], ends[r], x_key, id_key, out[r], ids[r])
        ok[r] = got == 1
        taken += got
    return taken


@njit(cache=True, nogil=True, inline="always")
def _csv_row(buf: np.ndarray, i: int, end: int, id_column: int, row: np.ndarray,
             spans: np.ndarray) -> int:
    dim = row.shape[0]
    while end > i and buf[end - 1] == 13:  # trailing '\r'
        end -= 1
    n_columns = dim + 1 if id_column >= 0 else dim
    spans[0] = 0
    count = 0
    for column in range(n_columns):
        if column:
            if i >= end or buf[i] != 44:
                return 0
            i += 1
        if column == id_column:
            start = i
            while i < end and buf[i] != 44:
                if buf[i] >= 128:
                    return 0
                i += 1
            spans[0], spans[1], spans[2] = 1, start, i
            continue
        value, i, ok = parse_decimal(buf, i, end, False)
        if not ok:
            return 0
        row[count] = value
        count += 1
    return 1 if i == end else 0


@njit(cache=True, nogil=True)
def parse_csv_rows(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, id_column: int,
                   out: np.ndarray, ok: np.ndarray, ids: np.ndarray) -> int:
    """Parse CSV rows into ``out`` (n, dim); ``id_column`` < 0: no id column. Same outputs
    as :func:`parse_json_rows`."""
    taken = 0
    for r in range(starts.shape[0]):
        got = _csv_row(buf, starts[r], ends[r], id_column, out[r], ids[r])
        ok[r] = got == 1
        taken += got
    return taken
