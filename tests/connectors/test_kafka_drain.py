"""`streamkm run` drains a large 4-partition Kafka topic to its end with the default settings.

200,000 JSON records in 4 partitions, consumed by the service as a subprocess against the real
broker, twice: with the default ``max_buffered_records`` (the consumer fetches faster than the
model learns, so the source's backpressure holds its intake many times; on each Kafka
client) and with a buffer large enough that it never does. Each run must hand every record to the model and to the
assignments file exactly once and end with every partition's checkpointed offset at the end
of the partition.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.connectors.conftest import client_tag
from tests.helpers.kafka_broker import (
    TansuBroker,
    create_topics,
    latest_checkpoint,
    model_count,
    produce,
    valid_value,
)
from tests.helpers.processes import (
    count_lines,
    kill,
    metrics_url,
    scrape,
    start_service,
    stop,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TOPIC, N_RECORDS, N_PARTITIONS = "features-drain", 200_000, 4


@pytest.fixture(scope="module")
def drain_topic(kafka_broker: TansuBroker) -> str:
    """The 4-partition topic holding ``N_RECORDS`` records ``r0 .. r<N-1>``."""
    create_topics(kafka_broker.bootstrap, {TOPIC: N_PARTITIONS})
    chunk = 50_000
    for lo in range(0, N_RECORDS, chunk):
        produce(kafka_broker.bootstrap, TOPIC,
                [(None, valid_value(i), i % N_PARTITIONS) for i in range(lo, lo + chunk)])
    return TOPIC


def _config(folder: Path, bootstrap: str, group: str, source_extra: str = "",
            client: str = "kafka-python") -> Path:
    """Service defaults except where the records come from and go to (and the client)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "streamkm.toml"
    config.write_text(f"""
[source]
kind = "kafka"
topics = ["{TOPIC}"]
group_id = "{group}"
{source_extra}
[kafka]
bootstrap_servers = ["{bootstrap}"]
client = "{client}"
[decoding]
dim = 2
[model]
n_clusters = 4
random_state = 3
[checkpoint]
dir = "ck"
[sinks]
assignments = "out/assignments.jsonl"
events = "out/events.jsonl"
dead_letter = "out/dead.jsonl"
[metrics]
enabled = true
port = 0
""")
    return config


def _drain(folder: Path, bootstrap: str, group: str, source_extra: str = "",
           client: str = "kafka-python") -> dict[str, float]:
    """Run the service until it has read every record, stop it (the final checkpoint); its
    metrics just before the stop."""
    config = _config(folder, bootstrap, group, source_extra, client)
    log = folder / "service.log"
    proc = start_service(config, log)
    try:
        wait_until(lambda: metrics_url(log) is not None, 60, "the metrics endpoint", [proc])
        assignments = folder / "out" / "assignments.jsonl"
        written = [0]

        def all_assigned() -> bool:
            written[0] = count_lines(assignments)
            return written[0] >= N_RECORDS

        try:
            wait_until(all_assigned, 150, f"all {N_RECORDS} records assigned", [proc],
                       interval=0.5)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {written[0]} assigned") from None
        url = metrics_url(log)
        assert url is not None
        metrics = _scrape_patiently(url)
        assert stop(proc) == 0
    finally:
        kill(proc)
    return metrics


def _scrape_patiently(url: str) -> dict[str, float]:
    """The metrics page, retried: on the loaded test machine a busy service can take more
    than one scrape timeout to answer."""
    for _ in range(5):
        try:
            return scrape(url)
        except OSError:
            continue
    return scrape(url)


def _assert_every_record_assigned_once(folder: Path) -> None:
    ckpt = latest_checkpoint(folder)
    assert ckpt.counters["records_read"] == N_RECORDS
    assert ckpt.counters["records_accepted"] == N_RECORDS
    assert model_count(folder) == N_RECORDS
    per_partition = N_RECORDS // N_PARTITIONS
    assert {key: pos["offset"] for key, pos in ckpt.positions.items()} == {
        f"{TOPIC}:{p}": per_partition for p in range(N_PARTITIONS)}
    ids = [json.loads(line)["id"]
           for line in (folder / "out" / "assignments.jsonl").read_text().splitlines()]
    assert len(ids) == N_RECORDS
    assert set(ids) == {f"r{i}" for i in range(N_RECORDS)}


def test_defaults_drain_the_topic_while_backpressure_holds_the_intake(
        kafka_broker: TansuBroker, drain_topic: str, kafka_client: str, tmp_path: Path) -> None:
    metrics = _drain(tmp_path, kafka_broker.bootstrap,
                     f"g-drain-defaults-{client_tag(kafka_client)}", client=kafka_client)
    _assert_every_record_assigned_once(tmp_path)
    assert metrics["streamkm_kafka_backpressure_total"] >= 1


def test_a_buffer_that_never_fills_drains_the_topic_too(
        kafka_broker: TansuBroker, drain_topic: str, tmp_path: Path) -> None:
    metrics = _drain(tmp_path, kafka_broker.bootstrap, "g-drain-unbounded",
                     "max_buffered_records = 10000000")
    _assert_every_record_assigned_once(tmp_path)
    assert metrics["streamkm_kafka_backpressure_total"] == 0
