"""File tailer on real files: appends, rotation, truncation, resume, globs, oversized lines."""

from __future__ import annotations

import json
import os
import shutil
import time
import tracemalloc
from pathlib import Path

import pytest

from streamkm.exceptions import ParameterError, StateError
from streamkm.sources import OVERSIZED, TRUNCATED, Source, SourcePartition
from streamkm_connectors.file_tailer import FileTailSource

pytestmark = pytest.mark.unit


def make_source(paths, **kw) -> FileTailSource:
    kw.setdefault("poll_interval_s", 0.0)
    kw.setdefault("rotate_grace_s", 0.0)
    return FileTailSource([str(p) for p in paths], **kw)


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def lines(*names: str) -> bytes:
    return b"".join(n.encode() + b"\n" for n in names)


def drain(part: SourcePartition, max_records: int = 1000, rounds: int = 5) -> list:
    """Read until several consecutive calls return nothing."""
    out: list = []
    empty = 0
    while empty < rounds:
        got = part.next_batch(max_records)
        assert len(got) <= max_records
        if got:
            out.extend(got)
            empty = 0
        else:
            empty += 1
    return out


def values(records) -> list[bytes]:
    return [r.value for r in records]


def test_protocols_and_parameters(tmp_path):
    src = make_source([tmp_path / "a.log"])
    assert isinstance(src, Source)
    part = src.build_part(str(tmp_path / "a.log"), None)
    assert isinstance(part, SourcePartition)
    assert part.next_batch(10) == []
    part.close()
    with pytest.raises(StateError):
        part.next_batch(1)
    with pytest.raises(ParameterError, match="record_size"):
        FileTailSource(["x"], framing="fixed")
    with pytest.raises(ParameterError, match="'sideways'"):
        FileTailSource(["x"], start_at="sideways")
    with pytest.raises(ParameterError):
        FileTailSource("x")
    with pytest.raises(ParameterError, match="unknown partition"):
        src.build_part("other", None)


def test_follows_appends_and_holds_partial_line(tmp_path):
    path = tmp_path / "a.log"
    part = make_source([path]).build_part(str(path), None)
    assert part.next_batch(10) == []  # file does not exist yet
    append(path, b"one\ntwo\nthr")
    assert values(drain(part)) == [b"one", b"two"]
    assert part.lag() == 3.0
    append(path, b"ee")
    assert drain(part) == []  # still no newline
    append(path, b"\nfour\n")
    got = drain(part)
    assert values(got) == [b"three", b"four"]
    assert got[0].position == {"partition": str(path), "file": str(path), "offset": 8}
    assert got[0].key is None and got[0].error is None
    assert part.lag() == 0.0
    json.dumps(part.snapshot())


def test_max_records_and_snapshot_reflect_only_handed_out(tmp_path):
    path = tmp_path / "a.log"
    append(path, lines(*[f"r{i}" for i in range(100)]))
    src = make_source([path], read_chunk_bytes=64)
    part = src.build_part(str(path), None)
    first = part.next_batch(7)
    assert values(first) == [f"r{i}".encode() for i in range(7)]
    snap = part.snapshot()
    part.close()  # whatever was read ahead is dropped with the partition
    resumed = src.build_part(str(path), snap)
    assert values(drain(resumed, 13)) == [f"r{i}".encode() for i in range(7, 100)]


def test_resume_at_every_point_gives_exact_record_set(tmp_path):
    path = tmp_path / "a.log"
    expected = [f"rec-{i}".encode() for i in range(60)]
    append(path, b"".join(e + b"\n" for e in expected[:30]))
    src = make_source([path], read_chunk_bytes=50)
    seen: list[bytes] = []
    state = None
    step = 0
    while len(seen) < len(expected):
        part = src.build_part(str(path), json.loads(json.dumps(state)) if state else None)
        got = part.next_batch(1 + step % 4)
        seen.extend(values(got))
        state = part.snapshot()
        part.close()
        step += 1
        if step == 5:
            append(path, b"".join(e + b"\n" for e in expected[30:45]))
            append(path, expected[45][:2])  # partial line across a restart
        if step == 9:
            append(path, expected[45][2:] + b"\n" + b"".join(e + b"\n" for e in expected[46:]))
        assert step < 200
    assert seen == expected


def test_rename_rotation_reads_old_file_to_its_end(tmp_path):
    path = tmp_path / "app.log"
    part = make_source([path]).build_part(str(path), None)
    append(path, lines("a1", "a2"))
    assert values(drain(part)) == [b"a1", b"a2"]
    append(path, lines("a3"))
    os.rename(path, tmp_path / "app.log.1")       # logrotate: rename ...
    append(tmp_path / "app.log.1", lines("a4"))   # writer still on the old fd
    append(path, lines("b1", "b2"))               # ... create new, writer reopens
    got = drain(part)
    assert values(got) == [b"a3", b"a4", b"b1", b"b2"]
    assert [r.position["offset"] for r in got] == [6, 9, 0, 3]
    append(path, lines("b3"))
    assert values(drain(part)) == [b"b3"]


