"""The Kafka source's backpressure on the real broker: a poll takes no more than the fullest
partition buffer has room for, nothing is paused, and reading slowly loses or repeats no
record."""

from __future__ import annotations

import time
from typing import Any

import pytest

from streamkm_connectors.kafka_source import KafkaSource
from tests.connectors.conftest import PartitionBuilder
from tests.helpers.kafka_broker import FAST_GROUP, TansuBroker, create_topics, produce

pytestmark = pytest.mark.kafka

TOPIC, PARTITIONS, PER_PARTITION, BOUND = "features-backpressure", 4, 1500, 200


def test_a_slow_reader_gets_every_record_once_with_bounded_buffers(
        kafka_broker: TansuBroker) -> None:
    create_topics(kafka_broker.bootstrap, {TOPIC: PARTITIONS})
    produce(kafka_broker.bootstrap, TOPIC,
            [(None, f"{p}:{i}".encode(), p) for i in range(PER_PARTITION)
             for p in range(PARTITIONS)])
    source = KafkaSource(topics=[TOPIC], max_buffered_records=BOUND, consumer_settings={
        "bootstrap_servers": kafka_broker.bootstrap, "group_id": "g-backpressure",
        "auto_offset_reset": "earliest", "max_poll_records": 500, **FAST_GROUP})
    service = PartitionBuilder(source)
    source.start(service)
    got: dict[str, list[int]] = {}
    try:
        deadline = time.monotonic() + 60
        while len(service.parts) < PARTITIONS or max(
                (p.buffered for p in service.parts.values()), default=0) < BOUND:
            assert time.monotonic() < deadline, "the buffers never filled"
            source.poll(0.2)
        # Buffers full: more polls take one record each, whatever the consumer holds.
        extra = 10
        for _ in range(extra):
            source.poll(0.05)
        assert max(p.buffered for p in service.parts.values()) <= BOUND + extra
        assert not source.consumer.paused()
        # Read slowly (a fraction of the bound per round) until every partition is at its end.
        while sum(len(v) for v in got.values()) < PARTITIONS * PER_PARTITION:
            assert time.monotonic() < deadline + 60, f"stalled at {_counts(got)}"
            for key, part in service.parts.items():
                got.setdefault(key, []).extend(
                    int(r.position["offset"]) for r in part.next_batch(BOUND // 4))
            source.poll(0.05)
    finally:
        source.close()
    assert got == {f"{TOPIC}:{p}": list(range(PER_PARTITION)) for p in range(PARTITIONS)}


def _counts(got: dict[str, Any]) -> dict[str, int]:
    return {key: len(offsets) for key, offsets in got.items()}
