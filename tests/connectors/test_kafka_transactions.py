"""Exactly-once Kafka outputs (``[kafka] transactional_id``) against the real broker.

What the test broker (Tansu) can show is tested here: outputs and consumed offsets are
committed together (offsets visible after the commit, not before), a crash between a
transaction's commit and the checkpoint that follows it replays the records in between
without writing their outputs again, and a zombie producer is fenced (the fenced service
stops with exit 1, also when no record arrives after the fence, and a restart carries on).
Tansu hands the records of *aborted* transactions to ``read_committed`` consumers too
(checked first below), so the abort path is not provable on it, and it never answers the
``EndTxn`` of a producer fenced after it sent its offsets (pinned below: the commit gives up
after ``flush_timeout_s``): docs/service.md says so.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamkm.exceptions import OutputTransactionError
from streamkm_connectors.kafka_sinks import (
    AssignmentKafkaSink,
    KafkaOutputTransaction,
)
from streamkm_connectors.kafka_source import KafkaSource
from tests.connectors.conftest import client_tag
from tests.helpers.kafka_broker import (
    FAST_GROUP,
    TansuBroker,
    create_topics,
    latest_checkpoint,
    model_count,
    produce,
    read_count,
    read_topic,
    valid_value,
    write_config,
)
from tests.helpers.kafka_outputs import (
    PacedProducer,
    check_assignments_exact,
    check_dead_letters_exact,
    finish_stream,
    group_offsets,
    kill_while_producing,
    settled_group_offsets,
    transactional_config,
)
from tests.helpers.processes import (
    count_events,
    kill,
    log_events,
    start_service,
    stop,
    wait_until,
)

pytestmark = pytest.mark.kafka


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, consumer_timeout_ms=2000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        return [msg.value for msg in consumer]
    finally:
        consumer.close()


def test_tansu_limit_read_committed_still_sees_aborted_records(
        kafka_broker: TansuBroker) -> None:
    """The broker limit the docs state: if this starts failing, Tansu honours aborts and
    the abort path can be tested (update docs/service.md)."""
    from kafka import KafkaProducer

    topic = "txn-tansu-limit"
    create_topics(kafka_broker.bootstrap, {topic: 1})
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap,
                             transactional_id="txn-tansu-limit", max_block_ms=10000)
    try:
        producer.init_transactions()
        for value, commit in ((b"committed-1", True), (b"aborted", False),
                              (b"committed-2", True)):
            producer.begin_transaction()
            producer.send(topic, value)
            producer.flush()
            producer.commit_transaction() if commit else producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    assert _read_committed(kafka_broker.bootstrap, topic) == [
        b"committed-1", b"aborted", b"committed-2"]


class _Listener:
    def on_assigned(self, part_keys: list[str]) -> None:
        pass

    def on_revoked(self, part_keys: list[str], *, lost: bool) -> None:
        pass


def _assigned_source(bootstrap: str, topic: str, group: str) -> KafkaSource:
    source = KafkaSource(topics=[topic], consumer_settings={
        "bootstrap_servers": [bootstrap], "group_id": group, **FAST_GROUP},
        replay_committed=True)
    source.start(_Listener())
    deadline = time.monotonic() + 30
    while not source.list_parts():
        assert time.monotonic() < deadline, "no partition assigned"
        source.poll(0.2)
    return source


def _transaction(bootstrap: str, transactional_id: str, **kwargs: Any
                 ) -> KafkaOutputTransaction:
    return KafkaOutputTransaction({"bootstrap_servers": [bootstrap], "max_block_ms": 10000,
                                   "transactional_id": transactional_id},
                                  **{"flush_timeout_s": 10.0, **kwargs})


def _usurp(bootstrap: str, transactional_id: str) -> None:
    """Fence every earlier producer of ``transactional_id`` (a zombie's successor)."""
    from kafka import KafkaProducer

    usurper = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                            max_block_ms=10000)
    usurper.init_transactions()
    usurper.close(timeout=10)


