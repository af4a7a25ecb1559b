"""Scale-out sends whose outcome is unknown, without a broker: a process's fences, updates and
publications go to fake producers; the test decides which messages reach the (in-memory)
updates topic and which futures fail, and a real :class:`MergeLeader` applies the topic.
Whatever happened to a failed send, the partition is re-fenced and the model counts every
record exactly once."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from streamkm.app.scaleout import ScaleoutService
from streamkm.config.schema import service_model
from streamkm.exceptions import TransportError
from streamkm.io.batcher import Batch
from streamkm.runtime.wiring import build_model, build_sinks
from streamkm.scaleout.backoff import Backoff
from streamkm.scaleout.leader import MergeLeader
from streamkm.scaleout.leader_role import LeaderRole
from streamkm.scaleout.messages import Fence, ModelUpdate, decode_message
from streamkm.sources import RawRecord

pytestmark = pytest.mark.unit

KEY = "t:0"


class FakeFuture:
    def __init__(self) -> None:
        self.callbacks: list[Any] = []
        self.errbacks: list[Any] = []
        self.is_done = False
        self.exception: BaseException | None = None

    def add_callback(self, f: Any) -> None:
        self.callbacks.append(f)

    def add_errback(self, f: Any) -> None:
        self.errbacks.append(f)

    def succeed(self, offset: int) -> None:
        self.is_done = True
        for f in self.callbacks:
            f(SimpleNamespace(offset=offset))

    def fail(self, exc: BaseException) -> None:
        self.is_done, self.exception = True, exc
        for f in self.errbacks:
            f(exc)

    def failed(self) -> bool:
        return self.is_done and self.exception is not None


class FakeProducer:
    """Records what the process hands over; ``raise_next`` makes ``send`` raise once."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, FakeFuture]] = []
        self.raise_next: BaseException | None = None

    def send(self, data: bytes, *, key: bytes | None = None) -> FakeFuture:
        if self.raise_next is not None:
            exc, self.raise_next = self.raise_next, None
            raise exc
        future = FakeFuture()
        self.sent.append((data, future))
        return future

    def connected(self) -> bool:
        return True

    def close(self) -> None:
        pass


class FakePart:
    def __init__(self, key: str, offset: int) -> None:
        self.key, self.offset = key, offset

    def close(self) -> None:
        pass


class FakeSource:
    def __init__(self) -> None:
        self.built: list[tuple[str, int]] = []

    def build_part(self, key: str, state: dict[str, Any]) -> FakePart:
        self.built.append((key, int(state["offset"])))
        return FakePart(key, int(state["offset"]))

    def commit(self, positions: Any) -> None:
        pass


class FakeTransport:
    """Maps positions to partition keys as the Kafka transport does; no clients."""

    def part_key(self, position: dict[str, Any]) -> str:
        return f"{position['topic']}:{position['partition']}"

    def resume_state(self, key: str, offset: int) -> dict[str, Any]:
        return {"offset": offset}


class FakeBatcher:
    def __init__(self) -> None:
        self.parts: dict[str, Any] = {}

    def set_parts(self, parts: dict[str, Any]) -> None:
        self.parts = parts


