"""Kafka source and sinks without a broker: start offsets, lost partitions, float32 records,
oversized messages, redelivery of unacknowledged output, message keys, replayed records."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from kafka import TopicPartition

from streamkm.exceptions import SinkError
from streamkm.io.decoding import RecordDecoder
from streamkm.sources import OVERSIZED, RELEASED
from streamkm_connectors.kafka_sinks import (
    AssignmentKafkaSink,
    KafkaProducerHandle,
    position_key,
)
from streamkm_connectors.kafka_source import KafkaSource

pytestmark = pytest.mark.unit

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class FakeConsumer:
    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.listener: Any = None
        self.paused: set[Any] = set()
        self.seeks: dict[Any, int] = {}
        self.commits: list[dict[Any, Any]] = []
        self.committed_offsets: dict[Any, int] = {}
        self.to_fetch: dict[Any, list[Any]] = {}

    def subscribe(self, topics: Any = (), pattern: Any = None, listener: Any = None) -> None:
        self.listener = listener

    def pause(self, *tps: Any) -> None:
        self.paused.update(tps)

    def resume(self, *tps: Any) -> None:
        self.paused.difference_update(tps)

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks[tp] = offset

    def committed(self, tp: Any, timeout_ms: int | None = None) -> int | None:
        return self.committed_offsets.get(tp)

    def highwater(self, tp: Any) -> int:
        return 10

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> dict[Any, list[Any]]:
        out = {tp: msgs for tp, msgs in self.to_fetch.items() if tp not in self.paused}
        self.to_fetch = {}
        return out

    def commit_async(self, offsets: Any, callback: Any = None) -> None:
        self.commits.append(offsets)

    def metrics(self) -> dict[str, Any]:
        return {"consumer-metrics": {"connection-count": 1.0}}

    def close(self, **kwargs: Any) -> None:
        pass


class Hooks:
    """A minimal service: builds assigned partitions from its snapshots, commits on revoke."""

    def __init__(self, source: KafkaSource, snapshots: dict[str, Any]) -> None:
        self.source, self.snapshots, self.parts = source, snapshots, {}

    def on_assigned(self, keys: list[str]) -> None:
        for key in keys:
            self.parts[key] = self.source.build_part(key, self.snapshots.get(key))

    def on_revoked(self, keys: list[str], *, lost: bool) -> None:
        self.source.commit({k: self.parts[k].snapshot() for k in keys})


def message(tp: Any, offset: int, value: bytes) -> Any:
    return SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=offset, value=value,
                           key=b"k", headers=[("h", b"v")])


def test_start_offsets_lost_partitions_float32_and_oversized() -> None:
    source = KafkaSource(topics=["t"], consumer_settings={"group_id": "g"},
                         max_record_bytes=64, consumer_factory=FakeConsumer)
    hooks = Hooks(source, {"t:0": {"topic": "t", "partition": 0, "offset": 4},
                           "t:1": {"topic": "t", "partition": 1, "offset": 2, RELEASED: True}})
    source.start(hooks)
    consumer = source.consumer
    consumer.committed_offsets = {T0: 9, T1: 6}
    consumer.listener.on_partitions_assigned({T0, T1})
    # Owned at the checkpoint: exact resume, whatever was committed. Released: nothing handed
    # out until the committed offset was looked up, then the larger of the two. No partition
    # stays paused (the consumer would keep what it fetched for it).
    assert consumer.seeks == {T0: 4} and not consumer.paused
    x = np.array([[1.5, -2.0]], dtype="<f4").tobytes()
    consumer.to_fetch = {T0: [message(T0, 3, x), message(T0, 4, x), message(T0, 5, b"\0" * 100)],
                         T1: [message(T1, 2, x)]}
    source.poll(0)
    assert consumer.seeks[T1] == 6 and not consumer.paused
    assert hooks.parts["t:1"].next_batch(10) == []  # fetched from before the seek
    records = hooks.parts["t:0"].next_batch(10)
    assert [r.position["offset"] for r in records] == [4, 5]  # offset 3 is before the start
    assert records[0].raw_key == b"k" and records[0].headers == (("h", b"v"),)
    assert records[1].error == OVERSIZED and records[1].position["length"] == 100
    decoder = RecordDecoder(format="float32", dim=2)
    X, ids, _, rejected = decoder.decode_many(records)
    assert X.tolist() == [[1.5, -2.0]] and ids == ["t:0:4"] and len(rejected) == 1
    assert hooks.parts["t:0"].snapshot()["offset"] == 6 and hooks.parts["t:0"].lag() == 4

    consumer.listener.on_partitions_lost({T0, T1})  # evicted: nothing may be committed
    assert consumer.commits == []
    assert source.list_parts() == []


class FakeFuture:
    def __init__(self, ok: bool) -> None:
        self.is_done, self._ok = True, ok
        self.exception = None if ok else RuntimeError("broker gone")

    def failed(self) -> bool:
        return not self._ok


class FakeProducer:
    def __init__(self, **settings: Any) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.fail = True

    def send(self, topic: str, value: bytes, key: Any, headers: Any) -> FakeFuture:
        self.sent.append((topic, key))
        return FakeFuture(not self.fail)

    def flush(self, timeout: float | None = None) -> None:
        pass

    def metrics(self) -> dict[str, Any]:
        return {"producer-metrics": {"connection-count": 1.0}}

    def close(self, timeout: float | None = None) -> None:
        pass


def test_unacknowledged_assignments_fail_the_sync_and_are_sent_again() -> None:
    handle = KafkaProducerHandle({}, producer_factory=FakeProducer)
    sink = AssignmentKafkaSink(handle, "out")
    record = SimpleNamespace(raw_key=b"key-1", key="key-1", headers=())
    sink.write_record_assignments([record], ["a"], np.array([2]), np.array([0.25]), 7)
    with pytest.raises(SinkError, match="1 messages for Kafka topic 'out'"):
        sink.sync()
    handle._client.client.fail = False
    assert sink.sync() == {"topic": "out", "delivered": 1}
    assert handle._client.client.sent == [("out", b"a"), ("out", b"a")]
    sink.close()


class WedgedFuture:
    is_done = False


class WedgedProducer(FakeProducer):
    """Accepts messages but never acknowledges them (flush times out) until healed."""

    instances: list[WedgedProducer] = []

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.wedged = len(WedgedProducer.instances) == 0
        self.closed = False
        WedgedProducer.instances.append(self)

    def send(self, topic: str, value: bytes, key: Any, headers: Any) -> Any:
        self.sent.append((topic, key))
        return WedgedFuture() if self.wedged else FakeFuture(True)

    def flush(self, timeout: float | None = None) -> None:
        if self.wedged:
            raise TimeoutError("Timeout waiting for future")

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


def test_a_wedged_producer_is_replaced_and_its_unacknowledged_messages_sent_again() -> None:
    WedgedProducer.instances = []
    handle = KafkaProducerHandle({}, producer_factory=WedgedProducer)
    sink = AssignmentKafkaSink(handle, "out")
    sink.write_assignments(["a", "b"], np.array([0, 1]), np.array([0.1, 0.2]), 3)
    with pytest.raises(SinkError, match="2 messages for Kafka topic 'out'"):
        sink.sync()
    first = WedgedProducer.instances[0]
    assert first.closed and handle.generation == 1
    assert not handle._client.connected
    assert sink.sync() == {"topic": "out", "delivered": 2}
    second = WedgedProducer.instances[1]
    assert first.sent == second.sent == [("out", b"a"), ("out", b"b")]
    sink.close()


def test_with_transactional_outputs_records_below_the_committed_offset_are_replayed() -> None:
    source = KafkaSource(topics=["t"], consumer_settings={"group_id": "g"},
                         consumer_factory=FakeConsumer, replay_committed=True)
    hooks = Hooks(source, {"t:0": {"topic": "t", "partition": 0, "offset": 4},
                           "t:1": {"topic": "t", "partition": 1, "offset": 2, RELEASED: True}})
    source.start(hooks)
    consumer = source.consumer
    # the transaction up to offset 6 committed, the checkpoint after it was never written
    consumer.committed_offsets = {T0: 6, T1: 5}
    consumer.listener.on_partitions_assigned({T0, T1})
    consumer.to_fetch = {T0: [message(T0, o, b"{}") for o in range(4, 8)]}
    source.poll(0)  # both wait for the committed offset: what came with it is dropped
    assert hooks.parts["t:0"].next_batch(10) == [] and not consumer.paused
    consumer.to_fetch = {T0: [message(T0, o, b"{}") for o in range(4, 8)]}
    source.poll(0)
    assert consumer.seeks == {T0: 4, T1: 5}  # owned: the checkpoint; released: the larger
    records = hooks.parts["t:0"].next_batch(10)
    assert [(r.position["offset"], r.replayed) for r in records] == [
        (4, True), (5, True), (6, False), (7, False)]
    # offsets go to the transaction, never committed on their own
    offsets, group = source.transaction_offsets({"t:0": {"offset": 8}})
    assert {tp: om.offset for tp, om in offsets.items()} == {T0: 8}
    source.commit({"t:0": {"offset": 8}})
    assert consumer.commits == []


def test_sinkset_writes_nothing_for_replayed_records() -> None:
    from streamkm.io.decoding import RejectReason
    from streamkm.sinks import SinkSet
    from streamkm.sources import RawRecord

    class Memory:
        def __init__(self) -> None:
            self.entries: list[Any] = []

        def position(self) -> dict[str, Any]:
            return {"entries": len(self.entries)}

        def write_assignments(self, ids: Any, clusters: Any, sq: Any, step: int) -> None:
            self.entries.extend(zip(ids, clusters.tolist()))

        def write_event(self, event: dict[str, Any]) -> None:
            self.entries.append(event["event"])

        def write_dead_letter(self, raw: bytes, reason: str, detail: str, pos: Any) -> None:
            self.entries.append(raw)

    def record(offset: int, replayed: bool) -> RawRecord:
        return RawRecord(b"r", None, {"offset": offset}, replayed=replayed)

    assignments, events, dead = Memory(), Memory(), Memory()
    sinks = SinkSet(assignments=assignments, events=events,  # type: ignore[arg-type]
                    dead_letter=dead)  # type: ignore[arg-type]
    records = [record(0, True), record(1, False)]
    rejected = [SimpleNamespace(reason=RejectReason.EMPTY, detail="", record=record(2, True))]
    sinks.begin_batch(records, rejected)
    sinks.write_assignments(records, ["a", "b"], np.array([3, 4]), np.array([0.1, 0.2]), 1)
    sinks.write_event({"event": "converged"})
    assert sinks.write_dead_letters(rejected) == {"empty": 1}  # counted, not written
    assert assignments.entries == [("b", 4)] and events.entries == ["converged"]
    assert dead.entries == []
    sinks.begin_batch([record(3, True)], [])  # only replayed records: no events either
    sinks.write_event({"event": "woke"})
    assert events.entries == ["converged"]


def test_keys_make_the_last_message_per_key_exact() -> None:
    handle = KafkaProducerHandle({}, producer_factory=FakeProducer)
    handle._client.get().fail = False
    sink = AssignmentKafkaSink(handle, "out")
    records = [SimpleNamespace(raw_key=b"in", key="in", headers=(("h", b"v"),)),
               SimpleNamespace(raw_key=None, key=None, headers=())]
    sink.write_record_assignments(records, ["a\udc80", 7], np.array([0, 1]),
                                  np.array([0.1, 0.2]), 1)
    # the key is the id exactly as the value carries it (escaped the same way)
    assert [m[0] for m in sink._pending] == [b"a\\x80", b"7"]
    assert [json.loads(m[1])["id"] for m in sink._pending] == ["a\\x80", 7]
    assert sink._pending[0][2] == [("h", b"v"), ("input_key", b"in")]
    sink.close()
    assert position_key({"topic": "t", "partition": 2, "offset": 9}) == b"t:2:9"
    assert position_key({"topic": "t", "partition": 2, "offset": 9, "length": 5}) == b"t:2:9"
    assert position_key({"partition": "*.jsonl", "file": "a.jsonl", "offset": 3}) == b"a.jsonl:3"
