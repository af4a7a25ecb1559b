"""Producing input while a service is killed, and reading its Kafka outputs the way the
documented reader rule says (docs/service.md, "Outputs"): the last message per key."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from tests.helpers.kafka_broker import produce, valid_value

#: Rejected records mixed into the produced input: (value, reason).
POISON = [(b'{"id": "bad", "x": [1.0', "unparseable"),
          (b'{"id": "bad", "x": [1.0, 2.0, 3.0]}', "wrong_dimension")]


class PacedProducer(threading.Thread):
    """Produces ``chunk`` records at a time to ``topic`` (record ``i`` valid with id
    ``r<i>`` on partition ``i % partitions``, every ``poison_every``-th one poison instead)
    until :meth:`finish` was called and at least ``minimum`` records exist.

    Attributes
    ----------
    produced : int
        Records produced so far (valid and poison).
    poison : dict
        ``(partition, offset) -> reason`` of every poison record produced.
    """

    def __init__(self, bootstrap: str, topic: str, *, partitions: int = 3, chunk: int = 30,
                 pause_s: float = 0.15, minimum: int = 1000, maximum: int = 20000,
                 poison_every: int = 97) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.chunk, self.pause_s, self.minimum, self.maximum = chunk, pause_s, minimum, maximum
        self.poison_every = poison_every
        self.produced = 0
        self.valid_ids: set[str] = set()
        self.poison: dict[tuple[int, int], str] = {}
        self._offsets = [0] * partitions
        self._finish = threading.Event()
        self._chunk = threading.Lock()  # held while a chunk is produced, and by hold()
        self.error: BaseException | None = None

    def finish(self) -> None:
        """Stop once ``minimum`` records exist (the current chunk is completed)."""
        self._finish.set()

    def hold(self) -> None:
        """Stop producing until :meth:`carry_on`; returns once no chunk is in flight, so
        :attr:`produced` is final until then."""
        self._chunk.acquire()

    def carry_on(self) -> None:
        """Produce again after :meth:`hold`."""
        self._chunk.release()

    def run(self) -> None:
        try:
            while self.produced < self.maximum and not (self._finish.is_set()
                                                        and self.produced >= self.minimum):
                with self._chunk:
                    self._produce_chunk()
                self._finish.wait(self.pause_s)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _produce_chunk(self) -> None:
        messages = []
        for i in range(self.produced, self.produced + self.chunk):
            partition = i % self.partitions
            if i % self.poison_every == self.poison_every - 1:
                value, reason = POISON[i % len(POISON)]
                self.poison[(partition, self._offsets[partition])] = reason
            else:
                value = valid_value(i)
                self.valid_ids.add(f"r{i}")
            self._offsets[partition] += 1
            messages.append((f"in-{i}".encode(), value, partition))
        produce(self.bootstrap, self.topic, messages)
        self.produced += self.chunk


def last_per_key(messages: list[Any]) -> dict[bytes, Any]:
    """The documented reader rule: the last message of every key (messages of one key are
    in one partition, in order)."""
    last: dict[bytes, Any] = {}
    for msg in messages:
        last[msg.key] = msg
    return last


def check_assignments_exact(messages: list[Any], valid_ids: set[str]) -> dict[str, Any]:
    """Assert the reader rule is exact on an assignments topic: every message keyed by its
    id, the last one per id covering each valid record once; the last entries by id."""
    for msg in messages:
        assert msg.key == json.loads(msg.value)["id"].encode(), msg
    last = {key.decode(): json.loads(msg.value) for key, msg in last_per_key(messages).items()}
    missing, extra = valid_ids - set(last), set(last) - valid_ids
    assert not missing and not extra, (sorted(missing)[:10], sorted(extra)[:10])
    return last


def check_dead_letters_exact(messages: list[Any], topic: str,
                             poison: dict[tuple[int, int], str]) -> None:
    """Assert the reader rule is exact on a dead-letter topic: keyed by position, the last
    one per key naming each rejected record once with its reason."""
    last = last_per_key(messages)
    expected = {f"{topic}:{p}:{o}".encode(): reason for (p, o), reason in poison.items()}
    assert set(last) == set(expected)
    for key, msg in last.items():
        assert dict(msg.headers)["reason"] == expected[key].encode()


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The committed offsets of ``group`` on ``topic`` by partition (missing: none)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        out = {}
        for p in range(partitions):
            committed = consumer.committed(TopicPartition(topic, p))
            if committed is not None:
                out[p] = int(committed)
        return out
    finally:
        consumer.close(autocommit=False)


def settled_group_offsets(bootstrap: str, group: str, topic: str, partitions: int,
                          expected: dict[int, int], timeout: float = 30.0) -> dict[int, int]:
    """The committed offsets of ``group`` once they equal ``expected``, or the last read
    after ``timeout`` seconds. A transaction's offsets become visible when the coordinator
    has written its commit markers, which it does after answering ``EndTxn``: a read right
    after the commit may still see the previous offsets."""
    deadline = time.monotonic() + timeout
    while True:
        offsets = group_offsets(bootstrap, group, topic, partitions)
        if offsets == expected or time.monotonic() > deadline:
            return offsets
        time.sleep(0.5)


def transactional_config(config: Path, transactional_id: str) -> Path:
    """``config`` (from ``write_config``) with exactly-once Kafka outputs."""
    text = config.read_text().replace(
        "[kafka]\n", f'[kafka]\ntransactional_id = "{transactional_id}"\n', 1)
    config.write_text(text)
    return config


def kill_while_producing(config: Path, log: Path, producer: PacedProducer,
                         rng: Any, kills: int) -> None:
    """Start the service ``kills`` times and SIGKILL it each time 2-4 checkpoints later,
    while ``producer`` keeps writing."""
    from tests.helpers.processes import count_events, kill, start_service, wait_until

    for _ in range(kills):
        proc = start_service(config, log)
        try:
            target = count_events(log, "checkpoint_written") + int(rng.integers(2, 5))
            wait_until(lambda: count_events(log, "checkpoint_written") >= target, 60,
                       "checkpoints before the kill", [proc], interval=0.01)
        finally:
            kill(proc)
        assert producer.is_alive(), "production ended before the kill"


def finish_stream(config: Path, log: Path, producer: PacedProducer, run_dir: Path) -> None:
    """End production, then run the service until it has read everything and stop it
    cleanly (exit 0)."""
    from tests.helpers.kafka_broker import read_count
    from tests.helpers.processes import kill, start_service, stop, wait_until

    producer.finish()
    producer.join(timeout=60)
    assert producer.error is None and not producer.is_alive()
    proc = start_service(config, log)
    try:
        wait_until(lambda: read_count(run_dir) >= producer.produced, 60,
                   "the rest of the stream", [proc])
        assert stop(proc) == 0
    finally:
        kill(proc)
