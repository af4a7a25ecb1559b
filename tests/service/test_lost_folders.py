"""Folders lost under a running ``streamkm run``: the checkpoint folder and the output folder
are created again (one JSON event each) and the next checkpoint is written; after a lost
checkpoint folder, ``--on-existing-output=resume`` continues from the resume point beside the
outputs, and every input record is assigned exactly once across the outputs."""

from __future__ import annotations

import shutil
import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.processes import complete_records, count_lines
from tests.helpers.service_process import (
    RunningService,
    blob_rows,
    cli,
    service_config,
    write_jsonl,
)

pytestmark = pytest.mark.integration


def _ids(path: Path) -> Counter[str]:
    """The ids of the complete lines."""
    return Counter(record["id"] for record in complete_records(path))


def _checkpoints(folder: Path) -> list[Path]:
    return sorted(folder.glob("checkpoint-*.npz")) if folder.is_dir() else []


def _events_named(service: RunningService, name: str) -> list[dict]:
    return [e for e in service.events() if e["event"] == name]


def test_deleted_checkpoint_and_output_folders_are_recreated(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(400))
    config = service_config(tmp_path, data, extra="[status]\ninterval_s = 0\n")
    ck, out = tmp_path / "ck", tmp_path / "out"
    assignments = out / "assignments.jsonl"
    service = RunningService(config)
    try:
        service.wait_until(lambda: count_lines(assignments) >= 400)
        service.wait_until(lambda: len(_checkpoints(ck)) >= 1)
        shutil.rmtree(ck)
        shutil.rmtree(out)
        write_jsonl(data, blob_rows(600, seed=1, start=400), append=True)
        service.wait_until(lambda: bool(_events_named(service, "checkpoint_folder_recreated")))
        service.wait_until(lambda: len(_checkpoints(ck)) >= 1)
        service.wait_until(lambda: assignments.is_file() and count_lines(assignments) >= 1000)
    finally:
        assert service.stop() == 0, service.stderr()
    recreated = _events_named(service, "checkpoint_folder_recreated")
    assert len(recreated) == 1 and recreated[0]["path"] == str(ck)
    outputs = {e["path"] for e in _events_named(service, "output_recreated")}
    assert str(assignments) in outputs and str(out / "events.jsonl") in outputs
    assert not _events_named(service, "io_stalled")
    # nothing written into the deleted file was lost: ids 0-999, each once
    assert _ids(assignments) == Counter(f"r{i}" for i in range(1000))
    # and a plain restart continues from the checkpoint written in the new folder
    write_jsonl(data, blob_rows(300, seed=2, start=1000), append=True)
    again = RunningService(config)
    try:
        again.wait_until(lambda: count_lines(assignments) >= 1300)
    finally:
        assert again.stop() == 0, again.stderr()
    assert _ids(assignments) == Counter(f"r{i}" for i in range(1300))


@pytest.mark.parametrize("how", ["sigterm-then-lost", "sigkill-then-lost",
                                 "lost-while-running-then-sigkill"])
def test_resume_after_lost_checkpoint_folder_assigns_each_record_once(
        tmp_path: Path, how: str) -> None:
    """The checkpoint folder lost after a SIGTERM (final checkpoint), after a kill -9
    (outputs past the last checkpoint), or under the running service followed by a kill -9
    before any checkpoint recreated it: ``resume`` truncates the outputs to the resume point
    and reads on from its positions. 700 records: a checkpoint after 500 (every 5 batches of
    100), then the service idles with 200 assignments past it."""
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(700))
    config = service_config(tmp_path, data, extra="[status]\ninterval_s = 0\n")
    ck, assignments = tmp_path / "ck", tmp_path / "out" / "assignments.jsonl"
    service = RunningService(config)
    try:
        service.wait_until(lambda: count_lines(assignments) >= 700)
        if how == "lost-while-running-then-sigkill":
            shutil.rmtree(ck)
        service.proc.send_signal(signal.SIGTERM if how == "sigterm-then-lost"
                                 else signal.SIGKILL)
        service.proc.wait(timeout=60)
    finally:
        service.stop()
    if how != "lost-while-running-then-sigkill":
        shutil.rmtree(ck)
    assert not ck.exists()
    refused = cli("run", "-c", str(config))
    assert refused.returncode == 2
    assert "--on-existing-output=resume" in refused.stderr
    write_jsonl(data, blob_rows(500, seed=1, start=700), append=True)
    resumed = RunningService(config, "--on-existing-output=resume")
    try:
        resumed.wait_until(lambda: len(_ids(assignments)) >= 1200)
    finally:
        assert resumed.stop() == 0, resumed.stderr()
    assert _ids(assignments) == Counter(f"r{i}" for i in range(1200))
    (event,) = _events_named(resumed, "resumed_from_outputs")
    assert event["path"] == str(assignments) + ".resume.json"
    assert any(e.get("reason") == "resumed" for e in _events_named(resumed, "checkpoint_written"))
    truncated = _events_named(resumed, "sink_truncated")
    if how == "sigterm-then-lost":
        assert not truncated
    else:  # the 200 assignments past the checkpoint were taken back and made again
        assert any(e["path"] == str(assignments) for e in truncated)


def test_resume_without_a_resume_point_names_it(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(10))
    config = service_config(tmp_path, data)
    (tmp_path / "out").mkdir()
    assignments = tmp_path / "out" / "assignments.jsonl"
    assignments.write_text('{"id": "r0", "cluster": 0}\n')
    proc = cli("run", "-c", str(config), "--on-existing-output=resume")
    assert proc.returncode == 2
    assert f"no resume point at '{assignments}.resume.json'" in proc.stderr
