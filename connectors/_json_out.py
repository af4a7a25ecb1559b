"""JSON serialisation shared by the file and Kafka sinks (msgspec; ids made UTF-8-safe).

msgspec encodes an assignment batch about 3x faster than f-strings with
``json.encoder.encode_basestring`` and a Kafka message about 9x faster than
``json.dumps`` (``benchmarks/bench_decoding.py``, sinks rows). Non-finite floats are
written as ``null`` (JSON has no NaN). A string that cannot be encoded as UTF-8 (a lone
surrogate that reached a sink despite the decoder's checks, e.g. in an event built from a
file name) is written through :func:`streamkm.io.decoding.safe_text` instead of failing the
sink.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from streamkm.exceptions import OutputRecordError
from streamkm.io.decoding import safe_text
from streamkm.sinks import AssignmentNovelty

__all__ = ["Assignment", "assignments", "encode", "encode_lines"]


class Assignment(msgspec.Struct):
    """One output line/message: ``{"id", "cluster", "distance", "sq_distance", "step"}``
    (``distance`` is the kernel distance to the cluster's center, ``sq_distance`` its
    square), then ``"novelty", "outlier", "second_cluster", "margin"`` when the model scored
    the batch (``docs/service.md``, assignment outputs)."""

    id: Any
    cluster: int
    distance: float
    sq_distance: float
    step: int
    novelty: float | msgspec.UnsetType = msgspec.UNSET
    outlier: bool | msgspec.UnsetType = msgspec.UNSET
    second_cluster: int | msgspec.UnsetType = msgspec.UNSET
    margin: float | msgspec.UnsetType = msgspec.UNSET


def _default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


_encoder = msgspec.json.Encoder(enc_hook=_default)


def _made_safe(value: Any) -> Any:
    """A copy of ``value`` whose strings (keys too) all encode to UTF-8."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {_made_safe(k): _made_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_made_safe(v) for v in value]
    if isinstance(value, Assignment):
        return msgspec.structs.replace(value, id=_made_safe(value.id))
    return value


def _unencodable(exc: Exception) -> OutputRecordError:
    return OutputRecordError(f"cannot serialise the entry as JSON: {safe_text(str(exc))}")


def encode(value: Any) -> bytes:
    """``value`` as compact JSON bytes.

    Raises
    ------
    OutputRecordError
        ``value`` cannot be serialised (a record-level error: never retried).
    """
    try:
        try:
            return _encoder.encode(value)
        except UnicodeEncodeError:
            return _encoder.encode(_made_safe(value))
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError) as exc:
        raise _unencodable(exc) from exc


def encode_lines(values: list[Any]) -> bytes:
    """``values`` as JSON lines (each followed by a newline); raises
    :class:`~streamkm.exceptions.OutputRecordError` as :func:`encode` does."""
    try:
        try:
            return _encoder.encode_lines(values)
        except UnicodeEncodeError:
            return _encoder.encode_lines([_made_safe(v) for v in values])
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError) as exc:
        raise _unencodable(exc) from exc


def assignments(ids: list[Any], clusters: Any, sq_distances: Any, step: int,
                novelty: AssignmentNovelty | None = None) -> list[Assignment]:
    """The assignments of one batch, in order (with the novelty fields when given)."""
    step = int(step)
    sq = np.asarray(sq_distances, dtype=np.float64)
    distance = np.sqrt(np.maximum(sq, 0.0)).tolist()
    base = zip(ids, np.asarray(clusters).tolist(), distance, sq.tolist())
    if novelty is None:
        return [Assignment(i, c, d, s, step) for i, c, d, s in base]
    extra = zip(novelty.novelty.tolist(), novelty.outliers.tolist(),
                novelty.second_cluster_ids.tolist(), novelty.margins.tolist())
    return [Assignment(i, c, d, s, step, p, o, c2, m)
            for (i, c, d, s), (p, o, c2, m) in zip(base, extra)]
