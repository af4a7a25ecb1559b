"""Device-level and record-level write errors, in process, and the second
line of defence.

The file system's refusals are real: ``RLIMIT_FSIZE`` makes the kernel refuse (``EFBIG``)
any write past a size, partially when a write crosses it, exactly as a full disk does with
``ENOSPC`` (``SIGXFSZ`` is ignored for the duration). The tmpfs tests with a real service
process are in ``tests/service/test_disk_full.py``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import resource
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streamkm.app.service import Service
from streamkm.exceptions import OutputRecordError, StorageError
from streamkm.runtime.io_guard import IoGuard
from streamkm.runtime.metrics import ServiceMetrics
from streamkm_connectors.file_sinks import AssignmentFileSink
from tests.runtime.test_runtime_shell import _config, _drain

pytestmark = pytest.mark.unit


@contextlib.contextmanager
def file_size_limit(max_bytes: int) -> Iterator[None]:
    """Writes past ``max_bytes`` in any file fail with EFBIG until the block ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def lines(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), "torn last line"
    return [json.loads(line) for line in data.splitlines()]


def write_rows(sink: AssignmentFileSink, start: int, n: int) -> None:
    sink.write_assignments([f"r{i}" for i in range(start, start + n)], np.zeros(n, np.int64),
                           np.ones(n), step=1)


# ---------------------------------------------------------------------------- IoGuard


def refusal(target: str = "assignments") -> StorageError:
    return StorageError(target, OSError(errno.ENOSPC, "No space left on device"))


def test_guard_backs_off_counts_and_resumes(caplog: pytest.LogCaptureFixture) -> None:
    metrics = ServiceMetrics(CollectorRegistry())
    waits: list[float] = []
    guard = IoGuard(metrics, lambda s: waits.append(s) is not None, initial_backoff_s=0.05,
                    max_backoff_s=0.3)
    seen: list[tuple[bool, float]] = []

    def attempt() -> None:
        seen.append((guard.health.ok, metrics.io_stalled._value.get()))
        if len(seen) <= 5:
            raise refusal()

    with caplog.at_level(logging.INFO, logger="streamkm"):
        assert guard.run(attempt) is True
    assert waits == [0.05, 0.1, 0.2, 0.3, 0.3]  # doubled, capped
    assert seen[0] == (True, 0.0) and seen[1:] == [(False, 1.0)] * 5
    assert metrics.io_errors.labels(target="assignments")._value.get() == 5
    assert metrics.io_stalled._value.get() == 0 and guard.health.ok
    events = [r.getMessage() for r in caplog.records]
    assert events.count("io_stalled") == 1 and events.count("io_resumed") == 1


def test_guard_health_names_the_target_while_stalled() -> None:
    metrics = ServiceMetrics(CollectorRegistry())
    health = []

    def wait(_s: float) -> bool:
        health.append(guard.health)
        return len(health) == 2  # a stop request during the second wait

    undone = []
    guard = IoGuard(metrics, wait)
    assert guard.run(lambda: (_ for _ in ()).throw(refusal("checkpoint")),
                     undo=lambda: undone.append(1)) is False
    assert undone == [1, 1]  # after every refused attempt
    assert not health[1].ok and health[1].target == "checkpoint"
    assert health[1].failed_attempts == 2 and health[1].error.startswith("ENOSPC")
    assert "cannot write checkpoint (ENOSPC" in health[1].detail
    assert metrics.io_stalled._value.get() == 1
    assert metrics.io_errors.labels(target="checkpoint")._value.get() == 2


def test_guard_lets_other_errors_through() -> None:
    guard = IoGuard(ServiceMetrics(CollectorRegistry()), lambda _s: False)
    with pytest.raises(RuntimeError, match="bug"):
        guard.run(lambda: (_ for _ in ()).throw(RuntimeError("bug")))
    assert guard.health.ok


# ---------------------------------------------------------------------------- file sinks


