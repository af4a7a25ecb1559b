"""A consumer-group rebalance while a batch steps beside the loop (``[batching] overlap``).

Process A steps slowly, so that a step is nearly always in flight; B joins the group and
takes partitions over. A's revocation finishes the batch in flight (writes its outputs,
hands its positions over) before it checkpoints and commits, so B starts where A's written
outputs end: over both, every record is assigned once and both models together hold every
record once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streamkm.app.service import Service
from streamkm.config.schema import config_from_mapping
from streamkm.io.batcher import Batch
from streamkm.runtime import Learned
from streamkm.runtime.stepping import STEP_THREAD_NAME
from tests.helpers.kafka_broker import (
    DIM,
    TansuBroker,
    create_topics,
    latest_checkpoint,
    produce,
    valid_value,
)
from tests.helpers.processes import complete_records

pytestmark = [pytest.mark.kafka, pytest.mark.slow,
              # alone: the group's timeouts (session_timeout_ms 6 s,
              # max_poll_interval_ms 10 s) must hold while A steps slowly and both
              # services compile and join
              pytest.mark.alone]

TOPIC, GROUP, PARTITIONS, N, BATCH = "features-rebalance-overlap", "g-overlap", 4, 2000, 50
SLOW_STEP_S = 0.15


def _config(folder: Path, bootstrap: str) -> Any:
    return config_from_mapping({
        "source": {"kind": "kafka", "topics": [TOPIC], "group_id": GROUP,
                   "auto_offset_reset": "earliest", "session_timeout_ms": 6000,
                   "heartbeat_interval_ms": 1000, "max_poll_interval_ms": 10000,
                   "poll_interval_ms": 50},
        "kafka": {"bootstrap_servers": [bootstrap], "reconnect_backoff_max_ms": 1000},
        "decoding": {"dim": DIM},
        "model": {"n_clusters": 4, "tau": 40, "n_init": 1, "random_state": 3},
        "batching": {"batch_size": BATCH, "first_batch_size": BATCH, "max_wait_ms": 200,
                     "overlap": True},
        "checkpoint": {"dir": "ck", "every_batches": 4, "every_seconds": 1},
        "sinks": {"assignments": "assignments.jsonl", "events": "events.jsonl",
                  "dead_letter": "dead.jsonl"},
        "metrics": {"enabled": False}, "ui": {"enabled": False},
    }, base_dir=folder)


class SlowSteps:
    """A's learner step, slowed down on the step thread so that a step is in flight most
    of the time; records whether a step was in flight when each partition change came."""

    def __init__(self, service: Service) -> None:
        self._learn = service.learner.learn
        self._settle = service._settle_for_rebalance
        self.service = service
        self.threads: list[str] = []
        self.in_flight_at_change: list[bool] = []
        service.learner.learn = self.learn  # type: ignore[method-assign]
        service._settle_for_rebalance = self.settle  # type: ignore[method-assign]

    def learn(self, batch: Batch) -> Learned:
        self.threads.append(threading.current_thread().name)
        if self.threads[-1] == STEP_THREAD_NAME:
            time.sleep(SLOW_STEP_S)
        return self._learn(batch)

    def settle(self) -> bool:
        self.in_flight_at_change.append(self.service.stepping)
        return self._settle()


def _assigned(folder: Path) -> list[str]:
    return [record["id"] for record in complete_records(folder / "assignments.jsonl")]


def _wait(condition: Any, timeout: float, what: str, runners: list[threading.Thread]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert all(r.is_alive() for r in runners), f"a service ended while {what}"
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.05)


def test_partitions_revoked_while_a_batch_steps_commit_only_written_batches(
        kafka_broker: TansuBroker, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topics(bootstrap, {TOPIC: PARTITIONS})
    produce(bootstrap, TOPIC, [(f"k{i}".encode(), valid_value(i), i % PARTITIONS)
                               for i in range(N)])
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a = Service(_config(a_dir, bootstrap), registry=CollectorRegistry())
    slow = SlowSteps(a)
    b = Service(_config(b_dir, bootstrap), registry=CollectorRegistry())
    errors: list[BaseException] = []

    def run(service: Service) -> None:
        try:
            service.run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    runners = [threading.Thread(target=run, args=(a,), name="service-a")]
    runners[0].start()
    try:
        _wait(lambda: len(a.parts) == PARTITIONS and len(_assigned(a_dir)) >= 4 * BATCH, 60,
              "A owning every partition and stepping", runners)
        runners.append(threading.Thread(target=run, args=(b,), name="service-b"))
        runners[1].start()
        _wait(lambda: b.parts and a.parts and len(a.parts) + len(b.parts) == PARTITIONS, 60,
              "the partitions split between A and B", runners)
        assert len(_assigned(a_dir)) < N, "A read everything before B joined: no overlap"
        _wait(lambda: len(_assigned(a_dir)) + len(_assigned(b_dir)) >= N, 120,
              "A and B reading every record", runners)
    finally:
        a.request_stop()
        b.request_stop()
        for runner in runners:
            runner.join(60)
    assert not errors, errors
    assert not any(r.is_alive() for r in runners)

    assert any(slow.in_flight_at_change), "no partition change came while A was stepping"
    assert STEP_THREAD_NAME in slow.threads
    ids = _assigned(a_dir) + _assigned(b_dir)
    assert len(ids) == N and set(ids) == {f"r{i}" for i in range(N)}
    assert _assigned(b_dir), "B took no partition's records over"
    counts = [int(latest_checkpoint(d).model_arrays["counts"].sum()) for d in (a_dir, b_dir)]
    assert sum(counts) == N
