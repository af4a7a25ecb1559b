"""Scale-out outputs under a worker crash: none lost, the last message per key exact.

Two ``streamkm run`` members in scale-out mode read a topic that a producer keeps writing
to; the worker (not the leader) is killed with SIGKILL mid-stream and restarted. A worker
sends a batch's model update (which moves the partition's watermark past the batch) only
after the batch's assignments and dead letters are acknowledged by Kafka, so every record
below the watermark its successor resumes from has its outputs; records the killed worker
had assigned above it are read and assigned again by the next owner. Every message is keyed
by its id (dead letters by position) and the last one per key is the only one a reader
keeps: every valid record has exactly one assignment, every bad one one dead letter.
(docs/scaleout.md, the outputs row; the window that remains before a member's first model
version is not exercised here: the worker is killed once it assigns with a model.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamkm.sinks import SinkSet
from streamkm_connectors.kafka_sinks import (
    AssignmentKafkaSink,
    DeadLetterKafkaSink,
    KafkaProducerHandle,
)
from tests.helpers.kafka_broker import (
    ModelTopic,
    TansuBroker,
    create_topics,
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
    start_service,
    stop,
    wait_until,
)
from tests.scaleout.test_scaleout_kafka import (
    PARTITIONS,
    leaders,
    scaleout_configs,
    start_all,
    wait_for_exact_count,
)

pytestmark = pytest.mark.kafka


def test_delivery_marks_follow_the_brokers_acknowledgements(
        kafka_broker: TansuBroker) -> None:
    """What a worker waits for before it sends a batch's update: a mark taken after the
    batch's outputs is delivered once the broker acknowledged all of them, and not before
    they were even handed to the producer."""
    bootstrap, topic = kafka_broker.bootstrap, "so-marks"
    create_topics(bootstrap, {f"{topic}-out": 2, f"{topic}-dlq": 1})
    handle = KafkaProducerHandle({"bootstrap_servers": [bootstrap]})
    sinks = SinkSet(AssignmentKafkaSink(handle, f"{topic}-out"), None,
                    DeadLetterKafkaSink(handle, f"{topic}-dlq"))
    try:
        assert sinks.delivered(sinks.delivery_mark())  # nothing written
        sinks.write_assignments([SimpleRecord()] * 2, ["a", "b"], np.array([0, 1]),
                                np.array([0.5, 0.25]), 1)
        first = sinks.delivery_mark()
        assert not sinks.delivered(first)  # queued, not handed over
        sinks.flush()
        wait_until(lambda: sinks.delivered(first), 30, "the first batch acknowledged")
        sinks.dead_letter.write_dead_letter(b"{", "invalid_json", "x",
                                            {"topic": topic, "partition": 0, "offset": 2})
        second = sinks.delivery_mark()
        assert sinks.delivered(first) and not sinks.delivered(second)
        sinks.flush()
        wait_until(lambda: sinks.delivered(second), 30, "the second batch acknowledged")
        assert sorted(m.key for m in read_topic(bootstrap, f"{topic}-out")) == [b"a", b"b"]
        assert [m.key for m in read_topic(bootstrap, f"{topic}-dlq")] == [b"so-marks:0:2"]
    finally:
        sinks.close()


class SimpleRecord:
    """An accepted input record without key or headers (what the assignment sink reads)."""

    replayed = False
    raw_key = None
    key = None
    headers = ()


def _assignments_delivered(folder: Path) -> int:
    try:
        return int(latest_checkpoint(folder).sink_positions["assignments"]["delivered"])
    except (AssertionError, FileNotFoundError, KeyError):
        return 0


@pytest.mark.slow
def test_worker_sigkill_while_producing_outputs_none_lost(
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
        # Killed once it assigns with a model (before its first model version a worker
        # sends its rows before it can assign them: docs/scaleout.md, the outputs row).
        wait_until(lambda: _assignments_delivered(tmp_path / victim) > 100, 60,
                   "the worker's assignments", list(procs.values()), interval=0.05)
        kill(procs[victim])
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

    check_assignments_exact(read_topic(bootstrap, f"{prefix}-out-assignments"),
                            producer.valid_ids)
    check_dead_letters_exact(read_topic(bootstrap, f"{prefix}-out-dlq"), prefix,
                             producer.poison)
