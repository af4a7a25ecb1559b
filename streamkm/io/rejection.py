"""Record rejection and id safety: what the dense and sparse decoders share.

A neutral module (no decoder imports it back), so :mod:`streamkm.io.decoding` and
:mod:`streamkm.io.decoding_sparse` both build on it without an import cycle.

Id safety: every id a sink sees is a string that encodes to UTF-8.

* An id **read from a record** (a JSON string with a lone surrogate escape such as
  ``"\\ud800"``, which is valid JSON syntax) is refused with reason ``invalid_id``: the
  producer sent an id that no UTF-8 output can carry, and rewriting it could make it equal
  to another record's id.
* An id **derived from a position** (``"path:offset"``) of a file whose name is not valid
  UTF-8 (Python holds the undecodable bytes as surrogate escapes) is made safe with
  :func:`safe_text`: each undecodable byte is written as ``\\xNN``. The record itself is
  fine, so it is kept.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

import msgspec

from streamkm.io.sources import OVERSIZED, TRUNCATED, UNDECODABLE_RECORD, RawRecord

__all__ = ["RejectReason", "Rejection", "DETAIL_MAX_CHARS", "QUOTE_MAX_BYTES", "quote", "reject",
           "safe_text", "position_id", "text_of", "encoding_rejection", "framing_rejection",
           "json_object", "json_record_id", "typed_json_decoder"]

DETAIL_MAX_CHARS = 200
QUOTE_MAX_BYTES = 80


class RejectReason(str, Enum):
    """Why a record was refused (also the ``reason`` label of the dead-letter counter)."""

    UNPARSEABLE = "unparseable"
    ENCODING = "encoding"
    WRONG_DIMENSION = "wrong_dimension"
    NON_FINITE = "non_finite"
    MAGNITUDE = "magnitude"
    OVERSIZED = "oversized"
    EMPTY = "empty"
    MISSING_FIELD = "missing_field"
    LENGTH_MISMATCH = "length_mismatch"
    INDEX_OUT_OF_RANGE = "index_out_of_range"
    UNSORTED_INDICES = "unsorted_indices"
    INVALID_ID = "invalid_id"
    #: The source's client library could not parse the record (Kafka: a header key that is
    #: not UTF-8, a record batch failing its CRC); skipped past, never retried.
    UNDECODABLE_RECORD = "undecodable_record"
    #: Accepted and learned, but its assignment could not be serialised/written by the sink
    #: (the runtime's second line of defence, see :class:`streamkm.io.sinks.SinkSet`).
    OUTPUT_ERROR = "output_error"


@dataclass(frozen=True, slots=True)
class Rejection:
    """A refused record: the reason, a human message quoting the bad value (at most about
    200 characters), and the raw record itself (for the dead-letter sink)."""

    reason: RejectReason
    detail: str
    record: RawRecord


def safe_text(text: str) -> str:
    """``text`` if it encodes to UTF-8, else a copy that does.

    Undecodable bytes that Python carries as surrogate escapes (file names, see
    :func:`os.fsdecode`) become ``\\xNN``; any other lone surrogate becomes ``\\udNNN``.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def position_id(position: dict[str, Any]) -> str:
    """An id derived from a record's position: ``"file:offset"`` for files,
    ``"topic:partition:offset"`` for Kafka, else the position values joined by ``":"``.
    Always encodable as UTF-8 (see :func:`safe_text`)."""
    if "file" in position:
        derived = f"{position['file']}:{position.get('offset')}"
    elif "topic" in position:
        derived = f"{position['topic']}:{position.get('partition')}:{position.get('offset')}"
    else:
        derived = ":".join(str(v) for v in position.values())
    return safe_text(derived)


def quote(value: bytes | str) -> str:
    """``repr`` of at most the first 80 bytes/characters of ``value``, marked if cut
    (``repr`` escapes lone surrogates, so a quote always encodes to UTF-8)."""
    if len(value) <= QUOTE_MAX_BYTES:
        return repr(value)
    return f"{value[:QUOTE_MAX_BYTES]!r}... ({len(value)} long)"


def _detail(text: str) -> str:
    text = safe_text(text)
    return text if len(text) <= DETAIL_MAX_CHARS else text[: DETAIL_MAX_CHARS - 3] + "..."


def reject(reason: RejectReason, detail: str, record: RawRecord) -> Rejection:
    """A :class:`Rejection` with ``detail`` cut to ``DETAIL_MAX_CHARS``."""
    return Rejection(reason, _detail(detail), record)


