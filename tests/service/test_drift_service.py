"""Drift handling in the service: the [drift] section, split events in the events file,
stable ids in the assignments, split / cluster metrics, and a restart that keeps them."""

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
from streamkm.drift import DriftPolicy
from streamkm.exceptions import ConfigError

pytestmark = pytest.mark.unit

BATCH = 500
N_BATCHES = 30
CHANGE = 10
CENTERS = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])


def _write_stream(path: Path) -> None:
    rng = np.random.default_rng(4)
    lines = []
    for b in range(N_BATCHES):
        comp = rng.integers(0, 3, BATCH)
        x = CENTERS[comp] + rng.normal(0.0, 0.5, (BATCH, 2))
        if b >= CHANGE:
            x[comp == 2, 0] += np.where(rng.random(int((comp == 2).sum())) < 0.5, -2.0, 2.0)
        lines += [json.dumps({"id": b * BATCH + i, "x": row}) for i, row in enumerate(x.tolist())]
    path.write_text("\n".join(lines) + "\n")


def _config(tmp_path: Path, **drift: object):
    return config_from_mapping({
        "source": {"paths": ["in.jsonl"], "poll_interval_ms": 5},
        "decoding": {"dim": 2},
        "model": {"n_clusters": 3, "random_state": 0},
        "batching": {"batch_size": BATCH, "max_wait_ms": 200},
        "checkpoint": {"dir": "ckpt", "every_batches": 7},
        "sinks": {"assignments": "out/assignments.jsonl", "events": "out/events.jsonl",
                  "dead_letter": "out/dead.jsonl"},
        "metrics": {"enabled": False},
        "drift": {"enabled": True, **drift},
    }, base_dir=tmp_path)


def _run_until(service: Service, accepted: int, timeout: float = 60.0) -> None:
    thread = threading.Thread(target=service.run)
    thread.start()
    deadline = time.monotonic() + timeout
    while service.status.records_accepted < accepted and time.monotonic() < deadline:
        time.sleep(0.02)
    service.request_stop()
    thread.join(timeout=30)
    assert service.status.records_accepted == accepted


def test_service_splits_a_drifting_cluster_and_reports_it(tmp_path: Path) -> None:
    _write_stream(tmp_path / "in.jsonl")
    registry = CollectorRegistry()
    service = Service(_config(tmp_path, k_max=5), registry=registry)
    _run_until(service, BATCH * N_BATCHES)
    assert registry.get_sample_value("streamkm_cluster_splits_total") == 1
    assert registry.get_sample_value("streamkm_cluster_merges_total") == 0
    assert registry.get_sample_value("streamkm_clusters") == 4
    assert service.status.clusters == 4 and service.status.cluster_splits == 1
    events = [json.loads(line) for line in (tmp_path / "out/events.jsonl").read_text().splitlines()]
    splits = [e for e in events if e["event"] == "split"]
    assert len(splits) == 1 and splits[0]["into"][1] == 3
    assert CHANGE < splits[0]["step"] <= CHANGE + 11
    clusters = [json.loads(line)["cluster"]
                for line in (tmp_path / "out/assignments.jsonl").read_text().splitlines()]
    assert len(clusters) == BATCH * N_BATCHES and set(clusters) == {0, 1, 2, 3}

    registry = CollectorRegistry()
    again = Service(_config(tmp_path, k_max=5), registry=registry)
    again.start()
    try:
        assert registry.get_sample_value("streamkm_clusters") == 4
        assert again.model.cluster_ids_.tolist() == [0, 1, 2, 3]
        assert int(again.model.counts_.sum()) == BATCH * N_BATCHES
    finally:
        again.close(final_checkpoint=False)


@pytest.mark.parametrize("drift, quoted", [
    ({"enabled": False, "k_max": 5}, "drift.k_max = 5 needs drift.enabled = true"),
    ({"enabled": True, "k_max": 2}, "n_clusters=3"),
    ({"enabled": True, "threshold": 0}, "'drift.threshold' has bad value 0"),
    ({"enabled": True, "typo": 1}, "unknown config key 'drift.typo' (value 1)"),
])
def test_drift_section_errors_name_the_key(tmp_path: Path, drift: dict, quoted: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping({
            "source": {"paths": ["in.jsonl"]}, "decoding": {"dim": 2},
            "model": {"n_clusters": 3}, "drift": drift,
        }, base_dir=tmp_path)
    assert quoted in str(info.value)


def test_drift_env_override_and_defaults(tmp_path: Path) -> None:
    raw = {"source": {"paths": ["in.jsonl"]}, "decoding": {"dim": 2}, "model": {"n_clusters": 3}}
    assert config_from_mapping(raw, base_dir=tmp_path).drift.policy is None
    config = config_from_mapping(
        raw, env={"STREAMKM_DRIFT__ENABLED": "true", "STREAMKM_DRIFT__K_MAX": "7"},
        base_dir=tmp_path)
    assert config.drift.policy == DriftPolicy(k_max=7)


def test_the_demo_stream_splits_its_drifting_blob(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    import io
    import logging

    from streamkm.app.demo import DriftingStream, StatusLine, demo_config

    stream = DriftingStream(seed=0, bad_fraction=0.0)
    n = 36_000
    (tmp_path / "stream.jsonl").write_bytes(
        b"".join(stream.lines(start, 4000) for start in range(0, n, 4000)))
    registry = CollectorRegistry()
    service = Service(demo_config(tmp_path, metrics_port=0, env={}), registry=registry,
                      serve_metrics=False)
    with caplog.at_level(logging.INFO, logger="streamkm.service"):
        _run_until(service, n)
    assert registry.get_sample_value("streamkm_cluster_splits_total") >= 1
    assert registry.get_sample_value("streamkm_clusters") == 4 + service.status.cluster_splits
    logged = [r for r in caplog.records if r.getMessage() == "cluster_split"]
    assert logged and logged[0].fields["into"][0] == logged[0].fields["cluster"]
    lines = StatusLine(service, threading.Event(), io.StringIO()).new_cluster_events()
    first = logged[0].fields
    assert lines and lines[0].startswith(
        f"cluster {first['cluster']} split into {first['into'][0]} and {first['into'][1]} "
        f"at step {first['step']} (")
