"""Scale-out outputs under a worker crash: the documented contract, as it stands.

Two ``streamkm run`` members in scale-out mode read a topic that a producer keeps writing
to; the worker (not the leader) is killed with SIGKILL mid-stream and restarted. Records it
had assigned after the leader's watermark are read and assigned again by the next owner,
so assignments repeat; every message is keyed by its id (dead letters by position) and the
last one per key is the only one a reader keeps. A worker sends a batch's update before its
assignments are acknowledged, so the killed worker's last batches can lose their outputs:
the test bounds that loss to the records just below the watermark its successor resumed
from (docs/scaleout.md, the outputs row), and everything else is exact.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers.kafka_broker import (
    ModelTopic,
    TansuBroker,
    latest_checkpoint,
    owned_partitions,
    read_topic,
)
from tests.helpers.kafka_outputs import (
    PacedProducer,
    check_assignments_exact,
    check_dead_letters_exact,
)
from tests.helpers.processes import (
    count_events,
    kill,
    log_events,
    start_service,
    stop,
    wait_until,
)
from tests.scaleout.test_scaleout_kafka import (
    BATCH,
    PARTITIONS,
    leaders,
    scaleout_configs,
    start_all,
    wait_for_exact_count,
)

pytestmark = pytest.mark.kafka


def _assignments_delivered(folder: Path) -> int:
    try:
        return int(latest_checkpoint(folder).sink_positions["assignments"]["delivered"])
    except (AssertionError, FileNotFoundError, KeyError):
        return 0


@pytest.mark.slow
def test_worker_sigkill_while_producing_outputs_keyed_loss_bounded(
        kafka_broker: TansuBroker, tmp_path: Path) -> None:
    bootstrap, prefix = kafka_broker.bootstrap, "so-outputs"
    configs = scaleout_configs(tmp_path, bootstrap, prefix, members="ab")
    producer = PacedProducer(bootstrap, prefix, partitions=PARTITIONS, minimum=2000)
    producer.start()
    procs, logs = start_all(configs)
    model = ModelTopic(bootstrap, f"{prefix}-model")
    try:
        wait_until(lambda: model.count() >= 300 and leaders(logs)
                   and all(owned_partitions(log) for log in logs.values()), 90,
                   "two members sharing the partitions", list(procs.values()), interval=0.2)
        leader = leaders(logs)[-1][1]
        victim = next(m for m in sorted(procs) if m != leader)
        # Killed once it assigns with a model (a worker holds the assignments of what it
        # reads before its first model version: docs/scaleout.md, the outputs row).
        wait_until(lambda: _assignments_delivered(tmp_path / victim) > 100, 60,
                   "the worker's assignments", list(procs.values()), interval=0.05)
        moved = owned_partitions(logs[victim])
        kill(procs[victim])
        killed_at = time.time()
        assert producer.is_alive(), "production ended before the kill"
        procs[victim] = start_service(configs[victim], logs[victim])
        wait_until(lambda: count_events(logs[victim], "service_started") >= 2, 60,
                   "the restarted worker", list(procs.values()), interval=0.2)
        producer.finish()
        producer.join(timeout=60)
        assert producer.error is None and not producer.is_alive()
        wait_for_exact_count(model, len(producer.valid_ids), list(procs.values()))
        for proc in procs.values():
            assert stop(proc) == 0
    finally:
        producer.finish()
        for proc in procs.values():
            kill(proc)
        model.close()

    # The successor's start on each of the victim's partitions: below it, records are done.
    takeover: dict[int, int] = {}
    for event in sorted((e for log in logs.values() for e in log_events(log)
                         if e.get("event") == "partitions_assigned"
                         and e.get("ts", 0) > killed_at), key=lambda e: e["ts"]):
        for key, mark in event.get("watermarks", {}).items():
            takeover.setdefault(int(key.rsplit(":", 1)[1]), int(mark))

    def lost_in_flight(partition: int, offset: int) -> bool:
        """A record of the victim's last batches: just below its successor's start."""
        start = takeover.get(partition)
        return (f"{prefix}:{partition}" in moved and start is not None
                and start - 2 * BATCH <= offset < start)

    # record i is offset i // 6 of partition i % 6 (round robin, 30 per chunk)
    messages = read_topic(bootstrap, f"{prefix}-out-assignments")
    written = {json.loads(m.value)["id"] for m in messages}
    lost = producer.valid_ids - written
    assert all(lost_in_flight(int(i[1:]) % PARTITIONS, int(i[1:]) // PARTITIONS)
               for i in lost), sorted(lost)[:20]
    check_assignments_exact(messages, producer.valid_ids - lost)
    dead = read_topic(bootstrap, f"{prefix}-out-dlq")
    lost_dead = {po for po in producer.poison
                 if f"{prefix}:{po[0]}:{po[1]}".encode() not in {m.key for m in dead}}
    assert all(lost_in_flight(*po) for po in lost_dead), lost_dead
    check_dead_letters_exact(dead, prefix, {po: reason for po, reason in
                                            producer.poison.items() if po not in lost_dead})