def test_outputs_and_offsets_commit_together_and_a_zombie_is_fenced(
        kafka_broker: TansuBroker) -> None:
    topic, group = "txn-parts", "g-txn-parts"
    create_topics(kafka_broker.bootstrap, {topic: 1, f"{topic}-out": 1})
    source = _assigned_source(kafka_broker.bootstrap, topic, group)
    handle = _transaction(kafka_broker.bootstrap, "txn-parts")
    sink = AssignmentKafkaSink(handle, f"{topic}-out")
    try:
        sink.write_assignments(["a", "b"], np.array([0, 1]), np.array([0.5, 0.25]), 1)
        sink.sync()  # acknowledged inside the open transaction
        assert handle.open
        assert group_offsets(kafka_broker.bootstrap, group, topic, 1) == {}
        handle.commit({f"{topic}:0": {"offset": 2}}, source)
        assert not handle.open and handle.commits == 1
        assert group_offsets(kafka_broker.bootstrap, group, topic, 1) == {0: 2}
        assert [json.loads(v)["id"] for v in _read_committed(
            kafka_broker.bootstrap, f"{topic}-out")] == ["a", "b"]

        # a zombie: another producer with the same transactional id takes over
        sink.write_assignments(["c"], np.array([0]), np.array([0.5]), 2)
        sink.flush()
        _usurp(kafka_broker.bootstrap, "txn-parts")
        with pytest.raises(OutputTransactionError, match="txn-parts.*Fenced"):
            sink.sync()
            handle.commit({f"{topic}:0": {"offset": 3}}, source)
        with pytest.raises(OutputTransactionError):  # and at every later use
            sink.write_assignments(["d"], np.array([0]), np.array([0.5]), 3)
            sink.flush()
        assert group_offsets(kafka_broker.bootstrap, group, topic, 1) == {0: 2}
    finally:
        sink.close()
        source.close()


def test_an_idle_check_tells_a_fenced_producer_and_writes_nothing(
        kafka_broker: TansuBroker, caplog: pytest.LogCaptureFixture) -> None:
    """While no transaction commits, :meth:`KafkaOutputTransaction.check` asks the
    coordinator every ``check_interval_s``; the group's offsets and the outputs stay as the
    last commit left them."""
    topic, group, tid = "txn-check", "g-txn-check", "txn-check"
    create_topics(kafka_broker.bootstrap, {topic: 1, f"{topic}-out": 1})
    source = _assigned_source(kafka_broker.bootstrap, topic, group)
    handle = _transaction(kafka_broker.bootstrap, tid, check_interval_s=0.0)
    sink = AssignmentKafkaSink(handle, f"{topic}-out")
    try:
        handle.check(source)  # nothing committed yet: nothing to check
        assert handle.checks == 0
        sink.write_assignments(["a"], np.array([0]), np.array([0.5]), 1)
        sink.sync()
        handle.commit({f"{topic}:0": {"offset": 4}}, source)
        handle.check_interval_s = 60.0
        handle.check(source)  # committed just now: not due
        assert handle.checks == 0
        handle.check_interval_s = 0.0
        handle.check(source)
        handle.check(source)
        assert handle.checks == 2 and not handle.open
        assert group_offsets(kafka_broker.bootstrap, group, topic, 1) == {0: 4}
        # an error that aborts the check's transaction only (kafka-python refuses this
        # group metadata before sending) leaves the producer usable
        with caplog.at_level("WARNING", logger="streamkm.kafka"):
            handle.check(_BadGroupMetadata(source))
        # (kafka-python's own warnings, e.g. a slow event loop under load, are not ours)
        assert [r.msg for r in caplog.records if r.name == "streamkm.kafka"] == [
            "kafka_transaction_check_failed"]
        assert handle.checks == 2
        sink.write_assignments(["b"], np.array([1]), np.array([0.5]), 2)
        sink.sync()
        handle.commit({f"{topic}:0": {"offset": 6}}, source)
        assert group_offsets(kafka_broker.bootstrap, group, topic, 1) == {0: 6}

        _usurp(kafka_broker.bootstrap, tid)
        with pytest.raises(OutputTransactionError, match="txn-check.*check.*Fenced"):
            handle.check(source)
        with pytest.raises(OutputTransactionError):  # and at every later use
            handle.commit({f"{topic}:0": {"offset": 7}}, source)
        assert group_offsets(kafka_broker.bootstrap, group, topic, 1) == {0: 6}
        assert [json.loads(v)["id"] for v in _read_committed(
            kafka_broker.bootstrap, f"{topic}-out")] == ["a", "b"]
    finally:
        sink.close()
        source.close()


