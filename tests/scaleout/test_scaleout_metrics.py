"""Service metrics a scale-out process sets like a single process does (batch latency and
objective, checkpoint duration, source lag) and the leader-only gauges reset on step-down,
without a broker (the fakes of ``test_scaleout_retry``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streamkm.io.checkpoint import CheckpointStore
from streamkm.scaleout.leader_role import LeaderRole
from tests.scaleout.test_scaleout_retry import KEY, FakePart, World

pytestmark = pytest.mark.unit


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels or None)


def test_worker_batch_sets_processing_seconds_and_objective(tmp_path: Path) -> None:
    w = World(tmp_path)
    reg = w.svc.metrics.registry
    assert sample(reg, "streamkm_batch_processing_seconds_count") == 0
    w.own()
    assert w.svc.model is None
    w.process(0, 20)  # before the first model: held, no objective yet
    assert sample(reg, "streamkm_batch_processing_seconds_count") == 1
    assert sample(reg, "streamkm_batch_objective") == 0
    w.land(1)
    w.publish()  # first version: the held batch is assigned with it
    held = sample(reg, "streamkm_batch_objective")
    assert held is not None and held > 0
    w.process(20, 50)
    assert sample(reg, "streamkm_batch_processing_seconds_count") == 2
    assert sample(reg, "streamkm_batch_processing_seconds_sum") > 0
    # the mean squared kernel distance of the batch under the adopted model
    rng = np.random.default_rng(20)
    x = np.array([[0.0, 0.0], [5.0, 5.0]])[np.arange(20, 50) % 2] + rng.normal(0, 0.3, (30, 2))
    expected = float(w.svc.model.transform(x).min(axis=1).mean())
    assert sample(reg, "streamkm_batch_objective") == pytest.approx(expected, rel=1e-6)
    assert w.svc.status.objective == pytest.approx(expected, rel=1e-6)


def test_worker_checkpoint_observes_its_duration(tmp_path: Path) -> None:
    w = World(tmp_path)
    reg = w.svc.metrics.registry
    w.svc.store = CheckpointStore(tmp_path / "ck")
    w.worker.link.set_connected(True)
    w.own()
    w.process(0, 10)
    w.svc._last_checkpoint_time = -1e9  # every_seconds is due
    w.svc._maybe_checkpoint()
    checkpoint = w.svc.store.load_latest()
    assert checkpoint is not None  # written through the checkpoint store, like a process's
    assert checkpoint.positions[KEY]["offset"] == 10
    assert checkpoint.meta["scaleout"]["member"] == "w"
    assert sample(reg, "streamkm_checkpoint_duration_seconds_count") == 1
    assert sample(reg, "streamkm_checkpoints_total") == 1
    assert sample(reg, "streamkm_checkpoint_last_success_timestamp_seconds") > 0
    w.svc.checkpoint(reason="shutdown")  # the final one at a graceful stop counts too
    assert sample(reg, "streamkm_checkpoint_duration_seconds_count") == 2


def test_worker_skips_checkpoints_while_the_broker_is_away(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.svc.store = CheckpointStore(tmp_path / "ck")
    w.worker.link.set_connected(False)
    assert not w.svc.checkpoint(reason="interval")
    assert w.svc.store.load_latest() is None


class LagPart(FakePart):
    lag_unit = "records"

    def __init__(self, key: str, offset: int, lag: float | None) -> None:
        super().__init__(key, offset)
        self._lag = lag

    def lag(self) -> float | None:
        return self._lag


def test_source_lag_per_partition_read_and_removed_on_revocation(tmp_path: Path) -> None:
    w = World(tmp_path)
    reg = w.svc.metrics.registry
    w.svc.parts = {"t:0": LagPart("t:0", 0, 7.0), "t:1": LagPart("t:1", 0, None)}
    w.svc._update_lag()
    assert sample(reg, "streamkm_source_lag_records", partition="t:0") == 7.0
    assert sample(reg, "streamkm_source_lag_records", partition="t:1") is None  # unknown yet
    w.worker.on_revoked(["t:0"], lost=False)
    assert sample(reg, "streamkm_source_lag_records", partition="t:0") is None


def test_step_down_resets_the_leader_only_gauges(tmp_path: Path) -> None:
    w = World(tmp_path)
    sm, reg = w.svc.scaleout_metrics, w.svc.metrics.registry
    w.worker.leader = LeaderRole(w.config, w.svc, w.worker.metrics, "w", w.worker.stats, None,
                                 None, w.worker._publish_backoff, lambda: None)
    sm.leader.set(1)
    sm.updates_lag.set(42)
    sm.model_versions_behind.set(3)
    w.worker.leader.step_down("not_elected")
    assert sample(reg, "streamkm_leader") == 0
    assert sample(reg, "streamkm_updates_lag") == 0
    assert sample(reg, "streamkm_model_versions_behind") == 0
