"""Ids and text from outside are safe for every sink; the fast JSON path decides as the slow one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkm.io.decoding import RecordDecoder, RejectReason, position_id, safe_text
import streamkm.io.decoding_sparse
from streamkm.sources import RawRecord
from streamkm_connectors.file_sinks import AssignmentFileSink, DeadLetterFileSink, EventFileSink

pytestmark = pytest.mark.unit

NOT_UTF8_NAME = os.fsdecode(b"/data/in-\xff.jsonl")


def record(value: bytes, offset: int = 0, file: str = "in.jsonl") -> RawRecord:
    return RawRecord(value=value, key=None, position={"file": file, "offset": offset})


@pytest.mark.parametrize("fmt, value", [
    ("json", b'{"id": "\\ud800", "x": [1, 2]}'),
    ("json", b'{"id": "ok\\udfff", "x": [1, 2]}'),
    ("json_sparse", b'{"id": "\\udc80", "indices": [0], "values": [1]}'),
])
def test_lone_surrogate_id_is_dead_lettered_as_invalid_id(fmt: str, value: bytes) -> None:
    result = RecordDecoder(format=fmt, dim=2).decode(record(value))
    assert result.reason is RejectReason.INVALID_ID
    assert "\\ud" in result.detail and result.detail.encode("utf-8")


def test_derived_id_of_a_file_name_that_is_not_utf8_is_escaped(tmp_path: Path) -> None:
    decoder = RecordDecoder(format="json", dim=2)
    result = decoder.decode(record(b'{"x": [1, 2]}', offset=7, file=NOT_UTF8_NAME))
    assert result.id == "/data/in-\\xff.jsonl:7"
    sink = AssignmentFileSink(tmp_path / "a.jsonl")
    sink.write_assignments([result.id], np.array([0]), np.array([0.25]), 1)
    sink.close()
    line = json.loads((tmp_path / "a.jsonl").read_bytes().decode("utf-8"))
    assert line == {"id": "/data/in-\\xff.jsonl:7", "cluster": 0, "distance": 0.5,
                    "sq_distance": 0.25, "step": 1}


def test_position_id_and_safe_text() -> None:
    assert position_id({"file": NOT_UTF8_NAME, "offset": 3}) == "/data/in-\\xff.jsonl:3"
    assert safe_text("données") == "données"
    assert safe_text("a\ud800b") == "a\\ud800b"


def test_sinks_survive_text_that_is_not_utf8(tmp_path: Path) -> None:
    """The second line of defence: a sink given unencodable text escapes it."""
    assignments = AssignmentFileSink(tmp_path / "a.jsonl")
    assignments.write_assignments(["\ud800"], np.array([1]), np.array([1.0]), 2)
    events = EventFileSink(tmp_path / "e.jsonl")
    events.write_event({"event": "file_rotated", "path": NOT_UTF8_NAME})
    dead = DeadLetterFileSink(tmp_path / "d.jsonl")
    dead.write_dead_letter(b"\xff", "encoding", "bad", {"file": NOT_UTF8_NAME, "offset": 1})
    for sink in (assignments, events, dead):
        sink.close()
    assert json.loads((tmp_path / "a.jsonl").read_bytes().decode("utf-8"))["id"] == "\\ud800"
    assert json.loads((tmp_path / "e.jsonl").read_bytes().decode("utf-8"))["path"] == \
        "/data/in-\\xff.jsonl"
    entry = json.loads((tmp_path / "d.jsonl").read_bytes().decode("utf-8"))
    assert entry["position"]["file"] == "/data/in-\\xff.jsonl" and entry["raw_base64"] == "/w=="


def test_file_assignments_carry_the_distance(tmp_path: Path) -> None:
    sink = AssignmentFileSink(tmp_path / "a.jsonl")
    sink.write_assignments(["a", 5], np.array([2, 0]), np.array([4.0, -1e-12]), 9)
    sink.close()
    lines = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert lines == [{"id": "a", "cluster": 2, "distance": 2.0, "sq_distance": 4.0, "step": 9},
                     {"id": 5, "cluster": 0, "distance": 0.0, "sq_distance": -1e-12, "step": 9}]


class _RefuseAll:
    """A typed decoder that refuses everything: forces the stdlib (slow) path."""

    def decode(self, value: bytes) -> Any:
        raise msgspec.DecodeError("forced slow path")


def _outcome(decoder: RecordDecoder, records: list[RawRecord]) -> Any:
    x, ids, _, rejections = decoder.decode_many(records)
    x = x.toarray() if hasattr(x, "toarray") else x
    return x.tolist(), ids, [(r.reason, r.detail, r.record.position["offset"])
                             for r in rejections]


values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**25, 10**25),
                   st.booleans(), st.none(), st.text(max_size=3))
objects = st.fixed_dictionaries({}, optional={
    "id": st.one_of(st.text(alphabet=st.characters(codec=None), max_size=6), st.integers(),
                    st.none(), st.floats(), st.booleans()),
    "x": st.one_of(st.lists(values, min_size=2, max_size=3),
                   st.lists(st.floats(-1e300, 1e300), min_size=3, max_size=3), values),
    "indices": st.lists(st.one_of(st.integers(-1, 4), values), max_size=3),
    "values": st.lists(values, max_size=3),
    "note": st.text(alphabet=st.characters(codec=None), max_size=3),
})


@settings(max_examples=300, deadline=None)
@given(batch=st.lists(st.tuples(objects, st.booleans()), min_size=1, max_size=8),
       fmt=st.sampled_from(["json", "json_sparse"]))
def test_fast_path_decides_exactly_as_the_stdlib_path(batch: list[tuple[dict[str, Any], bool]],
                                                      fmt: str) -> None:
    records = [record(json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"),
                      offset=i) for i, (obj, ascii_only) in enumerate(batch)]
    fast = RecordDecoder(format=fmt, dim=3)
    slow = RecordDecoder(format=fmt, dim=3)
    slow._typed_dense = _RefuseAll()
    original = streamkm.io.decoding_sparse.typed_json_decoder
    expected_fast = _outcome(fast, records)
    streamkm.io.decoding_sparse.typed_json_decoder = lambda *a: _RefuseAll()
    try:
        expected_slow = _outcome(slow, records)
    finally:
        streamkm.io.decoding_sparse.typed_json_decoder = original
    assert expected_fast == expected_slow
