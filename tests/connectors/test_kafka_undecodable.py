"""Records kafka-python cannot parse, sent as raw bytes to the real broker (Tansu).

A record whose header key is not UTF-8 and a record batch whose CRC is wrong sit in the
middle of a partition. The service dead-letters each undecodable offset (reason
``undecodable_record``, topic, partition, offset and the client's error), reads every valid
record after them, checkpoints past them, and stops on SIGTERM promptly.
"""

from __future__ import annotations

import time
from pathlib import Path

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
from tests.helpers.kafka_raw import produce_raw_batch, record_batch
from tests.helpers.processes import count_events, kill, start_service, stop, wait_until

pytestmark = pytest.mark.kafka

#: The service's documented graceful stop is well inside systemd's TimeoutStopSec=120; a
#: stop that takes longer than this means the main thread is stuck in the client.
STOP_WITHIN_S = 20.0


def _offsets(folder: Path, topic: str) -> tuple[int | None, int | None]:
    try:
        positions = latest_checkpoint(folder).positions
    except (AssertionError, FileNotFoundError):
        return None, None
    return tuple(positions.get(f"{topic}:{p}", {}).get("offset") for p in (0, 1))  # type: ignore[return-value]


def test_undecodable_records_are_dead_lettered_and_the_partition_keeps_flowing(
        kafka_broker: TansuBroker, tmp_path: Path) -> None:
    topic = "features-undecodable"
    bootstrap = kafka_broker.bootstrap
    create_topics(bootstrap, {topic: 2, f"{topic}-out-assignments": 1,
                              f"{topic}-out-events": 1, f"{topic}-out-dlq": 1})
    ids = iter(range(10_000))

    def valid(n: int, partition: int) -> None:
        produce(bootstrap, topic, [(None, valid_value(next(ids)), partition)
                                   for _ in range(n)])

    valid(100, 0)
    bad_key = record_batch([(None, valid_value(9000), [("KEY", b"v")])],
                           replace=(b"KEY", b"\xff\xfe\xfd"))
    error, bad_key_offset = produce_raw_batch(bootstrap, topic, 0, bad_key)
    assert error == 0
    valid(100, 0)
    corrupt = record_batch([(None, valid_value(9001 + i), []) for i in range(3)],
                           good_crc=False)
    error, corrupt_offset = produce_raw_batch(bootstrap, topic, 0, corrupt)
    assert error == 0
    valid(100, 0)
    valid(150, 1)
    n_valid, total_0 = 450, 304

    config = write_config(tmp_path, bootstrap, topic=topic, group="g-undecodable",
                          out_prefix=f"{topic}-out")
    log = tmp_path / "service.log"
    proc = start_service(config, log)
    try:
        wait_until(lambda: _offsets(tmp_path, topic) == (total_0, 150), 90,
                   "both partitions read past the bad records", [proc])
        started = time.monotonic()
        assert stop(proc, timeout=STOP_WITHIN_S) == 0
        assert time.monotonic() - started < STOP_WITHIN_S
    finally:
        kill(proc)

    assert model_count(tmp_path) == n_valid
    assert count_events(log, "kafka_record_undecodable") == 4
    dead = read_topic(bootstrap, f"{topic}-out-dlq")
    by_offset = {int(dict(m.headers)["source_offset"]): dict(m.headers) for m in dead}
    assert sorted(by_offset) == [bad_key_offset, corrupt_offset, corrupt_offset + 1,
                                 corrupt_offset + 2]
    for headers in by_offset.values():
        assert headers["reason"] == b"undecodable_record"
        assert headers["source_topic"] == topic.encode()
        assert headers["source_partition"] == b"0"
    assert b"UnicodeDecodeError" in by_offset[bad_key_offset]["detail"]
    assert b"crc" in by_offset[corrupt_offset]["detail"]
    assignments = read_topic(bootstrap, f"{topic}-out-assignments")
    assert len({m.key for m in assignments}) == n_valid
