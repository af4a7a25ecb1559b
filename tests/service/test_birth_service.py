"""Births and retirements in the service: a new group of records that appears mid-stream is
born as a cluster (a ``born`` line in the events file, the births counter, its id in the
assignments), and a cluster whose records stop is retired (``retired`` line and counter)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streamkm.app.service import Service
from streamkm.config.schema import config_from_mapping
from tests.service.test_drift_service import _run_until

pytestmark = pytest.mark.unit

BATCH = 300
N_BATCHES = 40
MODE_AT = 15
CENTERS = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 0.0], [0.0, 6.0, 0.0]])


def _write_stream(path: Path) -> None:
    """Three blobs; from MODE_AT on a fourth group at (6, 6, 6) replaces the rows of blob 2."""
    rng = np.random.default_rng(0)
    lines = []
    for b in range(N_BATCHES):
        comp = rng.integers(0, 3, BATCH)
        x = CENTERS[comp] + rng.normal(size=(BATCH, 3))
        if b >= MODE_AT:
            moved = comp == 2
            x[moved] = np.array([6.0, 6.0, 6.0]) + rng.normal(size=(int(moved.sum()), 3))
        lines += [json.dumps({"id": b * BATCH + i, "x": row}) for i, row in enumerate(x.tolist())]
    path.write_text("\n".join(lines) + "\n")


def test_service_reports_a_birth_and_a_retirement(tmp_path: Path) -> None:
    _write_stream(tmp_path / "in.jsonl")
    registry = CollectorRegistry()
    config = config_from_mapping({
        "source": {"paths": ["in.jsonl"], "poll_interval_ms": 5},
        "decoding": {"dim": 3},
        "model": {"n_clusters": 3, "random_state": 0, "outlier_alpha": 0.01,
                  "kernel": "linear"},
        "batching": {"batch_size": BATCH, "max_wait_ms": 200},
        "checkpoint": {"dir": "ckpt", "every_batches": 7},
        "sinks": {"assignments": "out/assignments.jsonl", "events": "out/events.jsonl",
                  "dead_letter": "out/dead.jsonl"},
        "metrics": {"enabled": False},
        "drift": {"enabled": True, "birth_rows": 64, "retire_after": 8},
    }, base_dir=tmp_path)
    service = Service(config, registry=registry)
    _run_until(service, BATCH * N_BATCHES)
    events = [json.loads(line) for line in (tmp_path / "out/events.jsonl").read_text().splitlines()]
    born = [e for e in events if e["event"] == "born"]
    retired = [e for e in events if e["event"] == "retired"]
    assert len(born) == 1 and born[0]["cluster_id"] == 3 and born[0]["rows"] >= 64
    assert len(retired) == 1 and retired[0]["cluster_id"] != 3
    assert born[0]["step"] < retired[0]["step"]
    assert registry.get_sample_value("streamkm_cluster_births_total") == 1
    assert registry.get_sample_value("streamkm_cluster_retirements_total") == 1
    assert service.status.cluster_births == 1 and service.status.cluster_retirements == 1
    assert service.status.clusters == 3
    last = [json.loads(line)["cluster"] for line in
            (tmp_path / "out/assignments.jsonl").read_text().splitlines()[-BATCH:]]
    assert retired[0]["cluster_id"] not in last and 3 in last
