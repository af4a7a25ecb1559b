"""The sink protocol: where assignments, lifecycle events and dead letters go.

A sink receives JSON-able entries in order. Its :meth:`Sink.position` describes how much
it has durably written so far; the service calls :meth:`Sink.sync` (make everything
written durable) right before a checkpoint and stores the returned position inside the
checkpoint. After a crash, :meth:`Sink.restore` brings the sink back to that position
(a file sink truncates itself to the checkpointed length), so with the source positions
in the same checkpoint a file sink holds every entry exactly once. Sinks that cannot take
back what they wrote (Kafka) ignore ``restore``: their entries are at-least-once, keyed so
that the last entry per key is exact (docs/service.md).

Sinks may instead share an :class:`OutputTransaction` (exactly-once Kafka outputs): before
every checkpoint the runtime commits the outputs written since the previous one together
with the source positions, atomically, and only then writes the checkpoint. A crash between
the two leaves the committed positions ahead of the checkpoint; the source marks the records
in between ``replayed`` and :class:`SinkSet` writes nothing for them while the restored
model learns them again.

Two kinds of write errors are told apart (:class:`SinkSet` does it for every sink):

* **device-level**: an ``OSError`` from the operating system (disk full, quota, read-only
  file system, I/O error), raised by ``write_*``, :meth:`Sink.flush` or :meth:`Sink.sync`.
  :class:`SinkSet` raises it as :class:`~streamkm.exceptions.StorageError` naming the sink;
  the runtime pauses and retries the batch's output whole, after :meth:`SinkSet.rollback`
  has taken back what the failed attempt wrote (sinks with a ``rollback`` method).
* **record-level**: a ``ValueError`` / ``TypeError`` / ``OverflowError`` (e.g.
  :class:`~streamkm.exceptions.OutputRecordError`) from a ``write_*`` call: that entry cannot
  be written whatever the device. An assignment that fails so is dead-lettered with reason
  ``output_error`` and the error as detail; an event is dropped (logged). Never retried.
  The batch is then written again row by row after a ``rollback``: a sink without
  ``rollback`` should serialise a whole call before it queues anything, so that a
  record-level error leaves nothing of the call behind.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from streamkm.exceptions import StorageError, StreamkmError
from streamkm.io.assignment_novelty import AssignmentNovelty, accepts_novelty
from streamkm.io.rejection import RejectReason, Rejection, safe_text
from streamkm.io.sources import RawRecord
from streamkm.logs import log_event

__all__ = ["Sink", "AssignmentSink", "RecordAssignmentSink", "EventSink", "DeadLetterSink",
           "ModelSink", "OutputTransaction", "SinkSet", "RECORD_ERRORS", "AssignmentNovelty"]

_log = logging.getLogger("streamkm.sinks")

#: Exceptions of a ``write_*`` call that are the entry's fault, not the device's.
RECORD_ERRORS: tuple[type[Exception], ...] = (ValueError, TypeError, OverflowError)


@contextmanager
def _device_errors(target: str) -> Iterator[None]:
    """Raise an operating-system error as :class:`StorageError` naming ``target``."""
    try:
        yield
    except StreamkmError:
        raise
    except OSError as exc:
        raise StorageError(target, exc) from exc


def _error_text(exc: BaseException) -> str:
    return safe_text(f"{type(exc).__name__}: {exc}")[:300]


@runtime_checkable
class Sink(Protocol):
    """Ordered output with a checkpointable position."""

    def sync(self) -> dict[str, Any]:
        """Flush and make durable everything written; return the JSON-able position."""
        ...

    def position(self) -> dict[str, Any]:
        """The position after the last entry written (not necessarily durable yet)."""
        ...

    def restore(self, position: dict[str, Any] | None) -> None:
        """Return to ``position`` (taken from a checkpoint), dropping later entries where
        the medium allows; ``None`` means "keep what is there" (first start)."""
        ...

    def flush(self) -> None:
        """Hand buffered entries to the medium (visible to readers, not yet durable)."""
        ...

    def close(self) -> None:
        """Flush and release resources."""
        ...


@runtime_checkable
class AssignmentSink(Sink, Protocol):
    """Receives one assignment per accepted record."""

    def write_assignments(self, ids: list[Any], clusters: Any, sq_distances: Any,
                          step: int) -> None:
        """Write ``(id, cluster, squared distance, model step)`` for every row of a batch.

        ``clusters`` (int) and ``sq_distances`` (float) are 1-D arrays aligned with ``ids``.
        A sink that also writes the novelty fields declares a keyword parameter
        ``novelty: AssignmentNovelty | None = None``; :class:`SinkSet` passes it whenever
        the model scored the batch.
        """
        ...


@runtime_checkable
class RecordAssignmentSink(AssignmentSink, Protocol):
    """An assignment sink that also wants each record's transport key and headers (Kafka).

    The service calls :meth:`write_record_assignments` instead of ``write_assignments``.
    """

    def write_record_assignments(self, records: list[Any], ids: list[Any], clusters: Any,
                                 sq_distances: Any, step: int) -> None:
        """Like :meth:`AssignmentSink.write_assignments`, with the accepted
        :class:`~streamkm.io.sources.RawRecord` of every row (aligned with ``ids``)."""
        ...


@runtime_checkable
class EventSink(Sink, Protocol):
    """Receives model lifecycle events (``converged``, ``woke``; later ``split``, ``merge``)."""

    def write_event(self, event: dict[str, Any]) -> None:
        """Write one event (a JSON-able dict with at least ``"event"`` and ``"step"``)."""
        ...


@runtime_checkable
class DeadLetterSink(Sink, Protocol):
    """Receives records rejected by the decoder, never seen by the model."""

    def write_dead_letter(self, raw: bytes, reason: str, detail: str,
                          position: dict[str, Any]) -> None:
        """Quarantine one raw record with why it was rejected and where it came from."""
        ...


@runtime_checkable
class ModelSink(Protocol):
    """Receives the current model in the estimator's own save format (``[sinks] model``).

    It keeps no position in checkpoints: each publication replaces the previous one (the
    newest model is what an application wants); :meth:`sync` (before every checkpoint)
    waits until what was published is durable.
    """

    def publish(self, data: bytes, version: int) -> None:
        """Publish one model: ``data`` is the ``.npz`` that ``save`` writes, ``version``
        its step."""
        ...

    def flush(self) -> None:
        """Hand what was published to the medium."""
        ...

    def sync(self) -> dict[str, Any]:
        """Make what was published durable (raises ``SinkError``/``OSError`` otherwise)."""
        ...

    def close(self) -> None:
        """Deliver what is pending if possible and release resources."""
        ...


@runtime_checkable
class OutputTransaction(Protocol):
    """The unit of work shared by transactional sinks."""

    def commit(self, positions: dict[str, dict[str, Any]], source: Any) -> None:
        """Make every entry written since the last commit visible together with the source
        ``positions`` (what ``source`` read up to), all or nothing.

        Raises
        ------
        SinkError
            Nothing was committed and nothing is lost (e.g. no broker yet): retried.
        OutputTransactionError
            The entries since the last commit are lost (fenced, refused): the process must
            restart from its last checkpoint.
        """
        ...

    def check(self, source: Any) -> None:
        """Called between batches: make sure, cheaply and at most every few seconds, that
        a commit is still possible while none comes (an idle process learns that it was
        fenced without waiting for input).

        Raises
        ------
        OutputTransactionError
            No commit is possible any more: the process must restart from its last
            checkpoint.
        """
        ...


@functools.lru_cache(maxsize=64)
def _assignment_call(sink_type: type) -> tuple[bool, bool]:
    """How an assignment sink of ``sink_type`` is written: whether it takes the input
    records (a :class:`RecordAssignmentSink`) and whether its write method takes the
    ``novelty`` keyword. Decided once per sink class: the protocol check and the signature
    inspection cost more than encoding a small batch."""
    takes_records = callable(getattr(sink_type, "write_record_assignments", None))
    method = (sink_type.write_record_assignments if takes_records  # type: ignore[attr-defined]
              else sink_type.write_assignments)  # type: ignore[attr-defined]
    return takes_records, accepts_novelty(method)


@dataclass
class SinkSet:
    """The three sinks of a process (assignments and events may be disabled), the optional
    model sink, and the one place that dispatches entries to them.

    A sinks factory (see :mod:`streamkm.io.registry`) returns one. Records marked
    ``replayed`` by their source get no assignment and no dead letter, and a batch made only
    of them no events (their outputs were committed before).
    """

    assignments: AssignmentSink | None
    events: EventSink | None
    dead_letter: DeadLetterSink
    #: The model sink (``[sinks] model``), outside :meth:`named`: it has no position.
    model: ModelSink | None = None
    transaction: OutputTransaction | None = None
    _replaying: bool = field(default=False, init=False, repr=False)

    def named(self) -> dict[str, Sink]:
        """The enabled sinks by name (the keys of ``sink_positions`` in checkpoints)."""
        sinks: dict[str, Sink | None] = {"assignments": self.assignments,
                                         "events": self.events,
                                         "dead_letter": self.dead_letter}
        return {name: sink for name, sink in sinks.items() if sink is not None}

    def positions(self) -> dict[str, dict[str, Any]]:
        """Every sink's current position by name (marks for :meth:`rollback`)."""
        return {name: sink.position() for name, sink in self.named().items()}

    def rollback(self, marks: dict[str, dict[str, Any]]) -> None:
        """Take back what every sink that can (a ``rollback`` method) wrote since ``marks``.

        Raises
        ------
        StorageError
            A file could not be truncated.
        """
        for name, sink in self.named().items():
            rollback = getattr(sink, "rollback", None)
            if rollback is not None and name in marks:
                with _device_errors(name):
                    rollback(marks[name])

    def write_assignments(self, records: list[Any], ids: list[Any], clusters: Any,
                          sq_distances: Any, step: int,
                          novelty: AssignmentNovelty | None = None) -> list[Rejection]:
        """One assignment per accepted record (with its raw record for sinks that want it,
        and the rows' novelty fields for sinks that take them).

        Returns the records whose assignment failed with a record-level error, as
        ``output_error`` rejections for the dead-letter sink (the others are written).

        Raises
        ------
        StorageError
            The device refused the write.
        """
        from streamkm.io.blocks import any_replayed  # numpy: not for the light config commands

        sink = self.assignments
        if sink is not None and any_replayed(records):
            keep = [i for i, record in enumerate(records) if not record.replayed]
            records, ids = [records[i] for i in keep], [ids[i] for i in keep]
            clusters, sq_distances = clusters[keep], sq_distances[keep]
            novelty = None if novelty is None else novelty.take(keep)
        if sink is None or not len(ids):
            return []
        mark = sink.position()
        try:
            self._assign(sink, records, ids, clusters, sq_distances, step, novelty)
            return []
        except RECORD_ERRORS:
            pass
        # Second line of defence: take the batch back, then one row at a time.
        self.rollback({"assignments": mark})
        failed = []
        for i in range(len(ids)):
            row = slice(i, i + 1)
            mark = sink.position()
            try:
                self._assign(sink, records[row], ids[row], clusters[row], sq_distances[row],
                             step, None if novelty is None else novelty.take(row))
            except RECORD_ERRORS as exc:
                self.rollback({"assignments": mark})
                record = (records[i] if i < len(records) else
                          RawRecord(b"", None, {"id": safe_text(repr(ids[i]))[:300]}))
                failed.append(Rejection(RejectReason.OUTPUT_ERROR,
                                        f"assignment not writable: {_error_text(exc)}",
                                        record))
        return failed

    @staticmethod
    def _assign(sink: AssignmentSink, records: list[Any], ids: list[Any], clusters: Any,
                sq_distances: Any, step: int, novelty: AssignmentNovelty | None) -> None:
        with _device_errors("assignments"):
            takes_records, takes_novelty = _assignment_call(type(sink))
            if takes_records:
                write: Any = sink.write_record_assignments  # type: ignore[attr-defined]
                args: tuple[Any, ...] = (records, ids, clusters, sq_distances, step)
            else:
                write, args = sink.write_assignments, (ids, clusters, sq_distances, step)
            if novelty is not None and takes_novelty:
                write(*args, novelty=novelty)
            else:
                write(*args)

    def write_event(self, event: dict[str, Any]) -> None:
        """One lifecycle event (dropped when the events sink is disabled, or, logged, when
        the sink cannot serialise it)."""
        if self.events is None or self._replaying:
            return
        try:
            with _device_errors("events"):
                self.events.write_event(event)
        except RECORD_ERRORS as exc:
            log_event(_log, "error", "event_unwritable", event=safe_text(str(event.get("event"))),
                      error=_error_text(exc))

    def write_dead_letters(self, rejections: Iterable[Rejection]) -> dict[str, int]:
        """Quarantine every rejected record; returns how many were written by reason.

        An entry the sink cannot serialise is written again with its position as text and
        the error appended to the detail.
        """
        tally: Counter[str] = Counter()
        for rejection in rejections:
            reason = rejection.reason.value
            record = rejection.record
            if record.replayed:  # written before the crash that replays it
                tally[reason] += 1
                continue
            try:
                self._dead_letter(record.value, reason, rejection.detail, record.position)
            except RECORD_ERRORS as exc:
                try:
                    self._dead_letter(bytes(record.value), reason,
                                      f"{safe_text(str(rejection.detail))} (entry not "
                                      f"writable as is: {_error_text(exc)})",
                                      {"text": safe_text(repr(record.position))[:300]})
                except RECORD_ERRORS as again:
                    log_event(_log, "error", "dead_letter_unwritable", reason=reason,
                              error=_error_text(again))
                    continue
            tally[reason] += 1
        return dict(tally)

    def begin_batch(self, records: list[Any], rejections: Iterable[Any]) -> None:
        """The entries that follow belong to the batch of ``records`` and ``rejections``
        (its events are dropped if every one of them is replayed)."""
        from streamkm.io.blocks import all_replayed  # numpy: not for the light config commands

        refused = [rejection.record for rejection in rejections]
        if len(records):
            self._replaying = all_replayed(records) and all(r.replayed for r in refused)
        else:
            self._replaying = bool(refused) and all(r.replayed for r in refused)

    def commit(self, positions: dict[str, dict[str, Any]], source: Any) -> None:
        """Commit the outputs written so far with the source ``positions`` (transactional
        sinks; nothing to do otherwise). See :meth:`OutputTransaction.commit`."""
        if self.transaction is not None:
            self.transaction.commit(positions, source)

    def check_transaction(self, source: Any) -> None:
        """Between batches: let the transaction check that it can still commit (see
        :meth:`OutputTransaction.check`; nothing to do without one)."""
        if self.transaction is not None:
            self.transaction.check(source)

    def _dead_letter(self, raw: bytes, reason: str, detail: str,
                     position: dict[str, Any]) -> None:
        with _device_errors("dead_letter"):
            self.dead_letter.write_dead_letter(raw, reason, detail, position)

    def flush(self) -> None:
        """Hand every sink's buffered entries to its medium.

        Raises
        ------
        StorageError
            The device refused the write.
        """
        for name, sink in self.named().items():
            with _device_errors(name):
                sink.flush()

    def await_delivery(self) -> None:
        """Wait until every entry flushed so far survives a crash of this process: sinks
        with an ``await_delivery`` method (Kafka: the broker's acknowledgements) are asked;
        for the others a flush is enough (a file sink's entries are in the operating system).

        Raises
        ------
        SinkError
            Some entries are not acknowledged (they stay queued and are sent again).
        StorageError
            The device refused the write.
        """
        for name, sink in self.named().items():
            await_delivery = getattr(sink, "await_delivery", None)
            if await_delivery is not None:
                with _device_errors(name):
                    await_delivery()

    def delivery_mark(self) -> dict[str, Any]:
        """A mark after every entry written so far, for :meth:`delivered` (sinks with a
        ``delivery_mark`` method; the others deliver on :meth:`flush`)."""
        return {name: sink.delivery_mark() for name, sink in self.named().items()
                if hasattr(sink, "delivery_mark")}

    def delivered(self, mark: dict[str, Any]) -> bool:
        """Whether every entry written before ``mark`` (:meth:`delivery_mark`) and flushed
        survives a crash of this process, without waiting (Kafka: acknowledged)."""
        named = self.named()
        return all(named[name].delivered(value)  # type: ignore[attr-defined]
                   for name, value in mark.items() if name in named)

    def sync(self) -> dict[str, dict[str, Any]]:
        """Make every sink durable; their positions by name (for a checkpoint).

        Raises
        ------
        StorageError
            The device refused the write or the fsync.
        """
        if self.model is not None:  # no position; a Kafka model sink waits for its acks
            self.model.sync()
        positions = {}
        for name, sink in self.named().items():
            with _device_errors(name):
                positions[name] = sink.sync()
        return positions

    def close(self) -> None:
        """Close every sink."""
        for sink in self.named().values():
            sink.close()
        if self.model is not None:
            self.model.close()
