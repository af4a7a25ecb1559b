"""Readable input positions in ``streamkm checkpoint inspect``: Kafka partitions, files that
were replaced or removed since the checkpoint."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamkm.app.inspect import describe_position

pytestmark = pytest.mark.unit


def file_position(path: Path, offset: int) -> dict:
    st = os.stat(path)
    entry = {"dev": st.st_dev, "ino": st.st_ino, "fp_len": 0, "fp": "", "path": str(path),
             "offset": offset}
    return {"version": 1, "pattern": str(path), "active": [st.st_dev, st.st_ino],
            "files": [entry]}


def test_kafka_partition() -> None:
    assert describe_position("t:0", {"version": 1, "topic": "t", "partition": 0,
                                      "offset": 42}) == ["t partition 0: next offset 42"]
    assert describe_position("t:1", {"topic": "t", "partition": 1, "offset": 7,
                                     "released": True}) == [
        "t partition 1: next offset 7 (released)"]


def test_file_read_replaced_and_gone(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_bytes(b"x" * 100)
    position = file_position(data, 60)
    assert describe_position(str(data), position) == [
        f"{data}: offset 60 (of 100 bytes, 40 bytes still to read), current file"]
    data.unlink()
    assert describe_position(str(data), position) == [f"{data}: offset 60 (file gone)"
                                                      ", current file"]
    keep = tmp_path / "other"
    keep.write_bytes(b"y")  # holds the old inode number so the new file gets another one
    data.write_bytes(b"z" * 10)
    if os.stat(data).st_ino == position["files"][0]["ino"]:
        pytest.skip("the file system reused the inode")
    assert "replaced by another file since" in describe_position(str(data), position)[0]
    assert describe_position("p", {"version": 1, "files": []}) == ["p: no file read yet"]
