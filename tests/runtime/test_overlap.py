"""The service with ingest overlapping the step (``[batching] overlap``, the default): the
same model and outputs as the serial loop, checkpoints only between steps, and a stop or a
failing step in the middle of a step leave every record processed exactly once after a
restart."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streamkm.app.service import Service
from streamkm.config.schema import config_from_mapping
from streamkm.io.batcher import Batch
from streamkm.io.checkpoint import checkpoint_files, read_checkpoint
from streamkm.runtime import Learned, RuntimeHook
from streamkm.runtime.stepping import STEP_THREAD_NAME

pytestmark = pytest.mark.unit

N, BATCH = 400, 40


def _config(folder: Path, *, data: Path | None = None, overlap: bool | str = True) -> Any:
    """Reads ``data`` (default ``folder/in.jsonl``, written if missing); state in ``folder``."""
    data = folder / "in.jsonl" if data is None else data
    if not data.exists():
        rng = np.random.default_rng(0)
        rows = [{"id": i, "x": [float(v) for v in rng.normal(5.0 * (i % 2), 0.3, 2)]}
                for i in range(N)]
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return config_from_mapping({
        "source": {"paths": [str(data)], "start_at": "beginning", "poll_interval_ms": 5},
        "decoding": {"dim": 2},
        "batching": {"batch_size": BATCH, "first_batch_size": BATCH, "max_wait_ms": 200,
                     "overlap": overlap},
        "model": {"n_clusters": 2, "random_state": 0, "tol": 0.0, "patience": 1_000_000},
        "checkpoint": {"dir": "ckpt", "every_batches": 3, "every_seconds": 60},
        "sinks": {"assignments": "out/assignments.jsonl", "events": "out/events.jsonl",
                  "dead_letter": "out/dead.jsonl"},
        "metrics": {"enabled": False}, "ui": {"enabled": False},
    }, base_dir=folder)


class Steps:
    """Wraps the service's learner step: records the thread and the batch ids of every
    step, and runs ``before(call)`` first (to hold or fail one step)."""

    def __init__(self, service: Service,
                 before: Callable[[int], None] = lambda call: None) -> None:
        self.threads: list[str] = []
        self.batches: list[list[Any]] = []
        self._learn = service.learner.learn
        self._before = before
        service.learner.learn = self  # type: ignore[method-assign]

    def __call__(self, batch: Batch) -> Learned:
        self._before(len(self.threads))
        self.threads.append(threading.current_thread().name)
        self.batches.append([int(i) for i in batch.ids])
        return self._learn(batch)


class Checkpoints(RuntimeHook):
    """Records each checkpoint's reason and whether a step was in flight meanwhile."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool, bool]] = []

    def on_checkpoint(self, runtime: Any, reason: str, ok: bool) -> None:
        self.seen.append((reason, ok, runtime.stepping))


def _run_until(service: Service, done: Callable[[], bool], timeout: float = 120.0) -> None:
    """``service.run()`` until ``done()`` (then a stop is requested, as SIGTERM does)."""
    returned = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while not done() and not returned.is_set() and time.monotonic() < deadline:
            time.sleep(0.002)
        service.request_stop()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        service.run()
    finally:
        returned.set()
        watcher.join()


def _assigned_ids(tmp_path: Path) -> list[int]:
    path = tmp_path / "out" / "assignments.jsonl"
    return [int(json.loads(line)["id"]) for line in path.read_text().splitlines()]


def _assignments(tmp_path: Path) -> list[tuple[Any, Any]]:
    path = tmp_path / "out" / "assignments.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [(r["id"], r["cluster"]) for r in rows]


def _latest(tmp_path: Path) -> Any:
    return read_checkpoint(checkpoint_files(tmp_path / "ckpt")[-1])


def test_overlap_gives_the_serial_loops_model_and_outputs(tmp_path: Path) -> None:
    results = {}
    for overlap in (False, True):
        folder = tmp_path / str(overlap)
        folder.mkdir()
        service = Service(_config(folder, data=tmp_path / "in.jsonl", overlap=overlap),
                          registry=CollectorRegistry())
        steps = Steps(service)
        checkpoints = Checkpoints()
        service.add_hook(checkpoints)
        _run_until(service, lambda s=service: s.status.records_read >= N)
        results[overlap] = (_assignments(folder), _latest(folder), steps.threads)
        assert all(not stepping for _r, _ok, stepping in checkpoints.seen)
        assert checkpoints.seen[-1][:2] == ("shutdown", True)
    (serial, serial_ck, serial_threads), (overlapped, overlap_ck, threads) = \
        results[False], results[True]
    assert len(serial) == N and overlapped == serial
    assert set(serial_threads) == {"MainThread"}
    # the model's first batch is stepped on the loop's thread, every later one beside it
    assert threads[0] == "MainThread" and set(threads[1:]) == {STEP_THREAD_NAME}
    assert len(threads) == N // BATCH
    assert overlap_ck.positions == serial_ck.positions
    assert sorted(overlap_ck.model_arrays) == sorted(serial_ck.model_arrays)
    for name, array in serial_ck.model_arrays.items():
        assert np.array_equal(overlap_ck.model_arrays[name], array), name  # bit-identical


