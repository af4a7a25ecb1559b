"""The service as a subprocess against a real Kafka-protocol broker (Tansu), on each Kafka
client library (``[kafka] client``).

* all records of a 3-partition topic are consumed, poison messages go to the dead-letter
  topic with reason headers, keys and headers reach the assignments, metrics move;
* SIGKILL mid-stream several times, with static membership (``group_instance_id``): the
  model holds every valid record exactly once and every id reaches the assignments topic at
  least once. This one runs on kafka-python (the default client) only: the client-specific
  part of a crash and restart (each partition resumed at the checkpoint's offsets, outputs
  produced again) is killed on both clients in ``test_kafka_outputs_exact.py``, which
  asserts the same of the model and, of the outputs, that the last assignment per id is
  exact.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.kafka_broker import (
    TansuBroker,
    create_topics,
    latest_checkpoint,
    model_count,
    produce,
    read_topic,
    valid_value,
    write_config,
)
from tests.connectors.conftest import client_tag
from tests.helpers.processes import (
    count_events,
    kill,
    metrics_url,
    scrape,
    start_service,
    stop,
    wait_until,
)

pytestmark = pytest.mark.kafka

POISON = [
    (b'{"id": "p0", "x": [1.0', "unparseable"),
    (b'{"id": "p1", "x": [1.0, 2.0, 3.0]}', "wrong_dimension"),
    (b'{"id": "p2", "x": [NaN, 1.0]}', "non_finite"),
    (b"\xff\xfe garbage", "encoding"),
    (b"", "empty"),
]


def _topics(name: str) -> dict[str, int]:
    return {name: 3, f"{name}-out-assignments": 3, f"{name}-out-events": 1,
            f"{name}-out-dlq": 1}


# Alone: its 10 s max_poll_interval_ms (what Tansu's join needs) is shorter than a checkpoint
# fsync under the parallel suite's I/O (12.8 s once), which costs a rebalance and a failed
# commit that a healthy run must not have.
@pytest.mark.alone
def test_consumes_every_partition_dead_letters_poison_and_reports(
        kafka_broker: TansuBroker, kafka_client: str, tmp_path: Path) -> None:
    topic, n_valid = f"features-basic-{client_tag(kafka_client)}", 900
    create_topics(kafka_broker.bootstrap, _topics(topic))
    messages = [(f"k{i}".encode(), valid_value(i), i % 3) for i in range(n_valid)]
    for j, (value, _) in enumerate(POISON):  # in the middle of partitions 0..2
        messages.insert(300 + 50 * j, (f"bad{j}".encode(), value, j % 3))
    produce(kafka_broker.bootstrap, topic, messages, headers=[("trace", b"t-1")])

    config = write_config(tmp_path, kafka_broker.bootstrap, topic=topic, group=f"g-{topic}",
                          out_prefix=f"{topic}-out", metrics_port=0, client=kafka_client)
    log = tmp_path / "service.log"
    proc = start_service(config, log)
    try:
        wait_until(lambda: metrics_url(log) is not None, 30, "metrics endpoint", [proc])
        wait_until(lambda: count_events(log, "checkpoint_written") > 1
                   and latest_checkpoint(tmp_path).counters.get("records_read", 0)
                   >= len(messages), 60, "all records checkpointed", [proc])
        url = metrics_url(log)
        assert url is not None
        wait_until(lambda: scrape(url).get("streamkm_kafka_commits_total", 0) > 0, 10,
                   "a commit", [proc])
        metrics = scrape(url)
        assert stop(proc) == 0
    finally:
        kill(proc)

    ckpt = latest_checkpoint(tmp_path)
    assert model_count(tmp_path) == n_valid
    assert ckpt.counters["records_accepted"] == n_valid
    assert ckpt.counters["records_rejected"] == len(POISON)
    assert sorted(ckpt.positions) == [f"{topic}:0", f"{topic}:1", f"{topic}:2"]
    assert sum(p["offset"] for p in ckpt.positions.values()) == len(messages)

    assignments = read_topic(kafka_broker.bootstrap, f"{topic}-out-assignments")
    by_id = {}
    for msg in assignments:
        entry = json.loads(msg.value)
        by_id[entry["id"]] = (msg, entry)
    assert set(by_id) == {f"r{i}" for i in range(n_valid)}
    msg, entry = by_id["r7"]
    # keyed by the record id whatever the input key (compaction / last-per-id readers);
    # the input key and headers travel as headers
    assert msg.key == b"r7" and ("trace", b"t-1") in msg.headers
    assert ("input_key", b"k7") in msg.headers
    assert 0 <= entry["cluster"] < 4 and entry["step"] >= 1
    assert entry["distance"] == pytest.approx(np.sqrt(entry["sq_distance"]))

    dead = read_topic(kafka_broker.bootstrap, f"{topic}-out-dlq")
    assert len(dead) == len(POISON)
    got = {msg.value: dict(msg.headers) for msg in dead}
    keys = {msg.key for msg in dead}
    assert len(keys) == len(POISON)  # keyed by position: one key per rejected record
    for msg in dead:
        headers = dict(msg.headers)
        assert msg.key == b":".join((headers["source_topic"], headers["source_partition"],
                                     headers["source_offset"]))
    for value, reason in POISON:
        headers = got[value]
        assert headers["reason"] == reason.encode()
        assert headers["source_topic"] == topic.encode()
        assert int(headers["source_partition"]) in (0, 1, 2)
        assert int(headers["source_offset"]) >= 0
        assert headers["detail"]

    assert metrics["streamkm_kafka_rebalances_total"] >= 1
    assert metrics['streamkm_kafka_broker_connected{client="consumer"}'] == 1
    assert metrics['streamkm_kafka_broker_connected{client="producer"}'] == 1
    assert metrics.get("streamkm_kafka_commit_failures_total") == 0
    lags = {k: v for k, v in metrics.items()
            if k.startswith("streamkm_kafka_consumer_lag_records")}
    assert len(lags) == 3 and all(v == 0 for v in lags.values()), lags


@pytest.mark.slow
def test_sigkill_mid_stream_model_exactly_once_assignments_at_least_once(
        kafka_broker: TansuBroker, tmp_path: Path) -> None:
    kafka_client = "kafka-python"
    topic, n_valid = f"features-kill-{client_tag(kafka_client)}", 3000
    create_topics(kafka_broker.bootstrap, _topics(topic))
    produce(kafka_broker.bootstrap, topic,
            [(f"k{i}".encode(), valid_value(i), i % 3) for i in range(n_valid)])
    # Small batches and static membership so the stream lasts across several kills and a
    # restarted process takes its partitions back without waiting for the session timeout.
    config = write_config(tmp_path, kafka_broker.bootstrap, topic=topic, group=f"g-{topic}",
                          out_prefix=f"{topic}-out", batch_size=20, client=kafka_client,
                          extra_source=f'group_instance_id = "streamkm-kill-{topic}"')
    log = tmp_path / "service.log"
    rng = np.random.default_rng(7)
    kills = 0
    for _ in range(3):
        proc = start_service(config, log)
        try:
            before = count_events(log, "checkpoint_written")
            target = before + int(rng.integers(2, 6))
            wait_until(lambda: count_events(log, "checkpoint_written") >= target, 60,
                       "checkpoints before the kill", [proc], interval=0.01)
            time.sleep(float(rng.uniform(0, 0.05)))
        finally:
            kill(proc)
        kills += 1
        assert model_count(tmp_path) < n_valid, "the stream ended before the kill"
    assert kills == 3

    proc = start_service(config, log)
    try:
        wait_until(lambda: latest_checkpoint(tmp_path).counters.get("records_read", 0)
                   >= n_valid, 90, "the rest of the stream", [proc])
        assert stop(proc) == 0
    finally:
        kill(proc)

    assert model_count(tmp_path) == n_valid
    assert latest_checkpoint(tmp_path).counters["records_accepted"] == n_valid
    ids = [json.loads(m.value)["id"]
           for m in read_topic(kafka_broker.bootstrap, f"{topic}-out-assignments")]
    assert set(ids) == {f"r{i}" for i in range(n_valid)}
    assert len(ids) >= n_valid
