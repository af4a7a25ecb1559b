"""A scale-out member whose file system refuses writes, in process: the worker's assignments
held until the first model version and the leader's events go through the runtime's
IoGuard like a batch's outputs. The refusals are real (``RLIMIT_FSIZE``: the kernel writes
up to the limit, then refuses with ``EFBIG``, as a full disk does with ``ENOSPC``); the
member is the one of ``test_scaleout_retry`` (fake broker clients, real file sinks, a real
merge leader)."""

from __future__ import annotations

import logging
import resource
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamkm.runtime.io_guard import IoHealth
from streamkm.runtime.metrics import ServiceMetrics
from streamkm.scaleout.leader import ModelVersion
from streamkm.scaleout.leader_role import LeaderRole
from streamkm.scaleout.messages import Fence, ModelUpdate, encode_message
from tests.runtime.test_io_faults import file_size_limit, lines
from tests.scaleout.test_scaleout_leadership import SharedTopic
from tests.scaleout.test_scaleout_retry import KEY, FakePublisher, World

pytestmark = pytest.mark.unit


class Stall:
    """Replaces the runtime IoGuard's wait: records what the member shows while it waits
    and lifts the file size limit (space comes back) at the ``space_after``-th wait; the
    real wait still runs (a stop request ends it)."""

    def __init__(self, w: World, space_after: int, look: Any = None) -> None:
        self.seen: list[tuple[IoHealth, float, bool, Any]] = []
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        guard = w.svc.io_guard
        real_wait = guard._wait
        metrics: ServiceMetrics = w.svc.metrics

        def wait(seconds: float) -> bool:
            ready, _body = w.svc.health.readiness()
            self.seen.append((guard.health, metrics.io_stalled._value.get(), ready,
                              look() if look else None))
            if len(self.seen) >= space_after:
                resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            return real_wait(seconds)

        guard._wait = wait