def test_a_stop_while_a_batch_steps_writes_it_first_and_resumes_after_it(
        tmp_path: Path) -> None:
    holding, release = threading.Event(), threading.Event()

    def hold_third(call: int) -> None:
        if call == 2:
            holding.set()
            assert release.wait(30)

    service = Service(_config(tmp_path), registry=CollectorRegistry())
    steps = Steps(service, hold_third)
    done = threading.Event()
    runner = threading.Thread(target=lambda: (service.run(), done.set()))
    service.start()
    runner.start()
    try:
        assert holding.wait(60)
        assert service.stepping
        service.request_stop()  # SIGTERM's handler does this
        time.sleep(0.1)
        assert not done.is_set()  # the loop waits for the step in flight
        release.set()
        runner.join(60)
        assert done.is_set()
    finally:
        release.set()
        service.request_stop()
        runner.join(60)
    assert steps.threads[2] == STEP_THREAD_NAME
    first_run = _assigned_ids(tmp_path)
    assert set(steps.batches[2]) <= set(first_run)  # the held batch's outputs are written
    ck = _latest(tmp_path)
    assert ck.counters["records_read"] == len(first_run) < N
    assert int(ck.model_arrays["counts"].sum()) == len(first_run)

    again = Service(_config(tmp_path), registry=CollectorRegistry())
    _run_until(again, lambda: again.status.records_read >= N)
    ids = _assigned_ids(tmp_path)
    assert sorted(ids) == list(range(N))  # each record once over both runs
    assert int(_latest(tmp_path).model_arrays["counts"].sum()) == N


def test_a_failing_step_is_raised_by_run_and_the_restart_reads_its_batch_again(
        tmp_path: Path) -> None:
    def fail_fifth(call: int) -> None:
        if call == 4:
            raise FloatingPointError("a step failed on batch 5")

    service = Service(_config(tmp_path), registry=CollectorRegistry())
    steps = Steps(service, fail_fifth)
    checkpoints = Checkpoints()
    service.add_hook(checkpoints)
    with pytest.raises(FloatingPointError, match="a step failed on batch 5"):
        _run_until(service, lambda: False, timeout=60)
    assert len(steps.threads) == 4  # batch 5 never reached the model
    assert set(steps.threads[1:]) == {STEP_THREAD_NAME}  # it failed on the step thread
    assert "shutdown" not in [reason for reason, _ok, _s in checkpoints.seen]
    ck = _latest(tmp_path)
    # the checkpoint after batch 3; batch 4's outputs were written but are not in it
    assert ck.counters["records_read"] == 3 * BATCH
    assert len(_assigned_ids(tmp_path)) == 4 * BATCH

    again = Service(_config(tmp_path), registry=CollectorRegistry())
    _run_until(again, lambda: again.status.records_read >= N)
    assert sorted(_assigned_ids(tmp_path)) == list(range(N))
    assert int(_latest(tmp_path).model_arrays["counts"].sum()) == N


class EagerGroup:
    """A consumer group of one member over the real file source: while a batch steps, the
    first polls revoke every partition and assign them again (as an eager rebalance does),
    calling the service's listener from inside ``poll`` like a Kafka client."""

    def __init__(self, files: Any, rebalances: int) -> None:
        self.files = files
        self.rebalances = rebalances
        self.listener: Any = None
        self.runtime: Any = None
        self.assigned: list[str] = []
        self.committed: list[dict[str, Any]] = []
        self.stepping_at_change: list[bool] = []

    def list_parts(self) -> list[str]:
        return list(self.assigned)

    def build_part(self, key: str, state: dict[str, Any] | None) -> Any:
        return self.files.build_part(key, state)

    def start(self, listener: Any) -> None:
        self.listener = listener

    def poll(self, timeout_s: float) -> int | None:
        if not self.assigned:
            self.assigned = self.files.list_parts()
            self.listener.on_assigned(list(self.assigned))
        elif self.rebalances and self.runtime.stepping:
            self.rebalances -= 1
            self.stepping_at_change.append(self.runtime.stepping)
            self.listener.on_revoked(list(self.assigned), lost=False)
            self.listener.on_assigned(list(self.assigned))
        else:
            time.sleep(timeout_s)
        return None

    def commit(self, positions: dict[str, Any]) -> None:
        self.committed.append(positions)

    def close(self) -> None:
        """Nothing to leave."""