def text_of(value: bytes) -> str | bytes | None:
    """``value`` itself if ASCII (json/float accept it), its UTF-8 text, or None if invalid."""
    if value.isascii():
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def encoding_rejection(record: RawRecord) -> Rejection:
    """The ``encoding`` rejection of a record that is not valid UTF-8."""
    try:
        record.value.decode("utf-8")
    except UnicodeDecodeError as exc:
        return reject(RejectReason.ENCODING,
                      f"invalid UTF-8 at byte {exc.start}: {quote(record.value)}", record)
    raise AssertionError("unreachable")  # pragma: no cover


def framing_rejection(record: RawRecord) -> Rejection:
    """The rejection of a record the source flagged (oversized, truncated, other error)."""
    if record.error == OVERSIZED:
        size = record.position.get("length")
        size_text = f"{size} bytes" if size is not None else "over the size limit"
        return reject(RejectReason.OVERSIZED,
                      f"record of {size_text} skipped, starts with {quote(record.value)}",
                      record)
    if record.error == TRUNCATED:
        return reject(RejectReason.UNPARSEABLE,
                      f"incomplete last record of a rotated or deleted file: {quote(record.value)}",
                      record)
    if record.error == UNDECODABLE_RECORD:
        return reject(RejectReason.UNDECODABLE_RECORD,
                      f"the client cannot parse it: {record.detail}", record)
    return reject(RejectReason.UNPARSEABLE,
                  f"source error {record.error!r}: {quote(record.value)}", record)


def json_object(record: RawRecord, loads: Any) -> dict[str, Any] | Rejection:
    """The JSON object a record holds, or why it holds none (encoding, empty, unparseable)."""
    value = record.value
    text = text_of(value)
    if text is None:
        return encoding_rejection(record)
    if not text.strip():
        return reject(RejectReason.EMPTY, f"empty record {quote(value)}", record)
    if isinstance(text, bytes):
        text = text.decode("ascii")
    try:
        obj = loads(text)
    except ValueError as exc:
        return reject(RejectReason.UNPARSEABLE, f"invalid JSON ({exc}): {quote(value)}", record)
    except RecursionError:
        return reject(RejectReason.UNPARSEABLE, f"JSON nested too deeply: {quote(value)}",
                      record)
    if type(obj) is not dict:
        return reject(RejectReason.UNPARSEABLE,
                      f"expected a JSON object, got {type(obj).__name__}: {quote(value)}",
                      record)
    return obj


def json_record_id(raw_id: Any, id_field: str, record: RawRecord) -> str | Rejection:
    """The id of a decoded JSON record from the value of its ``id_field`` (``None`` when
    absent): a string or an integer is the id, ``None`` gives the position's id.

    A string id that does not encode to UTF-8 (a lone surrogate escape) is refused as
    ``invalid_id``."""
    if raw_id is None:
        return position_id(record.position)
    if type(raw_id) is str:
        if raw_id.isascii() or safe_text(raw_id) is raw_id:
            return raw_id
        return reject(RejectReason.INVALID_ID,
                      f"field {id_field!r} is not valid Unicode (lone surrogate): "
                      f"{quote(raw_id)} in {quote(record.value)}", record)
    if type(raw_id) is int:
        return str(raw_id)
    return reject(
        RejectReason.UNPARSEABLE,
        f"field {id_field!r} must be a string or an integer, got {quote(json.dumps(raw_id))}",
        record)


@functools.lru_cache(maxsize=64)
def typed_json_decoder(id_field: str, fields: tuple[tuple[str, str, Any], ...]
                       ) -> msgspec.json.Decoder:
    """A msgspec decoder of the JSON objects whose fields have exactly the expected types.

    ``fields`` holds ``(attribute, JSON field name, type)``; the optional ``id_field``
    (``str | int | None``, default ``None``) becomes the attribute ``id``. Other fields are
    ignored. The decoder is the fast path: any record it refuses (bad syntax, wrong type,
    ``NaN`` literal, lone surrogate, out-of-range number, ...) goes through
    :func:`json_object` and the per-field checks, which name the exact reason.
    """
    names = {attr: name for attr, name, _ in fields}
    names["id"] = id_field
    spec: list[Any] = [(attr, kind) for attr, _, kind in fields]
    spec.append(("id", str | int | None, None))
    return msgspec.json.Decoder(msgspec.defstruct("TypedRecord", spec, rename=names))
