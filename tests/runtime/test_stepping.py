"""The step hand-off: one batch at a time on the ``streamkm-step`` thread, results in
submission order, the step's errors raised where the result is taken, a close that waits
for the step in flight; the rebalance listener finishes that step before a partition
change reaches the learner."""

from __future__ import annotations

import threading
import traceback

import pytest

from streamkm.exceptions import StateError, StreamkmError
from streamkm.runtime.stepping import STEP_THREAD_NAME, SettlingListener, Stepper

pytestmark = pytest.mark.unit


def test_steps_run_on_the_step_thread_one_at_a_time_in_order() -> None:
    seen: list[tuple[int, str]] = []
    stepper: Stepper[int, int] = Stepper(
        lambda b: seen.append((b, threading.current_thread().name)) or b * b)
    try:
        results = []
        for batch in range(5):
            stepper.submit(batch)
            results.append(stepper.take())
        assert [r.batch for r in results] == [0, 1, 2, 3, 4]
        assert [r.result for r in results] == [0, 1, 4, 9, 16]
        assert all(r.seconds >= 0 for r in results)
        assert seen == [(b, STEP_THREAD_NAME) for b in range(5)]
    finally:
        stepper.close()


def test_a_second_batch_waits_for_the_first_to_be_taken() -> None:
    gate = threading.Event()
    stepper: Stepper[int, int] = Stepper(lambda b: gate.wait(10) and b)
    try:
        stepper.submit(1)
        assert stepper.busy and not stepper.done
        with pytest.raises(StateError, match="still stepping") as err:
            stepper.submit(2)
        assert isinstance(err.value, StreamkmError)
        assert not stepper.wait(0.01)  # still stepping
        gate.set()
        assert stepper.wait(10) and stepper.done
        assert stepper.take().result == 1
        assert not stepper.busy
        with pytest.raises(StateError, match="nothing to take"):
            stepper.take()
        stepper.submit(2)
        assert stepper.take().result == 2
    finally:
        gate.set()
        stepper.close()


def _failing_step(batch: int) -> int:
    if batch == 2:
        raise ValueError(f"batch {batch!r} has a bad row")
    return batch


def test_the_steps_error_is_raised_by_take_with_its_own_traceback() -> None:
    stepper: Stepper[int, int] = Stepper(_failing_step)
    try:
        stepper.submit(1)
        assert stepper.take().result == 1
        stepper.submit(2)
        assert stepper.wait(10) and stepper.done
        with pytest.raises(ValueError, match="batch 2 has a bad row") as err:
            stepper.take()
        frames = [f.name for f in traceback.extract_tb(err.value.__traceback__)]
        assert "_failing_step" in frames  # raised on the step thread, shown as it was
        assert not stepper.busy
        stepper.submit(3)  # the thread keeps serving
        assert stepper.take().result == 3
    finally:
        stepper.close()


def test_close_waits_for_the_step_in_flight_and_drops_it() -> None:
    started, gate, finished = threading.Event(), threading.Event(), threading.Event()

    def step(batch: int) -> int:
        started.set()
        gate.wait(10)
        finished.set()
        return batch

    stepper: Stepper[int, int] = Stepper(step, name="stepper-closing")
    stepper.submit(7)
    assert started.wait(10)
    closer = threading.Thread(target=stepper.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # waiting for the step, not abandoning it mid-update
    gate.set()
    closer.join(10)
    assert not closer.is_alive() and finished.is_set()
    assert not stepper.busy
    assert "stepper-closing" not in {t.name for t in threading.enumerate()}  # thread ended
    with pytest.raises(StateError, match="closed"):
        stepper.submit(8)


class _Learner:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], bool]] = []

    def on_assigned(self, part_keys: list[str]) -> None:
        self.calls.append(("assigned", part_keys, False))

    def on_revoked(self, part_keys: list[str], *, lost: bool) -> None:
        self.calls.append(("revoked", part_keys, lost))


def test_the_listener_settles_the_step_before_the_learner_hears_of_a_change() -> None:
    learner, order = _Learner(), []

    def settle() -> bool:
        order.append(len(learner.calls))  # how many changes the learner had heard of
        return True

    listener = SettlingListener(learner, settle)
    listener.on_revoked(["t:0"], lost=False)
    listener.on_assigned(["t:1"])
    listener.on_revoked(["t:1"], lost=True)
    assert order == [0, 1, 2]
    assert learner.calls == [("revoked", ["t:0"], False), ("assigned", ["t:1"], False),
                             ("revoked", ["t:1"], True)]


def test_a_failed_step_keeps_the_change_from_the_learner() -> None:
    learner = _Learner()
    listener = SettlingListener(learner, lambda: False)
    listener.on_revoked(["t:0"], lost=False)
    listener.on_assigned(["t:0"])
    assert learner.calls == []  # nothing checkpointed or committed after a failed step
