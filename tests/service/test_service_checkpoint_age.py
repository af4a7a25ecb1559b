"""Checkpoint age after a restart is measured from the restored checkpoint."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from streamkm.app.service import Service
from streamkm.config.schema import config_from_mapping

pytestmark = pytest.mark.unit


def _config(tmp_path: Path):
    (tmp_path / "in.jsonl").write_text("")
    return config_from_mapping({
        "source": {"paths": ["in.jsonl"]},
        "decoding": {"dim": 2},
        "model": {"n_clusters": 2},
        "checkpoint": {"dir": "ckpt"},
        "sinks": {"assignments": "out/assignments.jsonl", "events": "out/events.jsonl",
                  "dead_letter": "out/dead.jsonl"},
        "metrics": {"enabled": False},
    }, base_dir=tmp_path)


def _last_success(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("streamkm_checkpoint_last_success_timestamp_seconds")


def test_restart_reports_the_restored_checkpoints_time(tmp_path: Path) -> None:
    first = Service(_config(tmp_path), registry=CollectorRegistry())
    first.start()
    first.close()
    time.sleep(0.05)
    registry = CollectorRegistry()
    second = Service(_config(tmp_path), registry=registry)
    before = time.time()
    second.start()
    try:
        restored_at = _last_success(registry)
        assert restored_at is not None and 0 < restored_at < before
        assert before - restored_at < 60
    finally:
        second.close(final_checkpoint=False)