def _confluent_producer_fenced_in_a_new_transaction(bootstrap: str, topic: str) -> Any:
    """A confluent producer (transactional id ``topic``) that committed one transaction to
    the new topic ``topic``, was fenced by a successor, and began another."""
    from streamkm_connectors.confluent_producer import ConfluentProducer

    create_topics(bootstrap, {topic: 1})
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "transactional.id": topic,
                                  "linger.ms": 5}, timeout_s=10.0)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, value=b"committed", key=None, headers=[])
        producer.flush(10.0)
        producer.commit_transaction()
        _usurp(bootstrap, topic)
        producer.begin_transaction()
    except BaseException:
        producer.close(0)
        raise
    return producer


def test_a_confluent_producer_fenced_between_transactions_names_the_fence_at_its_flush(
        kafka_broker: TansuBroker) -> None:
    """librdkafka turns a producer fatal when the broker refuses its next transaction's
    partitions; confluent-kafka then raises no error of its own from ``flush`` (a bare
    ``KafkaError``, or a ``SystemError`` without one). The flush names the fence, and every
    later transactional call raises the same error."""
    from confluent_kafka import KafkaError, KafkaException

    topic = "txn-confluent-fence"
    producer = _confluent_producer_fenced_in_a_new_transaction(kafka_broker.bootstrap, topic)
    try:
        for _ in range(5):
            producer.send(topic, value=b"fenced", key=None, headers=[])
        with pytest.raises(KafkaException) as raised:
            producer.flush(10.0)
        error = raised.value.args[0]
        assert isinstance(error, KafkaError)
        assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), error
        with pytest.raises(KafkaException) as again:
            producer.commit_transaction()
        assert again.value is raised.value
    finally:
        producer.close(0)


def test_a_confluent_producer_fenced_between_transactions_names_the_fence_when_it_sends(
        kafka_broker: TansuBroker) -> None:
    """Once librdkafka knows the producer is fenced, it refuses new messages for its state
    alone (``_STATE``, "Erroneous state"); ``send`` raises the fence instead."""
    from confluent_kafka import KafkaError, KafkaException

    topic = "txn-confluent-fence-send"
    producer = _confluent_producer_fenced_in_a_new_transaction(kafka_broker.bootstrap, topic)
    try:
        refused = None
        deadline = time.monotonic() + 20
        while refused is None and time.monotonic() < deadline:
            try:
                producer.send(topic, value=b"fenced", key=None, headers=[])
            except KafkaException as exc:
                refused = exc
            time.sleep(0.05)
        assert refused is not None, "the fenced producer kept taking messages"
        error = refused.args[0]
        assert isinstance(error, KafkaError)
        assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), error
    finally:
        producer.close(0)


class _BadGroupMetadata:
    """A source whose group metadata claims a generation without a member id."""

    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    def transaction_offsets(self, positions: dict[str, dict[str, Any]]
                            ) -> tuple[dict[Any, Any], Any]:
        from kafka.structs import ConsumerGroupMetadata

        offsets, group = self._source.transaction_offsets(positions)
        return offsets, ConsumerGroupMetadata(group_id=group.group_id, generation_id=7,
                                              member_id="")