def test_rotation_waits_for_the_grace_period(tmp_path):
    path = tmp_path / "app.log"
    part = make_source([path], rotate_grace_s=1.0).build_part(str(path), None)
    append(path, lines("a1"))
    assert values(drain(part)) == [b"a1"]
    os.rename(path, tmp_path / "app.log.1")
    append(path, lines("b1"))
    assert drain(part) == []  # old file may still grow
    append(tmp_path / "app.log.1", b"a2\na3-without-newline")
    assert values(drain(part)) == [b"a2"]
    time.sleep(1.1)
    got = drain(part)
    assert values(got) == [b"a3-without-newline", b"b1"]
    assert got[0].error == TRUNCATED and got[0].position["length"] == 18


def test_rotation_between_checkpoint_and_restart(tmp_path):
    """Crash after the current file was renamed: resume finds it by identity."""
    path = tmp_path / "app.log"
    src = make_source([path])
    part = src.build_part(str(path), None)
    append(path, lines("a1", "a2", "a3"))
    assert values(part.next_batch(1)) == [b"a1"]
    snap = part.snapshot()
    part.close()
    os.rename(path, tmp_path / "app.log.1")
    append(path, lines("b1"))
    resumed = src.build_part(str(path), snap)
    assert values(drain(resumed)) == [b"a2", b"a3", b"b1"]
    old = {f["path"]: f for f in resumed.snapshot()["files"]}[str(tmp_path / "app.log.1")]
    assert old["offset"] == 9  # remembered while it exists, fully read
    (tmp_path / "app.log.1").unlink()
    append(path, lines("b2"))
    assert values(drain(resumed)) == [b"b2"]
    snap2 = resumed.snapshot()
    assert {f["ino"] for f in snap2["files"]} == {os.stat(path).st_ino}  # old one forgotten


def test_copytruncate_restarts_at_zero(tmp_path):
    path = tmp_path / "app.log"
    part = make_source([path]).build_part(str(path), None)
    append(path, lines("a1", "a2", "a3"))
    assert values(drain(part)) == [b"a1", b"a2", b"a3"]
    shutil.copyfile(path, tmp_path / "app.log.1")  # copytruncate: copy ...
    with open(path, "r+b") as fh:                 # ... then truncate in place
        fh.truncate(0)
    append(path, lines("b1"))
    assert values(drain(part)) == [b"b1"]
    append(path, lines("b2"))
    assert values(drain(part)) == [b"b2"]


def test_truncate_and_rewrite_longer_is_seen_by_fingerprint(tmp_path):
    path = tmp_path / "app.log"
    part = make_source([path]).build_part(str(path), None)
    append(path, lines("old-1", "old-2"))
    assert len(drain(part)) == 2
    with open(path, "r+b") as fh:
        fh.truncate(0)
    append(path, lines("new-1", "new-2", "new-3"))  # longer than before the truncation
    assert values(drain(part)) == [b"new-1", b"new-2", b"new-3"]


def test_inode_reuse_is_recognised_by_fingerprint(tmp_path):
    """A snapshot names (device, inode); a different file on that inode is read from 0."""
    path = tmp_path / "app.log"
    src = make_source([path])
    part = src.build_part(str(path), None)
    append(path, lines("old-1", "old-2"))
    assert len(drain(part)) == 2
    snap = part.snapshot()
    part.close()
    # Simulate inode reuse exactly: same inode, other first bytes (rewrite in place).
    with open(path, "r+b") as fh:
        fh.write(b"NEW-1\nnew-2\nnew-3\n")
    resumed = src.build_part(str(path), snap)
    assert values(drain(resumed)) == [b"NEW-1", b"new-2", b"new-3"]
    # A real delete + create, whether or not the file system reuses the inode.
    path.unlink()
    append(path, lines("third"))
    assert values(drain(resumed)) == [b"third"]


def test_glob_reads_files_in_mtime_order_each_to_its_end(tmp_path):
    base = time.time() - 100
    for i, name in enumerate(["c.jsonl", "a.jsonl", "b.jsonl"]):
        append(tmp_path / name, lines(*[f"{name}-{j}" for j in range(3)]))
        os.utime(tmp_path / name, (base + i, base + i))
    append(tmp_path / "ignored.txt", lines("no"))
    pattern = str(tmp_path / "*.jsonl")
    src = make_source([pattern])
    assert src.list_parts() == [pattern]
    part = src.build_part(pattern, None)
    got = values(drain(part, 2))
    assert got == [f"{n}-{j}".encode() for n in ["c.jsonl", "a.jsonl", "b.jsonl"] for j in range(3)]
    assert part.lag() == 0.0
    snap = part.snapshot()
    assert len(snap["files"]) == 3 and all(f["offset"] > 0 for f in snap["files"])
    append(tmp_path / "a.jsonl", lines("a-more"))
    append(tmp_path / "d.jsonl", lines("d-0"))
    more = values(drain(part))
    assert sorted(more) == [b"a-more", b"d-0"]
    (tmp_path / "c.jsonl").unlink()
    drain(part)
    assert len(part.snapshot()["files"]) == 3  # c forgotten, d remembered