@pytest.fixture(autouse=True, scope="module")
def _compiled(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Run both paths once without a limit: numba compiles (and writes its cache) now, not
    under the file size limit."""
    w = World(tmp_path_factory.mktemp("warm"))
    held_batch(w)
    w.publish()
    topic = SharedTopic()
    send_updates(topic, 20)
    role = leader_role(w, "L", topic)
    for _ in range(30):
        role.round()


def io_errors(w: World, target: str) -> float:
    return w.svc.metrics.io_errors.labels(target=target)._value.get()


# ---------------------------------------------------------------------------- worker


def held_batch(w: World) -> None:
    """A batch read before any version holds a model: its assignments are held, its
    update (raw rows) is sent and reaches the updates topic."""
    w.own()  # the version confirming the fence has no model yet
    w.process(0, 30)
    assert len(w.worker._unassigned) == 1
    w.land(1)


def test_held_assignments_refused_are_retried_until_written_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    w = World(tmp_path)
    held_batch(w)
    out = tmp_path / "a.jsonl"
    stall = Stall(w, 3, look=lambda: out.read_bytes())
    with caplog.at_level(logging.INFO, logger="streamkm"), file_size_limit(100):
        w.publish()  # the first model: the held assignments are written, refused 3 times
    assert len(stall.seen) == 3
    for health, stalled, ready, on_disk in stall.seen:
        assert not health.ok and health.target == "assignments"
        assert health.error is not None and health.error.startswith("EFBIG")
        assert stalled == 1 and not ready
        assert on_disk == b""  # the partial write (100 bytes) was truncated away
    assert io_errors(w, "assignments") == 3
    assert w.svc.metrics.io_stalled._value.get() == 0 and w.svc.io_health.ok
    assignments = lines(out)
    assert [a["id"] for a in assignments] == [f"r{o}" for o in range(30)]  # once each
    assert {a["step"] for a in assignments} == {w.worker.model_version}
    assert not w.worker._unassigned
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("io_stalled") == 1 and messages.count("io_resumed") == 1

    w.process(30, 40)  # the member goes on
    w.land(2)
    w.publish()
    assert [a["id"] for a in lines(out)] == [f"r{o}" for o in range(40)]
    assert w.counted() == 40


def test_stop_while_held_assignments_are_refused_gives_them_up_cleanly(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    w = World(tmp_path)
    held_batch(w)
    w.svc.request_stop()
    with caplog.at_level(logging.INFO, logger="streamkm"), file_size_limit(100):
        w.publish()
    assert io_errors(w, "assignments") == 1
    assert (tmp_path / "a.jsonl").read_bytes() == b""  # nothing partial left behind
    assert w.svc.status.records_rejected == 0
    (given_up,) = [r for r in caplog.records
                   if r.getMessage() == "scaleout_held_assignments_given_up"]
    assert given_up.levelno == logging.WARNING


# ---------------------------------------------------------------------------- leader


def leader_role(w: World, member: str, topic: SharedTopic,
                start: ModelVersion | None = None) -> LeaderRole:
    """A confirmed leader role applying one message per round, publishing after each."""
    role = LeaderRole(w.config, w.svc, w.worker.metrics, member, w.worker.stats, start, None,
                      w.worker._publish_backoff, lambda: None)
    role.config = role.config.model_copy(update={"publish_every_updates": 1,
                                                 "max_updates_per_round": 1})
    role.updates_reader = topic.reader(role.leader.applied_offset + 1)  # type: ignore[assignment]
    role.publisher = FakePublisher(acknowledge=True)  # type: ignore[assignment]
    return role


def send_updates(topic: SharedTopic, n: int) -> None:
    """A fence, then ``n`` updates of 20 records of two blobs for partition ``KEY``."""
    rng = np.random.default_rng(0)
    topic.send(encode_message(Fence(KEY, "a", "w")))
    for i in range(n):
        x = np.array([[0.0, 0.0], [5.0, 5.0]])[np.arange(20) % 2] + rng.normal(0, 0.3, (20, 2))
        topic.send(encode_message(ModelUpdate(
            partition=KEY, start=20 * i, end=20 * (i + 1), token="a", worker="w",
            model_version=-1, rows=x, multiplicities=np.ones(20, np.int64))))


def events(path: Path) -> list[dict[str, Any]]:
    return lines(path) if path.exists() else []


def run_until_event(role: LeaderRole, path: Path, rounds: int) -> None:
    for _ in range(rounds):
        role.round()
        if events(path):
            return
    raise AssertionError(f"no event written in {rounds} rounds")


def published(role: LeaderRole) -> list[int]:
    return [v for v, _ in role.publisher.sent]  # type: ignore[union-attr]


def test_leader_events_refused_are_retried_and_written_once_before_the_version(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    w = World(tmp_path)
    topic = SharedTopic()
    send_updates(topic, 20)  # the model converges within them: a ``converged`` event
    role = leader_role(w, "L", topic)
    path = tmp_path / "e.jsonl"
    stall = Stall(w, 3, look=lambda: (path.read_bytes() if path.exists() else b"",
                                      published(role), role.version))
    with caplog.at_level(logging.INFO, logger="streamkm"), file_size_limit(50):
        run_until_event(role, path, 30)
    assert len(stall.seen) == 3
    stalled_at = stall.seen[0][3][2]
    for health, stalled, ready, (on_disk, versions, version) in stall.seen:
        assert not health.ok and health.target == "events" and stalled == 1 and not ready
        assert on_disk == b""  # whole lines only: the 50 bytes that got in were taken back
        assert version == stalled_at  # the update stays applied; nothing else is applied
        assert max(versions) < stalled_at  # the version holding the change waits for it
    assert io_errors(w, "events") == 3
    assert w.svc.metrics.io_stalled._value.get() == 0 and w.svc.io_health.ok
    (event,) = events(path)  # once, on disk as soon as the round returns
    assert (event["event"], event["leader"], event["version"]) == ("converged", "L", stalled_at)
    assert stalled_at in published(role)
    assert w.svc.metrics.model_transitions.labels(kind="converged")._value.get() == 1
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("io_stalled") == 1 and messages.count("io_resumed") == 1
    assert messages.count("model_converged") == 1

    for _ in range(5):  # the leader goes on; nothing written twice
        role.round()
    assert len(events(path)) == 1 and role.version > stalled_at


def test_stop_while_leader_events_are_refused_the_next_leader_writes_them(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    w = World(tmp_path)
    topic = SharedTopic()
    send_updates(topic, 20)
    role = leader_role(w, "L", topic)
    path = tmp_path / "e.jsonl"
    w.svc.request_stop()
    with caplog.at_level(logging.INFO, logger="streamkm"), file_size_limit(50):
        for _ in range(30):
            role.round()
            if role.given_up:
                break
    assert role.given_up and io_errors(w, "events") == 1
    assert path.read_bytes() == b""
    stalled_at = role.version
    last = max(published(role))
    assert last < stalled_at  # no version holds the change whose event is not written
    role.round()
    role.publish_final()
    assert role.version == stalled_at and max(published(role)) == last
    (given_up,) = [r for r in caplog.records
                   if r.getMessage() == "scaleout_leader_events_given_up"]
    assert given_up.levelno == logging.WARNING

    # space is back; the next leader (here a restart of the member) starts from the last
    # published version
    data = role.publisher.data[last]  # type: ignore[union-attr]
    successor = leader_role(World(tmp_path), "L2", topic, ModelVersion.from_bytes(data))
    run_until_event(successor, path, 30)
    (event,) = events(path)
    assert (event["event"], event["leader"], event["version"]) == ("converged", "L2", stalled_at)
    for _ in range(5):
        successor.round()
    assert len(events(path)) == 1
