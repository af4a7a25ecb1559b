"""Files that go wrong under the file connectors, in-process on real files: an input path
that exists but cannot be read is reported with its errno (and not when a wildcard merely
matches a folder), and clears once readable; an output file deleted with its folder is
written again, whole, by the next sync."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from streamkm_connectors.file_sinks import AssignmentFileSink, EventFileSink
from streamkm_connectors.file_tailer import FileTailSource

pytestmark = pytest.mark.unit


def _part(pattern: str):
    source = FileTailSource([pattern], poll_interval_s=0.0, rotate_grace_s=0.0)
    return source.build_part(pattern, None)


def test_a_directory_at_the_input_path_is_unreadable_until_it_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.mkdir()
    part = _part(str(path))
    assert part.next_batch(10) == []
    assert part.unreadable == {str(path): {"errno": "EISDIR", "error": "Is a directory"}}
    path.rmdir()
    path.write_bytes(b'{"id": 1}\n')
    got = part.next_batch(10)
    assert [r.value for r in got] == [b'{"id": 1}'] and part.unreadable == {}
    part.close()


def test_broken_symlink_and_fifo_are_reported(tmp_path: Path) -> None:
    link, fifo = tmp_path / "link.jsonl", tmp_path / "fifo.jsonl"
    link.symlink_to(tmp_path / "nowhere.jsonl")
    os.mkfifo(fifo)
    link_part, fifo_part = _part(str(link)), _part(str(fifo))
    assert link_part.unreadable == {
        str(link): {"errno": "ENOENT", "error": "No such file or directory"}}
    assert fifo_part.unreadable == {str(fifo): {"errno": None,
                                                "error": "a FIFO, not a regular file"}}
    (tmp_path / "nowhere.jsonl").write_bytes(b"a\n")  # the link's target appears
    assert [r.value for r in link_part.next_batch(10)] == [b"a"]
    assert link_part.unreadable == {}
    link_part.close()
    fifo_part.close()


def test_a_wildcard_matching_a_folder_reports_nothing(tmp_path: Path) -> None:
    (tmp_path / "archive.jsonl").mkdir()
    (tmp_path / "a.jsonl").write_bytes(b"x\n")
    (tmp_path / "gone.jsonl").symlink_to(tmp_path / "missing")
    part = _part(str(tmp_path / "*.jsonl"))
    assert [r.value for r in part.next_batch(10)] == [b"x"]
    assert list(part.unreadable) == [str(tmp_path / "gone.jsonl")]  # a link meant as input
    part.close()


def test_a_deleted_output_folder_is_recreated_with_everything_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sink = AssignmentFileSink(out / "assignments.jsonl")
    events = EventFileSink(out / "events.jsonl")
    sink.write_assignments(["a", "b"], [0, 1], [0.25, 1.0], step=1)
    sink.sync()
    shutil.rmtree(out)
    sink.write_assignments(["c"], [2], [4.0], step=2)  # into the deleted file
    events.write_event({"event": "converged"})
    position = sink.sync()
    events.sync()
    lines = (out / "assignments.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "b", "c"]
    assert position["bytes"] == (out / "assignments.jsonl").stat().st_size
    assert json.loads((out / "events.jsonl").read_text())["event"] == "converged"
    sink.write_assignments(["d"], [0], [0.0], step=3)  # appends to the new file
    sink.rollback(position)  # and takes back from it
    sink.write_assignments(["e"], [0], [0.0], step=3)
    sink.close()
    events.close()
    lines = (out / "assignments.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "b", "c", "e"]
    assert sorted(p.name for p in out.iterdir()) == ["assignments.jsonl", "events.jsonl"]
