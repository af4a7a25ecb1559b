"""Scale-out outputs under a worker crash: the documented reader rule is exact.

Two ``streamkm run`` members in scale-out mode read a topic that a producer keeps writing
to; the worker (not the leader) is killed with SIGKILL mid-stream and restarted. Records it
had assigned after the leader's watermark are read and assigned again by the next owner,
so assignments repeat, yet the last assignment per id (the message key) covers every valid
record exactly once, and the last dead letter per position every rejected one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.kafka_broker import ModelTopic, TansuBroker, owned_partitions, read_topic
from tests.helpers.kafka_outputs import (
    PacedProducer,
    check_assignments_exact,
    check_dead_letters_exact,
)
from tests.helpers.processes import kill, start_service, stop, wait_until
from tests.scaleout.test_scaleout_kafka import (
    PARTITIONS,
    leaders,
    scaleout_configs,
    start_all,
    wait_for_exact_count,
)

pytestmark = pytest.mark.kafka


@pytest.mark.slow
def test_worker_sigkill_while_producing_last_assignment_per_id_is_exact(
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
        before = model.count()
        wait_until(lambda: model.count() >= before + 200, 60, "more records counted",
                   list(procs.values()), interval=0.05)
        kill(procs[victim])
        assert producer.is_alive(), "production ended before the kill"
        procs[victim] = start_service(configs[victim], logs[victim])
        wait_until(lambda: owned_partitions(logs[victim]), 60, "the restarted worker's share",
                   list(procs.values()), interval=0.2)
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

    messages = read_topic(bootstrap, f"{prefix}-out-assignments")
    assert len(messages) >= len(producer.valid_ids)
    check_assignments_exact(messages, producer.valid_ids)
    check_dead_letters_exact(read_topic(bootstrap, f"{prefix}-out-dlq"), prefix,
                             producer.poison)
