"""Leader claims on the updates topic, without a broker: a member taking the leader role
publishes nothing until its claim is applied as accepted, a claim is a compare-and-set on the
leader epoch, and a confirmed leader that applies another member's accepted claim is fenced
(publishes nothing more). The updates topic is a list shared by the roles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamkm.scaleout.leader import MergeLeader, ModelVersion
from streamkm.scaleout.leader_role import LeaderRole
from streamkm.scaleout.messages import LeaderClaim, decode_message, encode_message
from tests.scaleout.test_scaleout_retry import FakeFuture, FakePublisher, World

pytestmark = pytest.mark.unit


class SharedTopic:
    """The updates topic: every send lands at once and is acknowledged."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []

    def send(self, data: bytes, *, key: bytes | None = None) -> FakeFuture:
        self.messages.append(data)
        future = FakeFuture()
        future.succeed(len(self.messages) - 1)
        return future

    def reader(self, start: int) -> TopicReader:
        return TopicReader(self, start)


class TopicReader:
    def __init__(self, topic: SharedTopic, start: int) -> None:
        self.topic, self.position = topic, start

    def poll(self, timeout_s: float, max_records: int) -> list[tuple[int, bytes]]:
        end = min(len(self.topic.messages), self.position + max_records)
        out = [(o, self.topic.messages[o]) for o in range(self.position, end)]
        self.position = end
        return out

    def lag(self) -> int:
        return len(self.topic.messages) - self.position

    def close(self) -> None:
        pass


def role(w: World, member: str, topic: SharedTopic, start: ModelVersion | None) -> LeaderRole:
    r = LeaderRole(w.config, w.svc, w.worker.metrics, member, w.worker.stats, start, None,
                   w.worker._publish_backoff, lambda: None, claims=topic)
    r.updates_reader = topic.reader(r.leader.applied_offset + 1)  # type: ignore[assignment]
    r.publisher = FakePublisher()  # type: ignore[assignment]
    return r


def published(r: LeaderRole) -> list[int]:
    return [v for v, _ in r.publisher.sent]  # type: ignore[union-attr]


def test_claims_are_a_compare_and_set_on_the_epoch() -> None:
    leader = MergeLeader(lambda: None, init_records=10)
    verdicts = [leader.apply(m, i).verdict for i, m in enumerate([
        LeaderClaim("a", "t1", 0), LeaderClaim("b", "t2", 0), LeaderClaim("b", "t3", 1)])]
    assert verdicts == ["claim", "claim_rejected", "claim"]
    assert (leader.leadership.epoch, leader.leadership.member) == (2, "b")
    back = ModelVersion.from_bytes(leader.snapshot().to_bytes())
    assert back.leadership == leader.leadership
    assert decode_message(encode_message(LeaderClaim("a", "t", 4))) == LeaderClaim("a", "t", 4)


def test_unconfirmed_leader_does_not_publish_until_its_claim_is_applied(tmp_path: Path) -> None:
    w, topic = World(tmp_path), SharedTopic()
    a = role(w, "a", topic, None)
    assert len(topic.messages) == 1 and not a.confirmed
    a.publish()
    assert published(a) == []
    a.round()  # applies its own claim: confirmed, and publishes (a claim makes one due)
    assert a.confirmed and not a.fenced and published(a) == [1]


def test_replaced_leader_is_fenced_and_publishes_nothing_more(tmp_path: Path) -> None:
    w, topic = World(tmp_path), SharedTopic()
    a = role(w, "a", topic, None)
    a.round()
    a.publisher.sent[0][1][0].succeed(0)  # type: ignore[union-attr]
    a.round()
    # b is elected (a was cut off) and claims from a's published version
    b = role(w, "b", topic, a.leader.snapshot())
    b.round()
    assert b.confirmed and b.leader.leadership.member == "b"
    topic.send(encode_message(LeaderClaim("x", "late", 0)))  # a stale claim: rejected
    b.round()
    assert b.confirmed and not b.fenced
    # a comes back: it reads b's claim before anything newer, and stops
    before = len(published(a))
    a.round()
    assert a.fenced and not a.confirmed
    a.publish_due = True
    a.publish()
    assert len(published(a)) == before


def test_claim_rejected_after_an_unseen_claim_is_sent_again(tmp_path: Path) -> None:
    w, topic = World(tmp_path), SharedTopic()
    a = role(w, "a", topic, None)
    a.round()  # a confirmed at epoch 1, but a dies before publishing a version
    # b starts from the empty state (epoch 0): its first claim is rejected
    b = role(w, "b", topic, None)
    b.round()
    claims = [decode_message(m) for m in topic.messages]
    assert [c.after_epoch for c in claims] == [0, 0, 1]  # type: ignore[union-attr]
    b.round()
    assert b.confirmed and b.leader.leadership.epoch == 2
    a.round()
    assert a.fenced


def test_failed_claim_is_sent_again(tmp_path: Path) -> None:
    w = World(tmp_path)
    topic = SharedTopic()
    futures: list[FakeFuture] = []

    class Failing:
        def send(self, data: bytes, *, key: bytes | None = None) -> Any:
            future = FakeFuture()
            futures.append(future)
            return future

    r = LeaderRole(w.config, w.svc, w.worker.metrics, "a", w.worker.stats, None, None,
                   w.worker._publish_backoff, lambda: None, claims=Failing())  # type: ignore
    r.updates_reader = topic.reader(0)  # type: ignore[assignment]
    r.publisher = FakePublisher()  # type: ignore[assignment]
    futures[0].fail(OSError("delivery timed out"))
    r._claims = topic  # type: ignore[assignment]
    r.round()  # claims again, then applies that claim
    r.round()
    assert r.confirmed and len(topic.messages) == 1
    assert np.all([isinstance(decode_message(m), LeaderClaim) for m in topic.messages])


class FakeElection:
    def __init__(self) -> None:
        self.is_leader = True
        self.changes = 1

    def close(self) -> None:
        pass


def test_fenced_leader_steps_down_and_waits_for_the_group(tmp_path: Path) -> None:
    w, topic = World(tmp_path), SharedTopic()
    worker = w.worker
    worker.link.election = election = FakeElection()  # type: ignore[assignment]
    worker.link.set_connected(True)
    worker.leader = a = role(w, "a", topic, None)
    a.round()
    topic.send(encode_message(LeaderClaim("b", "tb", a.leader.leadership.epoch)))
    worker.tick()  # applies b's claim: fenced, and the role is given up at the next tick
    worker.tick()
    assert worker.leader is None and a.fenced
    # the group still says "leader" (this member has not heard of its eviction): no claim
    assert not worker._may_lead()
    election.changes += 2  # the group took the partition away and gave it back
    assert worker._may_lead()
