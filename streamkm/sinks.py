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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Sink", "AssignmentSink", "RecordAssignmentSink", "EventSink", "DeadLetterSink",
           "OutputTransaction", "SinkSet"]


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
        :class:`~streamkm.sources.RawRecord` of every row (aligned with ``ids``)."""
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


@dataclass
class SinkSet:
    """The three sinks of a process (assignments and events may be disabled) and the one
    place that dispatches entries to them.

    A sinks factory (see :mod:`streamkm.registry`) returns one. Records marked
    ``replayed`` by their source get no assignment and no dead letter, and a batch made only
    of them no events (their outputs were committed before).
    """

    assignments: AssignmentSink | None
    events: EventSink | None
    dead_letter: DeadLetterSink
    transaction: OutputTransaction | None = None
    _replaying: bool = field(default=False, init=False, repr=False)

    def named(self) -> dict[str, Sink]:
        """The enabled sinks by name (the keys of ``sink_positions`` in checkpoints)."""
        sinks: dict[str, Sink | None] = {"assignments": self.assignments,
                                         "events": self.events,
                                         "dead_letter": self.dead_letter}
        return {name: sink for name, sink in sinks.items() if sink is not None}

    def write_assignments(self, records: list[Any], ids: list[Any], clusters: Any,
                          sq_distances: Any, step: int) -> None:
        """One assignment per accepted record (with its raw record for sinks that want it)."""
        sink = self.assignments
        if sink is not None and any(record.replayed for record in records):
            keep = [i for i, record in enumerate(records) if not record.replayed]
            records, ids = [records[i] for i in keep], [ids[i] for i in keep]
            clusters, sq_distances = clusters[keep], sq_distances[keep]
        if isinstance(sink, RecordAssignmentSink):
            sink.write_record_assignments(records, ids, clusters, sq_distances, step)
        elif sink is not None:
            sink.write_assignments(ids, clusters, sq_distances, step)

    def write_event(self, event: dict[str, Any]) -> None:
        """One lifecycle event (dropped when the events sink is disabled or the batch is
        replayed)."""
        if self.events is not None and not self._replaying:
            self.events.write_event(event)

    def write_dead_letters(self, rejections: Iterable[Any]) -> dict[str, int]:
        """Quarantine every rejected record (a :class:`~streamkm.decoding.Rejection`);
        returns how many were written by reason."""
        tally: Counter[str] = Counter()
        for rejection in rejections:
            reason = rejection.reason.value
            record = rejection.record
            if not record.replayed:
                self.dead_letter.write_dead_letter(record.value, reason, rejection.detail,
                                                   record.position)
            tally[reason] += 1
        return dict(tally)

    def begin_batch(self, records: list[Any], rejections: Iterable[Any]) -> None:
        """The entries that follow belong to the batch of ``records`` and ``rejections``
        (its events are dropped if every one of them is replayed)."""
        everything = [*records, *(rejection.record for rejection in rejections)]
        self._replaying = bool(everything) and all(record.replayed for record in everything)

    def commit(self, positions: dict[str, dict[str, Any]], source: Any) -> None:
        """Commit the outputs written so far with the source ``positions`` (transactional
        sinks; nothing to do otherwise). See :meth:`OutputTransaction.commit`."""
        if self.transaction is not None:
            self.transaction.commit(positions, source)

    def flush(self) -> None:
        """Hand every sink's buffered entries to its medium."""
        for sink in self.named().values():
            sink.flush()

    def sync(self) -> dict[str, dict[str, Any]]:
        """Make every sink durable; their positions by name (for a checkpoint)."""
        return {name: sink.sync() for name, sink in self.named().items()}

    def close(self) -> None:
        """Close every sink."""
        for sink in self.named().values():
            sink.close()
