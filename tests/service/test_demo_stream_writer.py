"""The demo's stream writer moves its file aside at the size bound and carries on in a new
one: the numbering continues across the files, and a new file is never left empty."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from streamkm.app.demo import DriftingStream, StreamWriter

pytestmark = pytest.mark.unit


def _ids(path: Path) -> list[int]:
    return [json.loads(line)["id"] for line in path.read_bytes().splitlines()]


def test_a_rotated_stream_continues_its_numbering_in_a_new_file_that_holds_lines(
        tmp_path: Path) -> None:
    # 2,000 lines per 0.1 s write, 20 kB bound: every write after the first moves the file
    path = tmp_path / "stream.jsonl"
    stop = threading.Event()
    writer = StreamWriter(path, DriftingStream(seed=0, bad_fraction=0.0), rate=20_000,
                          stop=stop, max_bytes=20_000)
    writer.start()
    rotated = path.with_name("stream.jsonl.1")
    deadline = time.monotonic() + 30
    while not rotated.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.35)  # a few more writes, maybe another rotation
    stop.set()
    writer.join(timeout=10)
    assert rotated.exists(), "the stream was never moved aside"
    before = int(path.with_name("stream.jsonl.count").read_text())
    old, new = _ids(rotated), _ids(path)
    assert new, "the new stream file holds no line"
    assert old[-1] + 1 == before == new[0]  # no record lost or repeated at the rotation
    assert new == list(range(before, before + len(new)))
    assert writer.written == before + len(new)
