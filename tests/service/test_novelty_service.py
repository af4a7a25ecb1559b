"""Novelty in the service: every assignment line carries ``novelty``, ``outlier``,
``second_cluster`` and ``margin``; records far from every cluster are flagged at
``model.outlier_alpha`` and counted by the outlier metrics; without ``outlier_alpha``
nothing is flagged."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streamkm.app.service import Service
from streamkm.config.schema import config_from_mapping

pytestmark = pytest.mark.unit

BATCH = 500
N_ROWS = 8000
CENTERS = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
#: Rows placed far from every center, scattered, after the first batch (so that they are
#: scored against clusters that have recent members) and within one batch.
FAR = set(range(4000, 4020))


def _write_stream(path: Path) -> None:
    rng = np.random.default_rng(11)
    x = CENTERS[rng.integers(0, 3, N_ROWS)] + rng.normal(0.0, 0.5, (N_ROWS, 2))
    for i in FAR:
        x[i] = rng.uniform(20.0, 60.0, 2) * rng.choice([-1.0, 1.0], 2)
    path.write_text("".join(json.dumps({"id": i, "x": row}) + "\n"
                            for i, row in enumerate(x.tolist())))


def _run(tmp_path: Path, **model: object) -> tuple[list[dict], CollectorRegistry]:
    _write_stream(tmp_path / "in.jsonl")
    config = config_from_mapping({
        "source": {"paths": ["in.jsonl"], "poll_interval_ms": 5},
        "decoding": {"dim": 2},
        "model": {"n_clusters": 3, "random_state": 0, **model},
        "batching": {"batch_size": BATCH, "max_wait_ms": 200},
        "checkpoint": {"dir": "ckpt", "every_batches": 5},
        "sinks": {"assignments": "out/assignments.jsonl", "events": "out/events.jsonl",
                  "dead_letter": "out/dead.jsonl"},
        "metrics": {"enabled": False},
    }, base_dir=tmp_path)
    registry = CollectorRegistry()
    service = Service(config, registry=registry)
    thread = threading.Thread(target=service.run)
    thread.start()
    deadline = time.monotonic() + 60
    while service.status.records_accepted < N_ROWS and time.monotonic() < deadline:
        time.sleep(0.02)
    service.request_stop()
    thread.join(timeout=30)
    assert service.status.records_accepted == N_ROWS
    lines = (tmp_path / "out/assignments.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines], registry


def test_flagged_records_are_written_and_counted(tmp_path: Path) -> None:
    rows, registry = _run(tmp_path, outlier_alpha=0.01)
    assert len(rows) == N_ROWS
    for row in rows:
        assert set(row) == {"id", "cluster", "distance", "sq_distance", "step", "novelty",
                            "outlier", "second_cluster", "margin"}
        assert 0 < row["novelty"] <= 1 and row["outlier"] == (row["novelty"] <= 0.01)
        assert row["second_cluster"] in {0, 1, 2} - {row["cluster"]}
        assert row["margin"] >= 0
    flagged = {int(row["id"]) for row in rows if row["outlier"]}
    assert FAR <= flagged
    inliers = N_ROWS - len(FAR)
    assert len(flagged - FAR) < 0.03 * inliers        # calibrated: about alpha of inliers
    assert registry.get_sample_value("streamkm_outliers_total") == len(flagged)
    assert registry.get_sample_value("streamkm_outlier_alpha") == 0.01
    last_step = max(row["step"] for row in rows)
    last = [row["outlier"] for row in rows if row["step"] == last_step]
    assert registry.get_sample_value("streamkm_outlier_ratio") == pytest.approx(
        sum(last) / len(last))


def test_without_outlier_alpha_nothing_is_flagged_but_novelty_is_written(
        tmp_path: Path) -> None:
    rows, registry = _run(tmp_path)
    assert len(rows) == N_ROWS and not any(row["outlier"] for row in rows)
    by_id = {int(row["id"]): row for row in rows}
    # the far records are still recognisable by their score
    assert max(by_id[i]["novelty"] for i in FAR) < 0.01
    assert registry.get_sample_value("streamkm_outliers_total") == 0
    assert registry.get_sample_value("streamkm_outlier_ratio") == 0
    assert registry.get_sample_value("streamkm_outlier_alpha") == 0
