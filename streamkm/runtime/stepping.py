"""The step hand-off: the learner steps batch N on its own thread while the loop reads N+1.

A :class:`Stepper` owns one thread, ``streamkm-step``, and holds at most one batch: the
runtime's loop :meth:`~Stepper.submit`\\ s a collected batch, reads, frames and decodes the
next one meanwhile (the engine's numba kernels and its GEMMs release the GIL, so the two
run on two cores), then :meth:`~Stepper.take`\\ s the finished step, submits the next batch
and writes the taken batch's outputs itself while the next one steps. So:

* at most one batch steps, one is being collected and one has its outputs written (the
  bounded queue is the back-pressure: the loop does not submit batch N+1 before it took
  batch N);
* batches are stepped, and their outputs written, in the order they were collected; a
  batch's positions travel with it and reach the checkpoint only once its outputs are
  written, on the loop's thread, through the same guarded write path as without overlap;
* an exception of the step is kept and raised again by :meth:`~Stepper.take` on the thread
  that takes the result (the loop's), with the step's own traceback;
* :meth:`~Stepper.close` waits for a step in flight (its result is dropped: its batch's
  positions were never committed, so a restart reads that batch again) and ends the thread.

Only the step runs on the thread; the stepper never touches sources, sinks or checkpoints.

Examples
--------
>>> stepper = Stepper(lambda batch: sum(batch))
>>> stepper.submit([1, 2, 3])
>>> stepper.take().result
6
>>> stepper.close()
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from streamkm.exceptions import StateError
from streamkm.io.sources import AssignmentListener

__all__ = ["Stepper", "Stepped", "SettlingListener", "STEP_THREAD_NAME"]

#: Name of the thread the steps run on (thread dumps, ``py-spy``).
STEP_THREAD_NAME = "streamkm-step"

B = TypeVar("B")
R = TypeVar("R")


@dataclass
class Stepped(Generic[B, R]):
    """One finished step: the batch, what the step returned and how long it took."""

    batch: B
    result: R
    seconds: float


class Stepper(Generic[B, R]):
    """Runs ``step(batch)`` on one background thread, one batch at a time.

    Parameters
    ----------
    step : callable
        ``step(batch) -> result``; called on the stepper's thread only.
    name : str, default="streamkm-step"
        The thread's name.

    Notes
    -----
    :meth:`submit`, :meth:`take` and :meth:`close` are called by one thread at a time (the
    runtime's loop, or a rebalance callback while the loop waits in the source's poll);
    :attr:`busy`, :attr:`done` and :meth:`wait` may be asked from any
    thread.
    """

    def __init__(self, step: Callable[[B], R], *, name: str = STEP_THREAD_NAME) -> None:
        self._step = step
        self._cond = threading.Condition()
        self._batch: B | None = None
        self._pending = False  # a batch was submitted and not taken yet
        self._finished = False  # the pending batch's step has returned or raised
        self._result: R | None = None
        self._error: BaseException | None = None
        self._seconds = 0.0
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """A batch was submitted and its result not taken yet (stepping or finished)."""
        return self._pending

    @property
    def done(self) -> bool:
        """The submitted batch's step has finished (:meth:`take` will not block)."""
        return self._pending and self._finished

    def submit(self, batch: B) -> None:
        """Start stepping ``batch``.

        Raises
        ------
        StateError
            A batch is still pending (take it first), or the stepper is closed.
        """
        with self._cond:
            if self._closing:
                raise StateError("the stepper is closed: no batch can be submitted")
            if self._pending:
                raise StateError("a batch is still stepping: take its result before "
                                 "submitting the next one")
            self._batch, self._pending, self._finished = batch, True, False
            self._result, self._error = None, None
            self._cond.notify_all()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the pending step finished or ``timeout_s`` passed; ``True`` if it
        finished (``False`` also when nothing is pending)."""
        with self._cond:
            if not self._pending:
                return False
            return self._cond.wait_for(lambda: self._finished, timeout_s)

    def take(self) -> Stepped[B, R]:
        """Wait for the pending step and return it; the step's exception is raised here
        (the batch is then no longer pending).

        Raises
        ------
        StateError
            Nothing is pending.
        """
        with self._cond:
            if not self._pending:
                raise StateError("no batch is stepping: nothing to take")
            self._cond.wait_for(lambda: self._finished)
            batch, result, error = self._batch, self._result, self._error
            self._batch, self._result, self._error = None, None, None
            self._pending = False
        if error is not None:
            try:
                raise error
            finally:
                del error  # no reference cycle through the traceback
        return Stepped(batch=batch, result=result, seconds=self._seconds)  # type: ignore[arg-type]

    def discard(self) -> None:
        """Wait for a pending step and drop its result and any exception."""
        with self._cond:
            self._cond.wait_for(lambda: not self._pending or self._finished)
            self._batch, self._result, self._error = None, None, None
            self._pending = False

    def close(self) -> None:
        """Drop what is pending (after its step finished) and end the thread."""
        self.discard()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()

    def _serve(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closing or (self._pending
                                                              and not self._finished))
                if self._closing:
                    return
                batch = self._batch
            t0 = time.perf_counter()
            result: Any = None
            error: BaseException | None = None
            try:
                result = self._step(batch)  # type: ignore[arg-type]
            except BaseException as exc:  # noqa: BLE001 - raised again by take()
                error = exc
            with self._cond:
                self._result, self._error = result, error
                self._seconds = time.perf_counter() - t0
                self._finished = True
                self._cond.notify_all()
            del result, error


class SettlingListener:
    """A dynamic source's assignment listener that finishes the batch in flight first.

    A learner rebuilds the partitions that stay from the positions of the last written
    batch and checkpoints on revocation; a batch still stepping would be read again (its
    positions not yet committed) and its model update checkpointed without its outputs. So
    each callback first calls ``settle()``, which waits for that step and writes its
    outputs (the revocation *finishes* the step, it never discards it), then hands the
    change to ``listener``. When the step or its outputs failed, ``settle()`` returns
    ``False`` and the listener is not told: nothing is checkpointed or committed, and the
    error is raised on the loop's thread once the source's poll returns.

    Parameters
    ----------
    listener : AssignmentListener
        The learner.
    settle : callable
        Finishes the batch in flight, if any; ``False`` if that failed.
    """

    def __init__(self, listener: AssignmentListener, settle: Callable[[], bool]) -> None:
        self.listener = listener
        self._settle = settle

    def on_assigned(self, part_keys: list[str]) -> None:
        """Partitions were added: finish the batch in flight, then tell the learner."""
        if self._settle():
            self.listener.on_assigned(part_keys)

    def on_revoked(self, part_keys: list[str], *, lost: bool) -> None:
        """Partitions are taken away: finish the batch in flight, then tell the learner
        (which checkpoints and commits before they go)."""
        if self._settle():
            self.listener.on_revoked(part_keys, lost=lost)
