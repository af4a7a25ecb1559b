"""Two service processes in one consumer group (each with its own model and checkpoints).

Partitions move when the second process joins and again when it is killed; no partition's
records are skipped or counted twice: the two models together hold every valid record once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers.kafka_broker import (
    TansuBroker,
    create_topics,
    model_count,
    owned_partitions,
    produce,
    read_count,
    read_topic,
    valid_value,
    write_config,
)
from tests.helpers.processes import kill, log_events, start_service, stop, wait_until

pytestmark = pytest.mark.kafka

TOPIC = "features-group"
GROUP = "g-group"


def owned(log: Path) -> list[str]:
    return sorted(owned_partitions(log))


def produce_range(bootstrap: str, start: int, stop_: int) -> None:
    produce(bootstrap, TOPIC, [(f"k{i}".encode(), valid_value(i), i % 3)
                               for i in range(start, stop_)])


@pytest.mark.slow
# alone: the group's max_poll_interval_ms is 10 s (Tansu), and a first batch that compiles
# numba kernels beside other tests' load took 14 s and lost process A its membership (CI)
@pytest.mark.alone
def test_partitions_move_between_two_processes_nothing_skipped(
        kafka_broker: TansuBroker, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap
    create_topics(bootstrap, {TOPIC: 3, f"{TOPIC}-out-assignments": 3,
                              f"{TOPIC}-out-events": 1, f"{TOPIC}-out-dlq": 1})
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_log, b_log = a_dir / "service.log", b_dir / "service.log"
    config_a = write_config(a_dir, bootstrap, topic=TOPIC, group=GROUP, out_prefix=f"{TOPIC}-out")
    config_b = write_config(b_dir, bootstrap, topic=TOPIC, group=GROUP, out_prefix=f"{TOPIC}-out")
    all_parts = [f"{TOPIC}:0", f"{TOPIC}:1", f"{TOPIC}:2"]

    produce_range(bootstrap, 0, 900)
    a = start_service(config_a, a_log)
    b = None
    try:
        wait_until(lambda: owned(a_log) == all_parts and read_count(a_dir) >= 900, 60,
                   "process A owning every partition and reading the first wave", [a])

        b = start_service(config_b, b_log)
        wait_until(lambda: owned(b_log) and owned(a_log)
                   and sorted(owned(a_log) + owned(b_log)) == all_parts, 60,
                   "the partitions split between A and B", [a, b])
        moved_to_b = owned(b_log)
        produce_range(bootstrap, 900, 1800)
        wait_until(lambda: read_count(a_dir) + read_count(b_dir) >= 1800, 60,
                   "both processes reading the second wave", [a, b])
        # Let B checkpoint and commit what it read (an idle process writes no more
        # checkpoints), then kill it.
        time.sleep(1.5)
        kill(b)

        produce_range(bootstrap, 1800, 2400)
        wait_until(lambda: owned(a_log) == all_parts, 60,
                   "A taking B's partitions over", [a])
        wait_until(lambda: model_count(a_dir) + model_count(b_dir) >= 2400, 60,
                   "the third wave", [a])
        assert stop(a) == 0
    finally:
        kill(a)
        if b is not None:
            kill(b)

    assert moved_to_b and set(moved_to_b) < set(all_parts)
    assert model_count(a_dir) + model_count(b_dir) == 2400
    assert model_count(b_dir) > 0
    revoked_a = [e for e in log_events(a_log) if e.get("event") == "partitions_revoked"]
    assert revoked_a and not any(e["lost"] for e in revoked_a)
    ids = {json.loads(m.value)["id"] for m in read_topic(bootstrap, f"{TOPIC}-out-assignments")}
    assert ids == {f"r{i}" for i in range(2400)}
