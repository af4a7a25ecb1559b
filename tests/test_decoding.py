"""Record decoding and validation: a corpus of bad records, each with its reason."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkm.exceptions import ParameterError
from streamkm.io.decoding import (
    DecodedRecord,
    RecordDecoder,
    RejectReason,
    Rejection,
    position_id,
)
from streamkm.sources import OVERSIZED, TRUNCATED, RawRecord
from streamkm_connectors.file_tailer import FileTailSource

pytestmark = pytest.mark.unit


def raw(value: bytes, offset: int = 1, file: str = "in.jsonl", error: str | None = None) -> RawRecord:
    return RawRecord(value, None, {"partition": "p", "file": file, "offset": offset}, error)


def test_position_id():
    assert position_id({"partition": "p", "file": "a.log", "offset": 5}) == "a.log:5"
    assert position_id({"topic": "t", "partition": 2, "offset": 9}) == "t:2:9"
    assert position_id({"partition": 1, "offset": 3}) == "1:3"


@pytest.mark.parametrize("kwargs, match", [
    ({"format": "xml", "dim": 2}, "'xml'"),
    ({"format": "json", "dim": 0}, "dim"),
    ({"format": "json", "dim": 2, "max_abs_value": -1}, "-1"),
    ({"format": "json", "dim": 2, "dtype": np.int32}, "dtype"),
    ({"format": "csv", "dim": 2, "csv_id_column": "id"}, "csv_header"),
    ({"format": "csv", "dim": 2, "csv_id_column": 7}, "7"),
    ({"format": "json", "dim": 2, "id_field": "x"}, "different"),
])
def test_bad_parameters_quote_the_value(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        RecordDecoder(**kwargs)


def test_json_corpus_each_bad_record_has_its_reason():
    dec = RecordDecoder(format="json", dim=3)
    big = b'{"id": "big", "x": [' + b"1," * (5 * 1024 * 1024) + b'1]}'
    corpus = [
        (b'{"id": "ok1", "x": [1, 2.5, -3]}', None, None),
        (b'{"id": "m", "x": [1, 2,', RejectReason.UNPARSEABLE, "[1, 2,"),
        (b'{"id": "d", "x": [1, 2]}', RejectReason.WRONG_DIMENSION, "2 values"),
        (b'{"id": "n", "x": [1, NaN, 2]}', RejectReason.NON_FINITE, "nan"),
        (b'{"id": "i", "x": [1, -Infinity, 2]}', RejectReason.NON_FINITE, "inf"),
        (b'{"id": "o", "x": [1, 1e400, 2]}', RejectReason.NON_FINITE, "inf"),
        (b'{"id": "h", "x": [1, 1e300, 2]}', RejectReason.MAGNITUDE, "1e+300"),
        (b'\x00\x01\x9c\xff garbage \xfe', RejectReason.ENCODING, "\\x9c"),
        (b"\x07\x01binary\x02", RejectReason.UNPARSEABLE, "binary"),
        (b"", RejectReason.EMPTY, "empty"),
        (b"   \r", RejectReason.EMPTY, "empty"),
        (big, RejectReason.WRONG_DIMENSION, "5242881 values"),
        (b'{"id": "\xc3\x28", "x": [1, 2, 3]}', RejectReason.ENCODING, "\\xc3"),
        (b'{"id": "nox"}', RejectReason.MISSING_FIELD, "'x'"),
        (b'{"id": "s", "x": [1, "2", 3]}', RejectReason.UNPARSEABLE, '"2"'),
        (b'{"id": "b", "x": [1, true, 3]}', RejectReason.UNPARSEABLE, "true"),
        (b'{"id": "z", "x": [1, null, 3]}', RejectReason.UNPARSEABLE, "null"),
        (b'{"id": "l", "x": [1, [2], 3]}', RejectReason.UNPARSEABLE, "[2]"),
        (b'{"id": "xs", "x": "1,2,3"}', RejectReason.UNPARSEABLE, "1,2,3"),
        (b'{"id": {"a": 1}, "x": [1, 2, 3]}', RejectReason.UNPARSEABLE, "'id'"),
        (b"[1, 2, 3]", RejectReason.UNPARSEABLE, "list"),
        (b"[" * 100000, RejectReason.UNPARSEABLE, "[[["),
        (b'{"id": "hugeint", "x": [1, ' + b"9" * 400 + b", 3]}", RejectReason.MAGNITUDE, "999"),
        (b"x" * 2000, RejectReason.OVERSIZED, "xxx"),  # flagged by the tailer
        (b'{"id": 17, "x": [4, 5, 6]}\r', None, None),
        (b'{"x": [7, 8, 9]}', None, None),
        (b'{"id": "\xc3\xa9t\xc3\xa9", "x": [1e-300, 0, 1e12]}', None, None),
    ]
    records = [raw(v, offset=10 * i, error=OVERSIZED if r is RejectReason.OVERSIZED else None)
               for i, (v, r, _) in enumerate(corpus)]
    x, ids, accepted, rejections = dec.decode_many(records)
    assert ids == ["ok1", "17", "in.jsonl:250", "été"]
    np.testing.assert_array_equal(x, [[1, 2.5, -3], [4, 5, 6], [7, 8, 9], [1e-300, 0, 1e12]])
    assert x.dtype == np.float64 and x.flags.c_contiguous
    assert [r.value for r in accepted] == [v for v, r, _ in corpus if r is None]
    bad = [(i, r, m) for i, (_, r, m) in enumerate(corpus) if r is not None]
    assert len(rejections) == len(bad)
    for rej, (i, reason, quote) in zip(rejections, bad):
        assert isinstance(rej, Rejection)
        assert rej.record is records[i]
        assert rej.reason is reason, (i, rej.detail)
        assert quote in rej.detail, (i, rej.detail)
        assert len(rej.detail) <= 210
    # The single-record path agrees with the batch path.
    for record, (_, reason, _) in zip(records, corpus):
        result = dec.decode(record)
        if reason is None:
            assert isinstance(result, DecodedRecord)
        else:
            assert isinstance(result, Rejection) and result.reason is reason


def test_json_field_names_and_float32_output():
    dec = RecordDecoder(format="json", dim=2, id_field="key", x_field="features",
                        dtype=np.float32)
    result = dec.decode(raw(b'{"key": "k", "features": [0.5, 1]}'))
    assert isinstance(result, DecodedRecord) and result.id == "k"
    assert result.x.dtype == np.float32 and result.x.tolist() == [0.5, 1.0]
    assert dec.decode(raw(b'{"id": "k", "x": [0.5, 1]}')).reason is RejectReason.MISSING_FIELD


def test_oversized_and_truncated_framing_errors():
    dec = RecordDecoder(format="json", dim=2)
    over = RawRecord(b"{" + b"1" * 1023, None, {"file": "f", "offset": 3, "length": 10_000_001},
                     OVERSIZED)
    rej = dec.decode(over)
    assert rej.reason is RejectReason.OVERSIZED and "10000001 bytes" in rej.detail
    trunc = RawRecord(b'{"x": [1', None, {"file": "f", "offset": 9, "length": 8}, TRUNCATED)
    rej = dec.decode(trunc)
    assert rej.reason is RejectReason.UNPARSEABLE and "incomplete" in rej.detail
    limited = RecordDecoder(format="json", dim=2, max_record_bytes=10)
    assert limited.decode(raw(b'{"x": [1, 2]}')).reason is RejectReason.OVERSIZED


def test_csv_without_header():
    dec = RecordDecoder(format="csv", dim=3)
    x, ids, _, rej = dec.decode_many([
        raw(b"1,2,3", 0, "a.csv"), raw(b" 4 , 5e0 ,6\r", 6, "a.csv"), raw(b"1,2", 20, "a.csv"),
        raw(b"1,abc,3", 30, "a.csv"), raw(b"1,nan,3", 40, "a.csv"), raw(b"", 50, "a.csv"),
        raw(b"1,2,1e13", 51, "a.csv"), raw(b"\xff,1,2", 60, "a.csv"),
    ])
    np.testing.assert_array_equal(x, [[1, 2, 3], [4, 5, 6]])
    assert ids == ["a.csv:0", "a.csv:6"]
    assert [(r.reason, r.record.position["offset"]) for r in rej] == [
        (RejectReason.WRONG_DIMENSION, 20), (RejectReason.UNPARSEABLE, 30),
        (RejectReason.NON_FINITE, 40), (RejectReason.EMPTY, 50), (RejectReason.MAGNITUDE, 51),
        (RejectReason.ENCODING, 60)]
    assert "'abc'" in rej[1].detail and "10000000000000.0" in rej[4].detail


def test_csv_header_with_named_id_column(tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(b"a,name,b\n1.5,r1,2\n3,r2,4\n5,,6\n")
    dec = RecordDecoder(format="csv", dim=2, csv_header=True, csv_id_column="name")
    part = FileTailSource([str(path)], poll_interval_s=0).build_part(str(path), None)
    records = part.next_batch(10)
    assert len(records) == 4
    assert dec.is_header(records[0]) and dec.decode(records[0]) is None
    x, ids, accepted, rej = dec.decode_many(records)
    assert rej == [] and ids == ["r1", "r2", f"{path}:25"]
    np.testing.assert_array_equal(x, [[1.5, 2], [3, 4], [5, 6]])
    # A fresh decoder resumed mid-file reads the header from the file itself.
    fresh = RecordDecoder(format="csv", dim=2, csv_header=True, csv_id_column="name")
    _, ids2, _, _ = fresh.decode_many(records[2:])
    assert ids2 == ["r2", f"{path}:25"]


def test_csv_header_index_id_column_and_header_only_at_offset_zero():
    dec = RecordDecoder(format="csv", dim=2, csv_header=True, csv_id_column=-1)
    x, ids, _, rej = dec.decode_many([
        raw(b"a,b,id", 0, "f.csv"), raw(b"1,2,x1", 7, "f.csv"),
        raw(b"a,b,id", 0, "g.csv"), raw(b"3,4,x2", 7, "g.csv"),
        raw(b"a,b,id", 14, "g.csv"),  # a header line in the middle: not skipped
    ])
    assert ids == ["x1", "x2"] and x.tolist() == [[1, 2], [3, 4]]
    assert [r.reason for r in rej] == [RejectReason.UNPARSEABLE]


def test_float32_fixed_records():
    dec = RecordDecoder(format="float32", dim=4)
    rows = np.array([[1, 2, 3, 4], [0.5, -0.25, 1e-3, 7]], dtype="<f4")
    records = [raw(rows[0].tobytes(), 0, "f.bin"), raw(rows[1].tobytes(), 16, "f.bin"),
               raw(struct.pack("<4f", 1, float("nan"), 2, 3), 32, "f.bin"),
               raw(struct.pack("<4f", 1, 2e30, 2, 3), 48, "f.bin"),
               raw(b"\x00" * 15, 64, "f.bin"), raw(b"", 79, "f.bin"),
               raw(rows[0].tobytes(), 79, "f.bin")]
    x, ids, accepted, rej = dec.decode_many(records)
    np.testing.assert_array_equal(x, np.vstack([rows, rows[0]]).astype(np.float64))
    assert ids == ["f.bin:0", "f.bin:16", "f.bin:79"]
    assert [r.reason for r in rej] == [RejectReason.NON_FINITE, RejectReason.MAGNITUDE,
                                       RejectReason.WRONG_DIMENSION, RejectReason.EMPTY]
    assert "15 bytes" in rej[2].detail


def test_float32_from_the_tailer(tmp_path):
    path = tmp_path / "x.bin"
    data = np.random.default_rng(0).normal(size=(100, 8)).astype("<f4")
    path.write_bytes(data.tobytes() + b"\x01\x02")  # plus a partial record
    part = FileTailSource([str(path)], framing="fixed", record_size=32,
                          poll_interval_s=0).build_part(str(path), None)
    records = part.next_batch(1000)
    x, ids, _, rej = RecordDecoder(format="float32", dim=8, dtype=np.float32).decode_many(records)
    assert rej == [] and x.dtype == np.float32 and len(ids) == 100
    np.testing.assert_array_equal(x, data)


def test_empty_batch_shapes():
    for fmt in ("json", "csv", "float32"):
        x, ids, acc, rej = RecordDecoder(format=fmt, dim=5).decode_many([])
        assert x.shape == (0, 5) and ids == acc == rej == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=3, max_size=3),
    st.lists(st.floats(-1e6, 1e6), min_size=0, max_size=5),
    st.binary(max_size=40)), max_size=30))
def test_property_every_record_accepted_or_rejected_once(items):
    dec = RecordDecoder(format="json", dim=3)
    records = []
    for i, item in enumerate(items):
        if isinstance(item, bytes):
            value = item
        else:
            value = json.dumps({"id": f"r{i}", "x": item}).encode()
        records.append(raw(value, offset=i))
    x, ids, accepted, rej = dec.decode_many(records)
    assert x.shape == (len(ids), 3) and len(accepted) == len(ids)
    assert len(accepted) + len(rej) == len(records)
    order = [r.position["offset"] for r in accepted]
    assert order == sorted(order)
    assert np.isfinite(x).all() and (np.abs(x) <= 1e12).all()
    for rec, row in zip(accepted, x):
        item = items[rec.position["offset"]]
        if not isinstance(item, bytes):
            np.testing.assert_array_equal(row, item)
