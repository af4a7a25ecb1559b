"""The Kafka source hands the batcher whole batches, on each Kafka client.

A 4-partition topic holding more records than a batch, read in-process by the source of
``[kafka] client`` against the real broker: one ``poll`` takes everything the consumer has
fetched across partitions (more than ``max_poll_records``), and the batcher then forms a
full batch in a single decode call (one share from every partition), not in a shrinking
series of small pieces. Every record is handed out once, in offset order per partition.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from streamkm.config.schema import config_from_mapping
from streamkm.io.batcher import Batcher
from streamkm.io.decoding import RecordDecoder
from streamkm_connectors.registration import kafka_source
from tests.connectors.conftest import PartitionBuilder, client_tag
from tests.helpers.kafka_broker import (
    DIM,
    FAST_GROUP,
    TansuBroker,
    create_topics,
    produce,
    valid_value,
)

pytestmark = pytest.mark.kafka

N_PARTITIONS, PER_PARTITION, BATCH, MAX_POLL = 4, 1500, 1024, 200


class _CountingDecoder(RecordDecoder):
    """The real decoder, counting its ``decode_many`` calls."""

    calls = 0

    def decode_many(self, records: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return super().decode_many(records, *args, **kwargs)


def test_one_poll_takes_what_was_fetched_and_a_batch_is_one_decode(
        kafka_broker: TansuBroker, kafka_client: str) -> None:
    topic = f"whole-batches-{client_tag(kafka_client)}"
    create_topics(kafka_broker.bootstrap, {topic: N_PARTITIONS})
    n = N_PARTITIONS * PER_PARTITION
    produce(kafka_broker.bootstrap, topic,
            [(None, valid_value(i), i % N_PARTITIONS) for i in range(n)])
    config = config_from_mapping({
        "source": {"kind": "kafka", "topics": [topic], "group_id": f"g-{topic}",
                   "max_poll_records": MAX_POLL, **FAST_GROUP},
        "kafka": {"bootstrap_servers": [kafka_broker.bootstrap], "client": kafka_client},
        "decoding": {"dim": DIM}, "model": {"n_clusters": 4}}, env={})
    source = kafka_source(config.source, config, None)
    builder = PartitionBuilder(source)
    source.start(builder)
    try:
        deadline = time.monotonic() + 60
        polls: list[int] = []
        while sum(p.buffered for p in builder.parts.values()) < BATCH:
            assert time.monotonic() < deadline, f"not enough records fetched: {polls}"
            polls.append(source.poll(0.2))
        assert len(builder.parts) == N_PARTITIONS
        assert max(polls) > MAX_POLL, polls  # one poll took several consumer polls' worth
        # wait (bounded) until every partition has buffered at least a quarter batch
        while min(p.buffered for p in builder.parts.values()) < BATCH // N_PARTITIONS:
            assert time.monotonic() < deadline, {k: p.buffered for k, p in builder.parts.items()}
            source.poll(0.2)

        decoder = _CountingDecoder(format="json", dim=DIM)
        batcher = Batcher(dict(builder.parts), decoder, dim=DIM, batch_size=BATCH,
                          max_wait_s=0.5, poll_interval_s=0.05)

        def wait(seconds: float) -> bool:
            source.poll(seconds)
            return False

        batch = batcher.collect(min_valid=1, wait=wait)
        assert batch is not None and batch.n_valid == BATCH
        assert decoder.calls == 1

        seen = list(batch.ids)
        while len(seen) < n:
            assert time.monotonic() < deadline + 60, len(seen)
            more = batcher.collect(min_valid=1, wait=wait)
            if more is not None:
                seen.extend(more.ids)
        assert len(seen) == n and len(set(seen)) == n
        assert {key: p.snapshot()["offset"] for key, p in builder.parts.items()} == {
            f"{topic}:{p}": PER_PARTITION for p in range(N_PARTITIONS)}
    finally:
        source.close()