def test_glob_resume_mid_file_across_files(tmp_path):
    for i in range(4):
        append(tmp_path / f"f{i}.log", lines(*[f"f{i}-{j}" for j in range(5)]))
        os.utime(tmp_path / f"f{i}.log", (1e9 + i, 1e9 + i))
    pattern = str(tmp_path / "f*.log")
    src = make_source([pattern])
    expected = [f"f{i}-{j}".encode() for i in range(4) for j in range(5)]
    for cut in (0, 3, 5, 12, 19, 20):
        part = src.build_part(pattern, None)
        head = values(part.next_batch(cut)) if cut else []
        while len(head) < cut:
            head += values(part.next_batch(cut - len(head)))
        snap = json.loads(json.dumps(part.snapshot()))
        part.close()
        tail = values(drain(src.build_part(pattern, snap)))
        assert head + tail == expected, cut


def test_start_at_end_skips_existing_content(tmp_path):
    path = tmp_path / "a.log"
    append(path, lines("old-1", "old-2") + b"partial")
    src = make_source([path], start_at="end")
    part = src.build_part(str(path), None)
    snap = part.snapshot()  # before the first read: already at the end
    append(path, b"-done\n" + lines("new-1"))
    assert values(drain(part)) == [b"partial-done", b"new-1"]
    assert values(drain(src.build_part(str(path), snap))) == [b"partial-done", b"new-1"]


def test_fixed_framing_holds_partial_record(tmp_path):
    path = tmp_path / "a.bin"
    part = make_source([path], framing="fixed", record_size=8).build_part(str(path), None)
    append(path, bytes(range(20)))
    got = drain(part)
    assert values(got) == [bytes(range(8)), bytes(range(8, 16))]
    assert [r.position["offset"] for r in got] == [0, 8]
    append(path, bytes(range(20, 28)))
    assert values(drain(part)) == [bytes(range(16, 24))]
    assert part.lag() == 4.0


def test_oversized_line_is_streamed_past_with_bounded_memory(tmp_path):
    path = tmp_path / "big.log"
    big = b"{" + b"9" * (10 * 1024 * 1024) + b"}"
    append(path, lines("before") + big + b"\n" + lines("after"))
    src = make_source([path], max_record_bytes=64 * 1024, read_chunk_bytes=64 * 1024)
    part = src.build_part(str(path), None)
    tracemalloc.start()
    try:
        got = drain(part)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024, peak  # never the 10 MB line
    assert values(got)[0] == b"before" and values(got)[2] == b"after"
    over = got[1]
    assert over.error == OVERSIZED
    assert over.value == big[:1024]
    assert over.position["offset"] == 7 and over.position["length"] == len(big)
    assert got[2].position["offset"] == 7 + len(big) + 1


def test_oversized_line_still_being_written(tmp_path):
    path = tmp_path / "big.log"
    src = make_source([path], max_record_bytes=100, read_chunk_bytes=32)
    part = src.build_part(str(path), None)
    append(path, lines("a") + b"x" * 150)
    assert values(drain(part)) == [b"a"]
    snap = part.snapshot()
    assert snap["files"][0]["offset"] == 2  # the oversized line is not handed out yet
    append(path, b"x" * 150 + b"\n" + lines("b"))
    got = drain(part)
    assert [r.error for r in got] == [OVERSIZED, None]
    assert got[0].position["length"] == 300 and got[1].value == b"b"
    resumed = src.build_part(str(path), snap)
    assert [(r.error, r.value[:1]) for r in drain(resumed)] == [(OVERSIZED, b"x"), (None, b"b")]


def test_malformed_snapshot_is_a_state_error(tmp_path):
    src = make_source([tmp_path / "a.log"])
    key = str(tmp_path / "a.log")
    with pytest.raises(StateError):
        src.build_part(key, {"version": 99})
    with pytest.raises(StateError):
        src.build_part(key, {"version": 1, "pattern": key, "files": [{"dev": 1}]})
    with pytest.raises(StateError, match="pattern"):
        src.build_part(key, {"version": 1, "pattern": "other", "files": [], "active": None})


def test_tail_while_a_writer_appends_concurrently(tmp_path):
    """Writer in another process-like loop: every record exactly once, in order."""
    import threading

    path = tmp_path / "live.log"
    n = 5000
    done = threading.Event()

    def writer() -> None:
        with open(path, "ab", buffering=0) as fh:
            for i in range(n):
                rec = f'{{"id": {i}}}\n'.encode()
                fh.write(rec[:5])
                fh.write(rec[5:])
        done.set()

    part = make_source([path], read_chunk_bytes=100).build_part(str(path), None)
    thread = threading.Thread(target=writer)
    thread.start()
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        got.extend(values(part.next_batch(97)))
    thread.join()
    assert got == [f'{{"id": {i}}}'.encode() for i in range(n)]
