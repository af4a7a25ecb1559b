"""Service parts in-process: file sinks (positions, truncation), batcher round-robin."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import numpy as np
import pytest

from streamkm.io.batcher import Batcher
from streamkm.io.decoding import RecordDecoder
from streamkm_connectors.file_sinks import AssignmentFileSink, DeadLetterFileSink
from streamkm_connectors.file_tailer import FileTailSource

pytestmark = pytest.mark.unit


def test_assignment_sink_positions_and_restore(tmp_path: Path) -> None:
    path = tmp_path / "out" / "a.jsonl"
    sink = AssignmentFileSink(path)
    sink.write_assignments(["a", "b\"q"], np.array([0, 2]), np.array([0.5, 1.25]), 7)
    checkpointed = sink.sync()
    assert checkpointed == {"path": str(path), "bytes": path.stat().st_size}
    sink.write_assignments([3], np.array([1]), np.array([2.0]), 8)
    sink.flush()
    sink.close()
    reopened = AssignmentFileSink(path)
    reopened.restore(checkpointed)
    assert reopened.position() == checkpointed
    reopened.write_assignments([4], np.array([1]), np.array([0.0]), 8)
    reopened.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [{"id": "a", "cluster": 0, "distance": math.sqrt(0.5), "sq_distance": 0.5,
                      "step": 7},
                     {"id": 'b"q', "cluster": 2, "distance": math.sqrt(1.25), "sq_distance": 1.25,
                      "step": 7},
                     {"id": 4, "cluster": 1, "distance": 0.0, "sq_distance": 0.0, "step": 8}]


def test_dead_letter_text_base64_and_truncation(tmp_path: Path) -> None:
    sink = DeadLetterFileSink(tmp_path / "dead.jsonl", max_raw_bytes=8)
    sink.write_dead_letter(b"caf\xc3\xa9", "unparseable", "bad", {"offset": 1})
    sink.write_dead_letter(b"\xff\x00", "encoding", "not utf-8", {"offset": 2})
    sink.write_dead_letter(b"0123456789", "oversized", "long", {"offset": 3})
    sink.close()
    a, b, c = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert a["raw"] == "café" and a["reason"] == "unparseable" and a["position"] == {"offset": 1}
    assert base64.b64decode(b["raw_base64"]) == b"\xff\x00" and "raw" not in b
    assert c["raw"] == "01234567" and c["raw_truncated"] is True and c["raw_bytes"] == 10


def test_batcher_round_robin_is_deterministic_across_resume(tmp_path: Path) -> None:
    files = []
    for p in range(3):
        path = tmp_path / f"p{p}.jsonl"
        path.write_text("".join(json.dumps({"id": f"{p}-{i}", "x": [float(i)]}) + "\n"
                                for i in range(100 + 40 * p)))
        files.append(str(path))
    decoder = RecordDecoder(format="json", dim=1)

    def batches(stop_after: int | None, resume: dict | None = None, next_part: int = 0):
        source = FileTailSource(files)
        parts = {k: source.build_part(k, (resume or {}).get(k)) for k in source.list_parts()}
        # Batches close by size, or when every file is read to its end (the wait says
        # stop): never by the clock, which a loaded machine would move.
        batcher = Batcher(parts, decoder, dim=1, batch_size=32, max_wait_s=600.0,
                          poll_interval_s=0.001, next_part=next_part)
        out = []
        while (batch := batcher.collect(min_valid=1, wait=lambda s: True)).n_read:
            out.append(batch)
            if stop_after is not None and len(out) == stop_after:
                break
        for part in parts.values():
            part.close()
        return out

    whole = batches(None)
    assert sum(b.n_valid for b in whole) == 100 + 140 + 180
    first = whole[0].ids
    assert {i.split("-")[0] for i in first} == {"0", "1", "2"}
    head = batches(4)
    tail = batches(None, head[-1].positions, head[-1].next_part)
    assert [b.ids for b in head + tail] == [b.ids for b in whole]
