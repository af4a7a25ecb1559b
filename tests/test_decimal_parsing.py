"""The numba decimal parser gives Python's ``float()`` bit for bit for every number it
accepts, refuses what is not a number of its grammar, and the row kernels parse JSON and
CSV records as the plain-Python reference does."""

from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkm._numba.decimal import parse_decimal
from streamkm._numba.text_rows import parse_csv_rows, parse_json_rows

pytestmark = pytest.mark.unit


def parse(text: str | bytes, *, json_grammar: bool = True) -> tuple[float, int, bool]:
    data = text.encode() if isinstance(text, str) else text
    buf = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(0, dtype=np.uint8)
    return parse_decimal(buf, 0, len(data), json_grammar)


def bits(value: float) -> bytes:
    return struct.pack("<d", value)


def assert_float_or_refused(text: str, *, json_grammar: bool = True) -> bool:
    """The parse of ``text`` is ``float(text)`` exactly (and consumed all of it), or refused;
    returns whether it was accepted."""
    value, end, ok = parse(text, json_grammar=json_grammar)
    if ok:
        assert end == len(text), text
        expected = reference(text, json_grammar=json_grammar)
        assert bits(value) == bits(expected), (text, value, expected)
    return ok


def reference(text: str, *, json_grammar: bool) -> float:
    """``float(text)``; a JSON integer literal is an integer first (``-0`` is 0)."""
    if json_grammar and not any(c in text for c in ".eE"):
        return float(int(text))
    return float(text)


digits = st.text(alphabet="0123456789", min_size=1, max_size=24)


@st.composite
def decimal_strings(draw: st.DrawFn) -> str:
    """Signs, many digits, leading and trailing zeros, fractions and exponents."""
    sign = draw(st.sampled_from(["", "-"]))
    whole = draw(digits).lstrip("0") or "0"
    text = sign + whole
    if draw(st.booleans()):
        text += "." + draw(digits)
    if draw(st.booleans()):
        text += draw(st.sampled_from("eE")) + draw(st.sampled_from(["", "+", "-"])) + str(
            draw(st.integers(0, 400)))
    return text


@settings(max_examples=800, deadline=None)
@given(decimal_strings())
def test_a_decimal_string_converts_exactly_as_float_does(text: str) -> None:
    assert_float_or_refused(text)


