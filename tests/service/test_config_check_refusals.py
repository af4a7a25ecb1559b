"""``streamkm config check`` refuses what ``streamkm run`` refuses (a model-defining setting
changed since the checkpoint), names ``STREAMKM_*`` variables the service ignores, and a
model reset can read the input again from the start (``--reset-model --from-start``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers.processes import count_lines
from tests.helpers.service_process import (
    RunningService,
    blob_rows,
    cli,
    run_until_assigned,
    service_config,
    write_jsonl,
)

@pytest.mark.integration
def test_one_underscore_variable_is_named_with_the_one_meant(tmp_path: Path) -> None:
    config = service_config(tmp_path, tmp_path / "in.jsonl")
    proc = cli("config", "check", "-c", str(config),
               env={"STREAMKM_MODEL_N_CLUSTERS": "8", "STREAMKM_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr  # a warning, not an error
    assert ("warning: environment variable STREAMKM_MODEL_N_CLUSTERS is ignored: did you "
            "mean STREAMKM_MODEL__N_CLUSTERS") in proc.stderr
    assert "STREAMKM_NUM_THREADS" not in proc.stderr  # streamkm reads that one itself
    assert "n_clusters = 3" in proc.stdout  # and indeed the file's value holds


@pytest.mark.integration
def test_check_refuses_a_changed_n_clusters_like_run(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(300))
    config = service_config(tmp_path, data)
    run_until_assigned(config, 300)
    assert cli("config", "check", "-c", str(config)).returncode == 0

    changed = {"STREAMKM_MODEL__N_CLUSTERS": "5"}
    check = cli("config", "check", "-c", str(config), env=changed)
    assert check.returncode == 2, check.stderr
    assert "settings that define the model" in check.stderr
    assert "model.n_clusters" in check.stderr and "--reset-model" in check.stderr
    assert "config has 1 error(s)" in check.stderr
    run = cli("run", "-c", str(config), env=changed)
    assert run.returncode == 2 and "model.n_clusters" in run.stderr


def _events(service: RunningService, name: str) -> list[dict]:
    return [e for e in service.events() if e["event"] == name]


@pytest.mark.integration
@pytest.mark.slow
def test_wrong_dim_is_named_and_reset_from_start_reads_the_records_again(tmp_path: Path
                                                                         ) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(600))
    config = service_config(tmp_path, data)
    dead = tmp_path / "out" / "dead.jsonl"
    output = tmp_path / "out" / "assignments.jsonl"
    wrong = {"STREAMKM_DECODING__DIM": "3"}

    service = RunningService(config, env=wrong)
    try:
        service.wait_until(lambda: count_lines(dead) >= 600 and _events(
            service, "reject_ratio_high"))
    finally:
        assert service.stop() == 0
    message = _events(service, "reject_ratio_high")[0]["message"]
    assert "wrong_dimension" in message and "config key decoding.dim" in message
    assert count_lines(output) == 0

    assert "decoding.dim" in cli("config", "check", "-c", str(config)).stderr
    assert cli("run", "-c", str(config)).returncode == 2  # dim defines the model

    alone = cli("run", "-c", str(config), "--from-start")
    assert alone.returncode == 2 and "--from-start needs --reset-model" in alone.stderr

    # --reset-model alone keeps the positions: the 600 records are not read again
    service = RunningService(config, "--reset-model")
    try:
        service.wait_until(service.started)
        time.sleep(2.0)
        assert count_lines(output) == 0
    finally:
        assert service.stop() == 0

    service = run_until_assigned(config, 600, "--reset-model", "--from-start")
    assert count_lines(output) == 600 and count_lines(dead) == 0
    ids = [json.loads(line)["id"] for line in output.read_text().splitlines()]
    assert sorted(ids) == sorted(rid for rid, _ in blob_rows(600))
    (moved,) = (tmp_path / "ck").glob("replaced-*")
    assert list(moved.glob("checkpoint-*.npz"))
    started = _events(service, "started_over")
    assert started and started[0]["checkpoints_moved_to"] == str(moved)
    assert cli("config", "check", "-c", str(config)).returncode == 0

    write_jsonl(data, blob_rows(50, seed=1, start=600), append=True)
    run_until_assigned(config, 650)  # and it resumes as usual from the new checkpoints
    assert count_lines(output) == 650


@pytest.mark.integration
def test_from_start_refuses_input_it_cannot_read_again(tmp_path: Path) -> None:
    config = service_config(tmp_path, tmp_path / "in.jsonl",
                            extra="").read_text().replace(
        'poll_interval_ms = 5', 'poll_interval_ms = 5\nstart_at = "end"')
    (tmp_path / "end.toml").write_text(config)
    proc = cli("run", "-c", str(tmp_path / "end.toml"), "--reset-model", "--from-start")
    assert proc.returncode == 2
    assert "--from-start cannot re-read this input: source.start_at = 'end'" in proc.stderr