class _UsurpedBeforeCommit:
    """A ``KafkaProducer`` whose transactional id is taken over right after it sent its
    offsets, before it commits (the race a live zombie runs)."""

    def __init__(self, **settings: Any) -> None:
        from kafka import KafkaProducer

        self._producer = KafkaProducer(**settings)
        self._settings = settings

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)

    def send_offsets_to_transaction(self, offsets: Any, group: Any) -> None:
        self._producer.send_offsets_to_transaction(offsets, group)
        _usurp(self._settings["bootstrap_servers"][0], self._settings["transactional_id"])


def test_tansu_limit_a_fenced_commit_is_never_answered_and_fails_in_bounded_time(
        kafka_broker: TansuBroker) -> None:
    """Tansu drops the connection at the ``EndTxn`` of a producer fenced after it sent its
    offsets (its log: ``ProducerFenced``) instead of answering; kafka-python sends it again
    for ever. The commit gives up after ``flush_timeout_s``: if this starts failing with
    ``Fenced``, Tansu answers (update docs/service.md)."""
    topic, group, tid = "txn-endtxn", "g-txn-endtxn", "txn-endtxn"
    create_topics(kafka_broker.bootstrap, {topic: 1, f"{topic}-out": 1})
    source = _assigned_source(kafka_broker.bootstrap, topic, group)
    handle = _transaction(kafka_broker.bootstrap, tid, flush_timeout_s=3.0,
                          producer_factory=_UsurpedBeforeCommit)
    sink = AssignmentKafkaSink(handle, f"{topic}-out")
    try:
        sink.write_assignments(["a"], np.array([0]), np.array([0.5]), 1)
        sink.sync()
        t0 = time.monotonic()
        with pytest.raises(OutputTransactionError,
                           match="txn-endtxn.*commit.*did not answer commit_transaction "
                                 "within 3.0 s"):
            handle.commit({f"{topic}:0": {"offset": 1}}, source)
        assert 3.0 <= time.monotonic() - t0 < 15.0
        assert group_offsets(kafka_broker.bootstrap, group, topic, 1) == {}
    finally:
        sink.close()
        source.close()