def _grouped(tmp_path: Path, rebalances: int) -> tuple[Service, EagerGroup]:
    config = _config(tmp_path)
    from streamkm.runtime.wiring import build_source

    group = EagerGroup(build_source(config), rebalances)
    service = Service(config, registry=CollectorRegistry(), source=group)
    group.runtime = service
    return service, group


def test_a_rebalance_while_a_batch_steps_writes_it_before_the_checkpoint(
        tmp_path: Path) -> None:
    service, group = _grouped(tmp_path, rebalances=3)
    revoked: list[tuple[bool, int]] = []
    on_revoked = service.learner.on_revoked

    def record(keys: list[str], *, lost: bool) -> None:  # what the learner sees
        revoked.append((service.stepping, service.status.records_read))
        on_revoked(keys, lost=lost)

    service.learner.on_revoked = record  # type: ignore[method-assign]
    steps = Steps(service)
    _run_until(service, lambda: service.status.records_read >= N)
    assert group.stepping_at_change == [True, True, True]  # each came during a step
    assert len(revoked) == 3 and not any(stepping for stepping, _read in revoked)
    assert STEP_THREAD_NAME in steps.threads
    assert sorted(_assigned_ids(tmp_path)) == list(range(N))  # nothing read twice
    assert int(_latest(tmp_path).model_arrays["counts"].sum()) == N
    # every revocation committed positions of written batches only (multiples of a batch)
    read_at = [read for _stepping, read in revoked]
    assert all(read % BATCH == 0 and read > 0 for read in read_at)
    assert len(group.committed) >= 3


class FailOnBatch(RuntimeHook):
    """Raises while the outputs of batch ``n`` are being handled."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def on_batch(self, runtime: Any, batch: Batch, learned: Learned) -> None:
        self.seen += 1
        if self.seen == self.n:
            raise OSError(f"hook failed on batch {self.n}")


def test_an_error_finishing_a_step_in_a_rebalance_is_raised_by_run(tmp_path: Path) -> None:
    service, group = _grouped(tmp_path, rebalances=1)
    told: list[list[str]] = []
    on_revoked = service.learner.on_revoked
    service.learner.on_revoked = (  # type: ignore[method-assign]
        lambda keys, *, lost: (told.append(keys), on_revoked(keys, lost=lost)))
    service.add_hook(FailOnBatch(2))  # batch 2 is the first stepped beside the loop
    with pytest.raises(OSError, match="hook failed on batch 2"):
        _run_until(service, lambda: False, timeout=60)
    assert group.stepping_at_change == [True]
    assert told == []  # the learner neither checkpointed nor committed after the failure
    assert group.committed == [{}]  # the initial checkpoint's, before any batch


class StatusAtBatch(RuntimeHook):
    """Records, per batch, the model step the status shows, the step of the batch, and
    whether the next batch was stepping meanwhile."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, bool]] = []

    def on_batch(self, runtime: Any, batch: Batch, learned: Learned) -> None:
        if learned.step is not None:
            self.seen.append((int(runtime.status.step), int(learned.step), runtime.stepping))


def test_outputs_are_written_while_the_next_batch_steps_and_hooks_see_their_batch(
        tmp_path: Path) -> None:
    # the step of every batch after the second waits until the previous batch's outputs
    # are in the file: only a loop that writes them beside the step gets past it
    out = tmp_path / "out" / "assignments.jsonl"

    def written() -> int:
        return len(out.read_text().splitlines()) if out.exists() else 0

    def before(call: int) -> None:
        deadline = time.monotonic() + 10.0
        while call >= 2 and written() < call * BATCH and time.monotonic() < deadline:
            time.sleep(0.001)
        assert call < 2 or written() >= call * BATCH, "outputs were not written beside the step"

    service = Service(_config(tmp_path), registry=CollectorRegistry())
    Steps(service, before=before)
    status = StatusAtBatch()
    service.add_hook(status)
    _run_until(service, lambda: service.status.records_read >= N)
    assert _assigned_ids(tmp_path) == list(range(N))
    # the status a hook reads is the model after its own batch, even with the next stepping
    assert all(shown == step for shown, step, _stepping in status.seen)
    assert any(stepping for _shown, _step, stepping in status.seen)


@pytest.mark.parametrize(("cpus", "stepped_aside"), [(1, False), (2, True)])
def test_overlap_auto_steps_aside_only_with_a_second_cpu(tmp_path: Path, monkeypatch,
                                                         cpus: int, stepped_aside: bool
                                                         ) -> None:
    import streamkm.runtime.shell as shell

    monkeypatch.setattr(shell, "available_cpus", lambda: cpus)
    service = Service(_config(tmp_path, overlap="auto"), registry=CollectorRegistry())
    steps = Steps(service)
    _run_until(service, lambda: service.status.records_read >= N)
    assert len(_assigned_ids(tmp_path)) == N
    assert (STEP_THREAD_NAME in steps.threads) is stepped_aside