@settings(max_examples=1000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_shortest_float64_repr_converts_back_to_itself(x: float) -> None:
    text = repr(x)
    value, end, ok = parse(text)
    if not ok:  # subnormals are refused, nothing else that repr writes
        assert 0 < abs(x) < 2.2250738585072014e-308
        return
    assert end == len(text) and bits(value) == bits(x)


@settings(max_examples=1000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_float32_values_printed_in_full_are_all_accepted(x: float) -> None:
    # float32 data written by json.dumps: 17 significant digits, many exact dyadic values
    if 0 < abs(x) < 1e-30:
        return
    text = repr(x)
    value, end, ok = parse(text)
    assert ok and end == len(text) and bits(value) == bits(x), text


@pytest.mark.parametrize("text", [
    "0", "-0.0", "0.0e0", "1", "9007199254740993", "9007199254740992.5", "2.5e-324",
    "1.7976931348623157e308", "1.7976931348623159e308", "4.9406564584124654e-324",
    "2.2250738585072011e-308", "123456789012345678", "1234567890123456789",
    "12345678901234567890", "0.1", "0.30000000000000004", "1e22", "1e23", "8.5e-15",
    "1.0288543701171875", "-0.039646148681640625", "1e-350", "1e400", "7.2057594037927933e16",
])
def test_edge_cases_are_exact_or_refused(text: str) -> None:
    assert_float_or_refused(text)


def test_an_integer_literal_minus_zero_is_plus_zero_in_json_and_minus_zero_in_csv() -> None:
    # a JSON decoder reads -0 as the integer 0; float("-0") is -0.0
    assert bits(parse("-0")[0]) == bits(0.0) and parse("-0")[2]
    assert bits(parse("-0.0")[0]) == bits(-0.0)
    assert bits(parse("-0", json_grammar=False)[0]) == bits(-0.0)


@pytest.mark.parametrize("text", ["", "-", "+1", ".5", "1.", "01", "1e", "1e+", "NaN",
                                  "Infinity", "-Infinity", "inf", "x1", "--1"])
def test_json_refuses_what_is_not_a_json_number(text: str) -> None:
    value, end, ok = parse(text)
    assert not ok or end < len(text)


@pytest.mark.parametrize("text", ["+1", ".5", "1.", "007", "-.5e3", "+0.0"])
def test_csv_takes_the_forms_float_takes(text: str) -> None:
    assert assert_float_or_refused(text, json_grammar=False)


@pytest.mark.parametrize("text", ["", ".", "+", "1_000", " 1", "inf", "nan", "1e"])
def test_csv_refuses_the_rest(text: str) -> None:
    value, end, ok = parse(text, json_grammar=False)
    assert not ok or end < len(text)


# ---------------------------------------------------------------------- row kernels


def _rows(lines: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = b"\n".join(lines) + b"\n"
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    starts = np.concatenate([[0], ends[:-1] + 1])
    return buf, starts, ends


def _json_reference(line: bytes, dim: int) -> tuple[list[float], object] | None:
    """What the fast path must give: only objects of exactly the id/x keys, numbers only."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if type(obj) is not dict or set(obj) - {"id", "x"} or "x" not in obj:
        return None
    x = obj["x"]
    if type(x) is not list or len(x) != dim or any(type(v) not in (int, float) for v in x):
        return None
    if not all(math.isfinite(v) for v in x):
        return None
    return [float(v) for v in x], obj.get("id")


def test_json_rows_match_the_standard_library() -> None:
    lines = [b'{"id": 1, "x": [1.5, -2, 3e2]}', b'{"x":[0.1,0.2,0.3],"id":"a-b"}',
             b' { "x" : [ 1 , 2 , 3 ] } ', b'{"id": null, "x": [1, 2, 3]}',
             b'{"id": 1, "x": [1, 2]}', b'{"id": 1, "x": [1, 2, 3, 4]}',
             b'{"id": 1, "x": [1, 2, NaN]}', b'{"id": 1, "x": [1, 2, true]}',
             b'{"id": 1, "x": [1, 2, 3], "y": 0}', b'{"id": "\\u0041", "x": [1, 2, 3]}',
             b'{"id": 1.5, "x": [1, 2, 3]}', b'{"id": -0, "x": [1, 2, 3]}',
             b'{"id": 1, "x": [1, 2, 3]} x', b'{"x": [1, 2, 3], "x": [1, 2, 3]}',
             b'[1, 2, 3]', b'', b'{"id": "caf\xc3\xa9", "x": [1, 2, 3]}',
             b'{"id": -12, "x": [1e-5, 2.5E+3, -0.0]}', b'{"x": []}']
    buf, starts, ends = _rows(lines)
    n = len(lines)
    out, ok, spans = np.zeros((n, 3)), np.zeros(n, dtype=bool), np.zeros((n, 3), np.int64)
    taken = parse_json_rows(buf, starts, ends, np.frombuffer(b"x", np.uint8),
                            np.frombuffer(b"id", np.uint8), out, ok, spans)
    assert taken == ok.sum()
    for r, line in enumerate(lines):
        ref = _json_reference(line, 3)
        if not ok[r]:
            continue  # refusing is always allowed: the general decoder takes it
        assert ref is not None, line
        assert [bits(v) for v in out[r]] == [bits(v) for v in ref[0]], line
        kind, s, e = spans[r]
        text = buf[s:e].tobytes().decode()
        assert (kind, text if kind else None) == (
            (0, None) if ref[1] is None else (1 if isinstance(ref[1], str) else 2, str(ref[1])))
    # the common shapes are all taken
    assert ok[[0, 1, 2, 3, 17]].all()
    assert not ok[[4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18]].any()


def test_csv_rows_match_float_of_the_fields() -> None:
    lines = [b"1.5,-2,3e2", b"0.1,0.2,0.3\r", b"1,2", b"1,2,3,4", b"1,,3", b"1, 2,3",
             b"a,1,2,3", b"nan,1,2", b"+1,.5,7."]
    buf, starts, ends = _rows(lines)
    n = len(lines)
    out, ok, spans = np.zeros((n, 3)), np.zeros(n, dtype=bool), np.zeros((n, 3), np.int64)
    parse_csv_rows(buf, starts, ends, -1, out, ok, spans)
    assert ok.tolist() == [True, True, False, False, False, False, False, False, True]
    for r in np.flatnonzero(ok):
        fields = lines[r].decode().rstrip("\r").split(",")
        assert [bits(v) for v in out[r]] == [bits(float(f)) for f in fields]
    # an id column: its field's span, the other columns as values
    buf, starts, ends = _rows([b'"a1",1,2,3', b"1,2,3,x"])
    out, ok, spans = np.zeros((2, 3)), np.zeros(2, dtype=bool), np.zeros((2, 3), np.int64)
    parse_csv_rows(buf, starts, ends, 0, out, ok, spans)
    assert ok.tolist() == [True, False]
    assert buf[spans[0, 1]:spans[0, 2]].tobytes() == b'"a1"' and out[0].tolist() == [1, 2, 3]