def _window_ids(producer: PacedProducer, before: dict[int, int], after: dict[int, int]
                ) -> set[str]:
    """Valid ids of the records between the checkpointed and the committed offsets (record
    ``i`` is offset ``i // 3`` of partition ``i % 3``)."""
    return {f"r{i}" for i in range(producer.produced)
            if before[i % 3] <= i // 3 < after[i % 3] and f"r{i}" in producer.valid_ids}


@pytest.mark.slow
def test_crash_between_commit_and_checkpoint_replays_without_repeating_outputs(
        kafka_broker: TansuBroker, kafka_client: str, tmp_path: Path) -> None:
    topic, group, _tid, out, config = _transactional_service(kafka_broker, tmp_path, "kill",
                                                             kafka_client)
    log = tmp_path / "service.log"
    ck, away = tmp_path / "ck", tmp_path / "ck.away"
    producer = PacedProducer(kafka_broker.bootstrap, topic, minimum=1500)
    producer.start()
    rng = np.random.default_rng(5)
    try:
        # 1. the checkpoint folder becomes a file: the next transaction commits, the
        # checkpoint after it fails; SIGKILL right then
        proc = start_service(config, log)
        try:
            wait_until(lambda: count_events(log, "checkpoint_written") >= 3, 60,
                       "checkpoints", [proc], interval=0.01)
            ck.rename(away)
            ck.write_text("")
            # (a checkpoint the file system refuses stalls the service: io_stalled)
            wait_until(lambda: count_events(log, "checkpoint_failed")
                       + count_events(log, "io_stalled", target="checkpoint") >= 1, 30,
                       "a failed checkpoint", [proc], interval=0.005)
        finally:
            kill(proc)
        ck.unlink()
        away.rename(ck)
        positions = latest_checkpoint(tmp_path).positions
        checkpointed = {p: positions[f"{topic}:{p}"]["offset"] for p in range(3)}
        committed = group_offsets(kafka_broker.bootstrap, group, topic, 3)
        assert any(committed[p] > checkpointed[p] for p in range(3)), (committed,
                                                                       checkpointed)
        window = _window_ids(producer, checkpointed, committed)
        assert window
        # 2. a plain SIGKILL while the producer writes
        kill_while_producing(config, log, producer, rng, kills=1)
        finish_stream(config, log, producer, tmp_path)
    finally:
        producer.finish()

    assert model_count(tmp_path) == len(producer.valid_ids)
    replays = [e for e in log_events(log) if e.get("event") == "kafka_partition_resumed"
               and e.get("replay_until") is not None]
    assert replays, "the restart did not replay the committed window"
    messages = read_topic(kafka_broker.bootstrap, f"{out}-assignments")
    check_assignments_exact(messages, producer.valid_ids)
    # The window's outputs were committed once, before the crash; the replay wrote none.
    # (Other ids may repeat on Tansu: it shows records of the aborted transactions.)
    counts = Counter(json.loads(m.value)["id"] for m in messages)
    assert {counts[i] for i in window} == {1}
    check_dead_letters_exact(read_topic(kafka_broker.bootstrap, f"{out}-dlq"), topic,
                             producer.poison)
    per_partition = Counter(i % 3 for i in range(producer.produced))
    assert settled_group_offsets(kafka_broker.bootstrap, group, topic, 3,
                                 dict(per_partition)) == dict(per_partition)


#: What the first ``kafka_transaction_failed`` of a fenced service says: the broker
#: answered ``ProducerFenced`` (kafka-python's ``ProducerFencedError``, librdkafka's
#: ``_FENCED`` / ``PRODUCER_FENCED``), or (Tansu, a usurper between a transaction's offsets
#: and its ``EndTxn``: test_tansu_limit_a_fenced_commit_is_never_answered...) nothing at all.
FENCED_ERRORS = ("ProducerFencedError", "code=_FENCED", "code=PRODUCER_FENCED",
                 "did not answer")


def _fence_and_wait_for_exit(proc: subprocess.Popen[bytes], log: Path, bootstrap: str,
                             transactional_id: str) -> dict[str, Any]:
    """Fence the service's producer, then :func:`_wait_for_fenced_exit`."""
    _usurp(bootstrap, transactional_id)
    return _wait_for_fenced_exit(proc, log)


def _wait_for_fenced_exit(proc: subprocess.Popen[bytes], log: Path) -> dict[str, Any]:
    """Assert that the fenced service exits 1 within the bound (the idle check interval
    plus the coordinator wait, ``flush_timeout_ms`` 30 s) and logs why without a
    traceback; the first ``kafka_transaction_failed`` event."""
    assert proc.wait(timeout=60) == 1
    failed = [e for e in log_events(log) if e.get("event") == "kafka_transaction_failed"]
    assert failed and any(text in failed[0]["error"] for text in FENCED_ERRORS), failed
    assert count_events(log, "service_failed") == 1
    assert "Traceback" not in log.read_text()
    return failed[0]


def _transactional_service(kafka_broker: TansuBroker, tmp_path: Path, name: str,
                           client: str) -> tuple[str, str, str, str, Path]:
    """Topics and a transactional service config (batches of 20, 3 input partitions) on
    the Kafka client ``client``: (topic, group, transactional id, output prefix, config
    path)."""
    name = f"{name}-{client_tag(client)}"
    topic, group, tid = f"txn-{name}", f"g-txn-{name}", f"streamkm-txn-{name}"
    out = f"{topic}-out"
    create_topics(kafka_broker.bootstrap, {topic: 3, f"{out}-assignments": 3,
                                           f"{out}-events": 1, f"{out}-dlq": 1})
    config = transactional_config(write_config(
        tmp_path, kafka_broker.bootstrap, topic=topic, group=group, out_prefix=out,
        batch_size=20, client=client), tid)
    return topic, group, tid, out, config


@pytest.mark.slow
def test_a_fenced_service_stops_and_its_restart_carries_on(
        kafka_broker: TansuBroker, kafka_client: str, tmp_path: Path) -> None:
    """The service is fenced while its input keeps arriving: it notices on its next
    transaction, stops, and the restart takes the id back and finishes the stream with
    every output and offset exactly once.

    The fence lands while the service has committed everything it read and sends nothing:
    when an ``InitProducerId`` aborts a transaction whose producer's records are still
    arriving, the test broker (Tansu 0.6) can store a late record in the aborted
    transaction, which then blocks its partitions so that no later transaction's offsets
    are applied. A fence inside an open transaction is covered component by component
    above."""
    topic, group, tid, out, config = _transactional_service(kafka_broker, tmp_path, "fence",
                                                            kafka_client)
    log = tmp_path / "service.log"
    producer = PacedProducer(kafka_broker.bootstrap, topic, minimum=900)
    producer.start()
    try:
        proc = start_service(config, log)
        try:
            wait_until(lambda: count_events(log, "checkpoint_written") >= 3, 60,
                       "checkpoints", [proc])
            producer.hold()
            # a checkpoint holding every record read follows its transaction's commit
            wait_until(lambda: read_count(tmp_path) >= producer.produced, 60,
                       "a checkpoint of everything produced", [proc])
            _usurp(kafka_broker.bootstrap, tid)
            producer.carry_on()
            _wait_for_fenced_exit(proc, log)
        finally:
            kill(proc)
        producer.finish()
        producer.join(timeout=60)
        assert producer.error is None
        proc = start_service(config, log)  # fences the usurper in turn
        try:
            wait_until(lambda: read_count(tmp_path) >= producer.produced, 60,
                       "the rest of the stream", [proc])
            assert stop(proc) == 0
        finally:
            kill(proc)
    finally:
        producer.finish()

    assert model_count(tmp_path) == len(producer.valid_ids)
    check_assignments_exact(read_topic(kafka_broker.bootstrap, f"{out}-assignments"),
                            producer.valid_ids)
    per_partition = Counter(i % 3 for i in range(producer.produced))
    assert settled_group_offsets(kafka_broker.bootstrap, group, topic, 3,
                                 dict(per_partition)) == dict(per_partition)


def _records(first: int, last: int) -> list[tuple[bytes | None, bytes, int]]:
    """Valid records ``r<first>`` .. ``r<last - 1>``, record ``i`` on partition ``i % 3``."""
    return [(f"in-{i}".encode(), valid_value(i), i % 3) for i in range(first, last)]


@pytest.mark.slow
def test_a_service_fenced_while_idle_stops_without_further_input(
        kafka_broker: TansuBroker, kafka_client: str, tmp_path: Path) -> None:
    """No record arrives after the fence, so no batch and no commit: the idle check
    (``transaction_check_interval_ms``) notices it; the restart takes the id back and
    carries on with new input."""
    topic, group, tid, out, config = _transactional_service(kafka_broker, tmp_path, "idle",
                                                            kafka_client)
    config.write_text(config.read_text().replace(
        "[kafka]\n", "[kafka]\ntransaction_check_interval_ms = 500\n", 1))
    log = tmp_path / "service.log"
    produce(kafka_broker.bootstrap, topic, _records(0, 240))
    proc = start_service(config, log)
    try:
        # everything read is checkpointed, so committed: no transaction is open
        wait_until(lambda: read_count(tmp_path) >= 240, 60, "the input", [proc])
        failed = _fence_and_wait_for_exit(proc, log, kafka_broker.bootstrap, tid)
    finally:
        kill(proc)
    assert failed["step"] == "check"

    proc = start_service(config, log)
    try:
        produce(kafka_broker.bootstrap, topic, _records(240, 480))
        wait_until(lambda: read_count(tmp_path) >= 480, 60, "the new input", [proc])
        assert stop(proc) == 0
    finally:
        kill(proc)
    assert model_count(tmp_path) == 480
    check_assignments_exact(read_topic(kafka_broker.bootstrap, f"{out}-assignments"),
                            {f"r{i}" for i in range(480)})
    expected = {0: 160, 1: 160, 2: 160}
    assert settled_group_offsets(kafka_broker.bootstrap, group, topic, 3,
                                 expected) == expected
