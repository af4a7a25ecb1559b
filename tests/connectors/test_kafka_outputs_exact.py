"""Kafka outputs under crashes: the documented reader rule is exact (on each Kafka client).

The service (a real ``streamkm run`` subprocess) reads a topic that a producer keeps
writing to, and is killed with SIGKILL several times while it does. Assignments are written
again after every restart (Kafka cannot take them back, and batch boundaries differ after a
restart so the repeats may carry other steps), yet the last assignment per id (the message
key) covers every valid record exactly once and comes from the surviving run; dead letters
likewise by their position key.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.connectors.conftest import client_tag
from tests.helpers.kafka_broker import (
    TansuBroker,
    create_topics,
    latest_checkpoint,
    model_count,
    read_topic,
    write_config,
)
from tests.helpers.kafka_outputs import (
    PacedProducer,
    check_assignments_exact,
    check_dead_letters_exact,
    finish_stream,
    kill_while_producing,
)

pytestmark = pytest.mark.kafka


@pytest.mark.slow
def test_sigkill_while_producing_last_assignment_per_id_is_exact(
        kafka_broker: TansuBroker, kafka_client: str, tmp_path: Path) -> None:
    topic = f"exact-kill-{client_tag(kafka_client)}"
    out = f"{topic}-out"
    create_topics(kafka_broker.bootstrap, {topic: 3, f"{out}-assignments": 3,
                                           f"{out}-events": 1, f"{out}-dlq": 1})
    config = write_config(tmp_path, kafka_broker.bootstrap, topic=topic, group=f"g-{topic}",
                          out_prefix=out, batch_size=20, client=kafka_client)
    log = tmp_path / "service.log"
    producer = PacedProducer(kafka_broker.bootstrap, topic, minimum=1500)  # ~150 records/s
    producer.start()
    rng = np.random.default_rng(11)
    try:
        kill_while_producing(config, log, producer, rng, kills=3)
        finish_stream(config, log, producer, tmp_path)
    finally:
        producer.finish()

    n_valid = len(producer.valid_ids)
    assert model_count(tmp_path) == n_valid  # the model: exactly once
    assert latest_checkpoint(tmp_path).counters["records_rejected"] == len(producer.poison)

    messages = read_topic(kafka_broker.bootstrap, f"{out}-assignments")
    assert len(messages) >= n_valid
    last = check_assignments_exact(messages, producer.valid_ids)
    # The last assignments are the surviving run's: along each input partition (record
    # i is on partition i % 3) their model steps never go back.
    for partition in range(3):
        steps = [last[f"r{i}"]["step"] for i in range(partition, producer.produced, 3)
                 if f"r{i}" in last]
        assert steps == sorted(steps), partition

    check_dead_letters_exact(read_topic(kafka_broker.bootstrap, f"{out}-dlq"), topic,
                             producer.poison)
