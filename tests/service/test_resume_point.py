"""The resume point beside the file outputs: where it lives, a round trip of the positions a
checkpoint holds (without a model), and refusal of an edited, foreign or missing file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamkm.io.resume_point import read_resume_point, resume_point_path, write_resume_point
from streamkm.exceptions import StateError
from streamkm.registry import sinks_sections

pytestmark = pytest.mark.unit


def test_it_lives_beside_the_first_file_output(tmp_path: Path) -> None:
    file_sinks, kafka_sinks = sinks_sections()["file"], sinks_sections()["kafka"]
    sinks = file_sinks(assignments=tmp_path / "a.jsonl", events=tmp_path / "e.jsonl",
                        dead_letter=tmp_path / "d.jsonl")
    assert resume_point_path(sinks) == tmp_path / "a.jsonl.resume.json"
    assert resume_point_path(file_sinks(assignments=None, events=None,
                                        dead_letter=tmp_path / "d.jsonl")) == \
        tmp_path / "d.jsonl.resume.json"
    assert resume_point_path(kafka_sinks(kind="kafka")) is None


def test_round_trip_as_a_checkpoint_without_a_model(tmp_path: Path) -> None:
    path = tmp_path / "out" / "a.jsonl.resume.json"  # the folder is created
    positions = {"/in/*.jsonl": {"version": 1, "files": [{"offset": 120}]}}
    sinks = {"assignments": {"path": "/out/a.jsonl", "bytes": 4096}}
    write_resume_point(path, sequence=7, created_unix=1.5e9, positions=positions,
                       sink_positions=sinks, counters={"records_read": 40},
                       batcher={"next_part": 0})
    point = read_resume_point(path)
    assert (point.sequence, point.positions, point.sink_positions) == (7, positions, sinks)
    assert point.counters == {"records_read": 40} and point.model_meta is None
    assert point.model_arrays == {} and point.meta["batcher"] == {"next_part": 0}


def test_an_edited_foreign_or_missing_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl.resume.json"
    with pytest.raises(StateError, match="no resume point at"):
        read_resume_point(path)
    write_resume_point(path, sequence=1, created_unix=0.0, positions={},
                       sink_positions={"assignments": {"bytes": 10}}, counters={}, batcher={})
    body = json.loads(path.read_text())
    body["state"]["sink_positions"]["assignments"]["bytes"] = 5
    path.write_text(json.dumps(body))
    with pytest.raises(StateError, match="fails its SHA-256"):
        read_resume_point(path)
    path.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(StateError, match="is not a streamkm resume point"):
        read_resume_point(path)
    path.write_text("{not json")
    with pytest.raises(StateError, match="cannot read the resume point"):
        read_resume_point(path)