class World:
    """One process (not started: fakes instead of Kafka clients), the updates topic as a
    list, and the merge leader applying it."""

    def __init__(self, tmp: Path) -> None:
        self.config = service_model().model_validate({
            "source": {"kind": "kafka", "topics": ["t"], "group_id": "g"},
            "decoding": {"dim": 2}, "batching": {"batch_size": 10},
            "model": {"n_clusters": 2, "tau": 10, "n_init": 1, "random_state": 0,
                      "gamma": "median"},  # no kernel choice: the first event is "converged"
            "scaleout": {"enabled": True, "member_id": "w"},
            "sinks": {"kind": "file", "assignments": str(tmp / "a.jsonl"),
                      "events": str(tmp / "e.jsonl"), "dead_letter": str(tmp / "d.jsonl")},
            "checkpoint": {"dir": str(tmp / "ck")}})
        svc = ScaleoutService(self.config, serve_metrics=False, transport=FakeTransport())
        worker = svc.learner
        worker.link.updates = self.producer = FakeProducer()
        svc.source = self.source = FakeSource()
        svc.batcher = self.batcher = FakeBatcher()  # type: ignore[assignment]
        svc.sinks = build_sinks(self.config, metrics=svc.metrics)
        self.svc, self.worker = svc, worker
        cfg = self.config
        self.leader = MergeLeader(lambda: build_model(cfg.model, 10, cfg.drift.policy),
                                  init_records=10, member="leader")
        self.topic: list[bytes] = []
        self.applied = 0

    def land(self, index: int) -> None:
        """The ``index``-th message handed to the producer reaches the topic."""
        self.topic.append(self.producer.sent[index][0])

    def ack(self, index: int) -> None:
        self.producer.sent[index][1].succeed(len(self.topic) - 1)

    def fail(self, index: int) -> None:
        self.producer.sent[index][1].fail(TransportError("delivery timed out"))

    def publish(self) -> None:
        """The leader applies the new messages and the process adopts the version."""
        for offset in range(self.applied, len(self.topic)):
            self.leader.apply(decode_message(self.topic[offset]), offset)
        self.applied = len(self.topic)
        version = self.leader.snapshot()
        self.worker._on_version(version.version, version.to_bytes())
        self.worker._adopt_latest()

    def process(self, start: int, end: int) -> None:
        """The process reads offsets [start, end) of the partition as one batch."""
        rng = np.random.default_rng(start)
        x = np.array([[0.0, 0.0], [5.0, 5.0]])[np.arange(start, end) % 2] + rng.normal(
            0, 0.3, (end - start, 2))
        records = [RawRecord(value=b"", key=None,
                             position={"topic": "t", "partition": 0, "offset": o})
                   for o in range(start, end)]
        self.svc.process(Batch(X=x, ids=[f"r{o}" for o in range(start, end)], rejections=[],
                                n_read=end - start, positions={KEY: {"offset": end}},
                                next_part=0, records=records))

    def message(self, index: int) -> Any:
        return decode_message(self.producer.sent[index][0])

    def counted(self) -> int:
        return int(self.leader.model.counts_.sum()) if self.leader.model is not None else 0

    def own(self) -> None:
        """Assignment, fence, confirmation."""
        self.worker.on_assigned([KEY])
        self.worker._send_fences()
        n = len(self.producer.sent) - 1
        self.land(n)
        self.ack(n)
        self.worker._handle_send_results()
        self.publish()


@pytest.mark.parametrize("written", [True, False], ids=["failed-but-written", "lost"])
def test_failed_update_send_refences_and_counts_stay_exact(tmp_path: Path,
                                                           written: bool) -> None:
    w = World(tmp_path)
    w.own()
    assert w.worker.fences.active == {KEY: 0}
    first_token = w.worker.fences.tokens[KEY]
    w.process(0, 30)  # update 1: delivered
    w.land(1)
    w.ack(1)
    w.process(30, 50)  # update 2: the send fails; whether it reached the topic is unknown
    if written:
        w.land(2)
    w.process(50, 60)  # update 3, queued after it, is delivered
    w.land(3)
    w.ack(3)
    w.fail(2)
    w.publish()
    assert w.leader.ledger.watermark(KEY) == (60 if written else 30)

    w.worker._handle_send_results()  # the failure: a new generation, nothing read meanwhile
    assert KEY not in w.worker.fences.active and w.worker.fences.to_fence == [KEY]
    assert w.batcher.parts == {}
    w.worker._send_fences()
    fence = w.message(4)
    assert isinstance(fence, Fence) and fence.token != first_token
    w.land(4)
    w.ack(4)
    if written:  # the producer's own retry of update 2 lands late, after the fence
        w.land(2)
    w.worker._handle_send_results()
    w.publish()
    resume = 60 if written else 30
    assert w.worker.fences.active == {KEY: resume} and w.worker.fences.tokens[KEY] == fence.token
    assert w.source.built[-1] == (KEY, resume)  # re-read from the confirmed watermark
    assert w.batcher.parts[KEY].offset == resume

    w.process(resume, 80)
    w.land(5)
    w.ack(5)
    w.publish()
    assert w.counted() == 80  # every record once: none lost, none twice
    dropped = w.leader.counters["updates_dropped"]
    assert dropped == {"stale_generation": 1 if written else 0, "duplicate": 0,
                       "gap": 0 if written else 1, "corrupt": 0}

    # a late failure of an old generation changes nothing
    w.worker.fences.results.append(("update_failed", KEY, first_token, TransportError("x")))
    w.worker._handle_send_results()
    assert w.worker.fences.active == {KEY: 80} and not w.worker.fences.to_fence