def test_refused_flush_leaves_whole_lines_and_is_retried(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    sink = AssignmentFileSink(path)
    write_rows(sink, 0, 10)
    sink.flush()
    good = path.stat().st_size
    write_rows(sink, 10, 50)
    with file_size_limit(good + 100):  # the next write gets 100 bytes in, then EFBIG
        with pytest.raises(OSError) as info:
            sink.flush()
    assert info.value.errno == errno.EFBIG and info.value.filename == str(path)
    assert path.stat().st_size == good  # the partial write was truncated away
    assert sink.position()["bytes"] > good  # the lines are still buffered
    sink.flush()
    sink.close()
    assert [a["id"] for a in lines(path)] == [f"r{i}" for i in range(60)]


def test_rollback_then_close_while_refused_drops_the_batch_cleanly(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "a.jsonl"
    sink = AssignmentFileSink(path)
    write_rows(sink, 0, 10)
    sink.flush()
    mark = sink.position()
    write_rows(sink, 10, 50)
    with file_size_limit(mark["bytes"] + 100):
        with pytest.raises(OSError):
            sink.flush()
        sink.rollback(mark)
        assert sink.position() == mark
        write_rows(sink, 10, 5)
        with caplog.at_level(logging.WARNING, logger="streamkm"):
            sink.close()  # cannot flush: dropped and logged, no exception
    assert [r.getMessage() for r in caplog.records] == ["sink_unflushed_at_close"]
    assert [a["id"] for a in lines(path)] == [f"r{i}" for i in range(10)]


# ---------------------------------------------------------------------------- the runtime


def clean_run(tmp_path: Path) -> list[tuple[str, int, int]]:
    """``(id, cluster, step)`` of every assignment of the same input without faults."""
    folder = tmp_path / "clean"
    folder.mkdir()
    clean = Service(_config(folder), registry=CollectorRegistry())
    clean.start()
    _drain(clean)
    clean.close()
    return [(a["id"], a["cluster"], a["step"])
            for a in lines(folder / "out" / "assignments.jsonl")]


def stall_until_waited(service: Service, waits_before_space: int) -> list[float]:
    """Have the runtime's backoff waits lift the size limit after ``waits_before_space``
    of them (space comes back); returns the waits seen."""
    waits: list[float] = []
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        if len(waits) >= waits_before_space:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        return False

    service.io_guard._wait = wait
    return waits


def test_refused_batch_output_is_retried_whole_exactly_once(tmp_path: Path) -> None:
    service = Service(_config(tmp_path), registry=CollectorRegistry())
    service.start()
    out = tmp_path / "out" / "assignments.jsonl"
    assert service.batcher is not None
    first = service.batcher.collect(min_valid=service.learner.min_valid(),
                                    wait=service.wait_stop)
    assert first is not None
    service.process(first)
    waits = stall_until_waited(service, 3)
    with file_size_limit(out.stat().st_size + 300):
        _drain(service)
    m = service.metrics
    assert len(waits) == 3
    assert m.io_errors.labels(target="assignments")._value.get() == 3
    assert m.io_stalled._value.get() == 0 and service.io_health.ok
    faulted = [(a["id"], a["cluster"], a["step"]) for a in lines(out)]
    assert sorted(i for i, _, _ in faulted) == sorted(str(i) for i in range(60))
    service.close()
    assert faulted == clean_run(tmp_path)  # no batch learned twice


def test_refused_checkpoint_pauses_until_written(tmp_path: Path) -> None:
    service = Service(_config(tmp_path), registry=CollectorRegistry())
    service.start()
    _drain(service)
    service.mark_dirty()
    service._batches_since_checkpoint = 10  # due
    before = len(service.store.paths()) if service.store else 0
    written = service.status.checkpoints
    stall_until_waited(service, 2)
    with file_size_limit(1000):  # a checkpoint file is larger
        service._maybe_checkpoint()
    assert service.status.checkpoints == written + 1
    assert service.metrics.io_errors.labels(target="checkpoint")._value.get() == 2
    assert not list((tmp_path / "ckpt").glob(".checkpoint-*"))  # no temp file left
    assert len(service.store.paths()) >= min(before + 1, service.config.checkpoint.keep)
    service.close()


class PickyAssignments(AssignmentFileSink):
    """A sink that cannot serialise one record (id 7), whatever the device."""

    def write_assignments(self, ids: list[Any], clusters: Any, sq_distances: Any,
                          step: int) -> None:
        if "7" in ids:
            raise OutputRecordError("cannot serialise id 7")
        super().write_assignments(ids, clusters, sq_distances, step)


def test_record_the_sink_cannot_write_is_dead_lettered_not_retried(tmp_path: Path) -> None:
    service = Service(_config(tmp_path), registry=CollectorRegistry())
    service.start()
    assert service.sinks is not None and service.sinks.assignments is not None
    service.sinks.assignments.close()
    service.sinks.assignments = PickyAssignments(tmp_path / "out" / "assignments.jsonl")
    _drain(service)  # the stream was not blocked: all 61 records read
    ids = [a["id"] for a in lines(tmp_path / "out" / "assignments.jsonl")]
    assert sorted(ids, key=int) == [str(i) for i in range(60) if i != 7]
    dead = lines(tmp_path / "out" / "dead.jsonl")
    assert sorted(d["reason"] for d in dead) == ["output_error", "unparseable"]
    (poison,) = [d for d in dead if d["reason"] == "output_error"]
    assert json.loads(poison["raw"])["id"] == 7
    assert poison["detail"] == ("assignment not writable: OutputRecordError: cannot "
                                "serialise id 7")
    m = service.metrics
    assert m.records_rejected.labels(reason="output_error")._value.get() == 1
    assert service.status.rejected_by_reason["output_error"] == 1
    assert (service.status.records_accepted, service.status.records_rejected) == (59, 2)
    assert m.records_accepted._value.get() == 59  # = assignment lines
    assert m.io_errors.labels(target="assignments")._value.get() == 0  # not a device fault
    service.close()


def test_stop_while_stalled_gives_the_batch_up_and_a_restart_is_exact(tmp_path: Path) -> None:
    service = Service(_config(tmp_path), registry=CollectorRegistry())
    service.start()
    out = tmp_path / "out" / "assignments.jsonl"
    assert service.batcher is not None and service.store is not None
    first = service.batcher.collect(min_valid=service.learner.min_valid(),
                                    wait=service.wait_stop)
    assert first is not None
    service.process(first)
    service.checkpoint(reason="test")
    checkpoints = service.store.paths()
    second = service.batcher.collect(min_valid=1, wait=service.wait_stop)
    assert second is not None
    service.process(second)  # written, not checkpointed
    length = out.stat().st_size

    def stop_now(_seconds: float) -> bool:
        service.request_stop()  # SIGTERM while stalled
        return True

    service.io_guard._wait = stop_now
    batch = service.batcher.collect(min_valid=1, wait=service.wait_stop)
    assert batch is not None and batch.n_valid
    with file_size_limit(length + 300):
        service.process(batch)
    assert out.stat().st_size == length  # the partial output was taken back
    service._batches_since_checkpoint = 10  # due, and space is back: still no checkpoint
    service._maybe_checkpoint()
    service.close()
    assert service.store.paths() == checkpoints  # no final checkpoint either
    assert [a["id"] for a in lines(out)] == first.ids + second.ids

    restarted = Service(_config(tmp_path), registry=CollectorRegistry())
    restarted.start()
    _drain(restarted)
    restarted.close()
    assert [(a["id"], a["cluster"], a["step"]) for a in lines(out)] == clean_run(tmp_path)


def test_stop_while_a_checkpoint_is_refused_closes_cleanly(tmp_path: Path) -> None:
    service = Service(_config(tmp_path), registry=CollectorRegistry())
    service.start()
    _drain(service)
    assert service.store is not None
    checkpoints = service.store.paths()
    service.mark_dirty()
    service._batches_since_checkpoint = 10

    def stop_now(_seconds: float) -> bool:
        service.request_stop()
        return True

    service.io_guard._wait = stop_now
    with file_size_limit(1000):
        service._maybe_checkpoint()  # refused, then the stop
        service.close()  # the final checkpoint is tried once, refused: no exception
    assert service.store.paths() == checkpoints
    assert not service.io_health.ok
    restarted = Service(_config(tmp_path), registry=CollectorRegistry())
    restarted.start()  # resumes from the last checkpoint written
    _drain(restarted)
    restarted.close()
    ids = [a["id"] for a in lines(tmp_path / "out" / "assignments.jsonl")]
    assert sorted(ids, key=int) == [str(i) for i in range(60)]