def test_failed_fence_is_sent_again_with_a_new_token(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.worker.on_assigned([KEY])
    w.producer.raise_next = TransportError("metadata not available")
    w.worker._send_fences()  # not even queued: kept, retried after a backoff
    assert w.producer.sent == [] and w.worker.fences.to_fence == [KEY] and not w.worker.fences.pending
    w.worker._send_fences()
    assert w.producer.sent == []  # backing off
    w.worker.fences.backoff.succeeded()
    w.worker._send_fences()
    first = w.message(0)
    w.land(0)  # it reached the topic, but the producer reports a failure
    w.fail(0)
    w.worker._handle_send_results()
    assert w.worker.fences.to_fence == [KEY] and not w.worker.fences.pending
    w.publish()  # a version in which the failed fence's token owns the partition ...
    assert KEY not in w.worker.fences.active  # ... confirms nothing: that generation was abandoned
    w.worker.fences.backoff.succeeded()
    w.worker._send_fences()
    second = w.message(1)
    assert second.token != first.token and w.worker.fences.pending == {KEY: second.token}
    w.land(1)
    w.ack(1)
    w.worker._handle_send_results()
    w.publish()
    assert w.worker.fences.active == {KEY: 0} and w.worker.fences.tokens == {KEY: second.token}
    w.process(0, 40)
    w.land(2)
    w.publish()
    assert w.counted() == 40


def test_revoked_partition_is_not_refenced_after_a_failure(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.own()
    w.process(0, 20)
    w.worker.on_revoked([KEY], lost=True)
    w.fail(1)
    w.worker._handle_send_results()
    assert not w.worker.fences.to_fence and not w.worker.fences.active


def test_update_send_that_raises_refences(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.own()
    w.producer.raise_next = TransportError("buffer full")
    w.process(0, 20)
    assert len(w.producer.sent) == 1  # nothing queued
    w.worker._handle_send_results()
    assert w.worker.fences.to_fence == [KEY] and KEY not in w.worker.fences.active


class FakePublisher:
    """A version publisher whose deliveries the test settles (``acknowledge``: each at once);
    ``data`` keeps every version's bytes."""

    def __init__(self, acknowledge: bool = False) -> None:
        self.sent: list[tuple[int, list[FakeFuture]]] = []
        self.data: dict[int, bytes] = {}
        self.acknowledge = acknowledge

    def send_version(self, version: int, data: bytes) -> list[FakeFuture]:
        futures = [FakeFuture()]
        if self.acknowledge:
            futures[0].succeed(0)
        self.sent.append((version, futures))
        self.data[version] = data
        return futures

    def flush(self, timeout_s: float) -> None:
        """Nothing is buffered: the test settles every delivery."""

    def close(self) -> None:
        """Nothing to release."""


def test_failed_publication_is_retried_after_a_backoff(tmp_path: Path) -> None:
    w = World(tmp_path)
    svc, worker = w.svc, w.worker
    role = LeaderRole(w.config, svc, worker.metrics, "w", worker.stats, None, None,
                      worker._publish_backoff, lambda: worker.link.set_connected(False))
    role.publisher = publisher = FakePublisher()
    role.publish()
    role.publish()  # one publication in flight at a time
    assert len(publisher.sent) == 1
    publisher.sent[0][1][0].fail(TransportError("delivery timed out"))
    role.check_publication()
    assert role.publish_due and role.publishing is None
    assert svc.metrics.registry.get_sample_value(
        "streamkm_kafka_broker_connected", {"client": "scaleout"}) == 0
    role.publish()
    assert len(publisher.sent) == 1  # backing off
    worker._publish_backoff.succeeded()
    role.publish()
    assert len(publisher.sent) == 2 and not role.publish_due
    publisher.sent[1][1][0].succeed(0)
    role.check_publication()
    assert svc.scaleout_metrics.versions_published._value.get() == 1


def test_backoff_doubles_up_to_the_maximum() -> None:
    now = [0.0]
    b = Backoff(0.5, 2.0, clock=lambda: now[0])
    assert b.ready()
    assert [b.failed() for _ in range(4)] == [0.5, 1.0, 2.0, 2.0]
    assert not b.ready()
    now[0] += 2.0
    assert b.ready()
    b.succeeded()
    assert b.failed() == 0.5


def test_update_message_carries_the_generation_token(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.own()
    w.process(0, 10)
    update = w.message(1)
    assert isinstance(update, ModelUpdate) and update.token == w.worker.fences.tokens[KEY]
    assert (update.start, update.end, update.n_records) == (0, 10, 10)
