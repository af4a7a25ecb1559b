"""The source protocol: where raw records come from and how a reader resumes.

A *source* (a Kafka topic, a set of tailed files) is a factory of *partitions*
(bytewax's model). Each partition hands out framed records in order and can describe,
as a JSON-able *snapshot*, the position just after the last record it handed out. The
service stores the snapshots of all partitions inside its checkpoint, together with the
model that has seen exactly those records. After a crash it rebuilds every partition
from its saved snapshot only (never from live objects), and the partition continues with
the record right after the checkpoint: no record is lost and none is seen twice.

The contract every implementation keeps:

* :meth:`SourcePartition.next_batch` never blocks for long (it returns ``[]`` when
  nothing new is available) and never returns more than ``max_records`` records.
* :meth:`SourcePartition.snapshot` reflects exactly the records handed out so far.
  Bytes read ahead but not yet returned are *not* part of it, so a partition rebuilt
  from the snapshot reads them again.
* :meth:`Source.build_part` with ``resume_state=None`` starts fresh (where "fresh" is a
  source option, e.g. the beginning or the end of the input); with a snapshot it resumes
  exactly after the last record of that snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["RawRecord", "SourcePartition", "Source", "AssignmentListener", "DynamicSource",
           "ReportsReadiness", "OVERSIZED", "TRUNCATED", "UNDECODABLE_RECORD", "ERROR_PREFIX_BYTES", "RELEASED",
           "LAG_BYTES", "LAG_RECORDS"]

#: ``RawRecord.error`` of a record longer than the source's size limit; ``value`` then
#: holds only a prefix of at most :data:`ERROR_PREFIX_BYTES` bytes.
OVERSIZED = "oversized"
#: ``RawRecord.error`` of a record the transport's client library could not parse (a Kafka
#: header key that is not UTF-8, a record batch failing its CRC): ``value`` is empty, the
#: client's error is in ``RawRecord.detail``, the position says where the record is.
UNDECODABLE_RECORD = "undecodable_record"
#: ``RawRecord.error`` of an incomplete last record of a file that will never be completed
#: (the file was rotated away or deleted while its last line had no newline yet).
TRUNCATED = "truncated"
#: Largest ``value`` a record with an ``error`` carries.
ERROR_PREFIX_BYTES = 1024
#: Key the service adds (value ``True``) to the snapshot of a partition it gave up (see
#: :class:`DynamicSource`).
RELEASED = "released"
#: :attr:`SourcePartition.lag_unit` of a partition whose lag counts bytes (files).
LAG_BYTES = "bytes"
#: :attr:`SourcePartition.lag_unit` of a partition whose lag counts records (Kafka messages).
LAG_RECORDS = "records"


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One framed record as delivered by a source, before decoding.

    Attributes
    ----------
    value : bytes
        The record: a line without its newline, or one fixed-size binary record, or a
        Kafka message value. When ``error`` is set it holds only a prefix of at most
        1 KiB, for the dead-letter sink.
    key : str or None
        Transport key if the transport has one (the Kafka message key); ``None`` for files.
    position : dict
        JSON-able description of where the record came from, e.g.
        ``{"partition": "logs/*.jsonl", "file": "logs/a.jsonl", "offset": 1234}`` (byte
        offset of the record's first byte) or ``{"partition": 3, "offset": 99}`` (Kafka).
        Used to derive ids and to report bad records.
    error : str or None
        A framing-level problem found by the source: ``"oversized"`` (the record exceeded
        the size limit and was skipped), ``"truncated"`` (an incomplete last record of a
        file that was rotated away) or ``"undecodable_record"`` (the client library could
        not parse it). ``None`` if the record is fine.
    replayed : bool
        The record's outputs were already committed by an earlier run (transactional
        outputs committed right before a crash kept the checkpoint from being written): the
        model learns it again, but no sink writes anything for it.
    detail : str or None
        The source's description of the problem named by ``error`` (the client library's
        parse error of an ``undecodable_record``), for the dead-letter sink.
    """

    value: bytes
    key: str | None
    position: dict[str, Any]
    error: str | None = None
    replayed: bool = False
    detail: str | None = None


@runtime_checkable
class SourcePartition(Protocol):
    """One independently readable, independently resumable part of a source.

    ``lag_unit`` says what :meth:`lag` counts: :data:`LAG_BYTES` or :data:`LAG_RECORDS`
    (the service exports it as ``streamkm_source_lag_bytes`` or
    ``streamkm_source_lag_records``).
    """

    lag_unit: str

    def next_batch(self, max_records: int) -> list[RawRecord]:
        """Return up to ``max_records`` new records, in order; ``[]`` if none are ready.

        Never blocks for long and never returns more than ``max_records`` records.
        """
        ...

    def snapshot(self) -> dict[str, Any]:
        """JSON-able resume state: the position just after the last record returned.

        Passing it to :meth:`Source.build_part` gives a partition that continues exactly
        with the next record (no loss, no duplicate).
        """
        ...

    def lag(self) -> float | None:
        """How far behind the end of the input the partition is, in :attr:`lag_unit`
        (bytes for files, messages for Kafka), or ``None`` if unknown."""
        ...

    def close(self) -> None:
        """Release file handles / connections. The partition is unusable afterwards."""
        ...


@runtime_checkable
class Source(Protocol):
    """A factory of partitions."""

    def list_parts(self) -> list[str]:
        """The partition keys, stable across restarts of the same configuration."""
        ...

    def build_part(self, part_key: str, resume_state: dict[str, Any] | None) -> SourcePartition:
        """Build partition ``part_key``, resuming from ``resume_state`` (a value previously
        returned by :meth:`SourcePartition.snapshot`) or starting fresh if ``None``."""
        ...


@runtime_checkable
class ReportsReadiness(Protocol):
    """A source that can tell whether it is able to deliver input now (optional).

    The service's ``/readyz`` asks it; a source without this method is ready once its
    partitions are open (files: their positions are known).
    """

    def readiness(self) -> tuple[bool, str]:
        """``(True, detail)`` while input can be read (e.g. a Kafka consumer connected to
        its broker and in its group), else ``(False, why)``. Never blocks, never raises."""
        ...


@runtime_checkable
class AssignmentListener(Protocol):
    """What a :class:`DynamicSource` tells the service about its changing partitions.

    Both hooks are called only from inside :meth:`DynamicSource.poll` (or not at all). The
    service finishes a batch still being stepped (its outputs written) before it hands a
    change on, so they never run concurrently with a batch being processed.
    """

    def on_assigned(self, part_keys: list[str]) -> None:
        """Partitions ``part_keys`` are now this process's: build them with
        :meth:`Source.build_part` from their last checkpointed snapshot."""
        ...

    def on_revoked(self, part_keys: list[str], *, lost: bool) -> None:
        """Partitions ``part_keys`` are being taken away. Drop the batch in progress, write a
        checkpoint and (unless ``lost``, i.e. ownership is already gone) commit it with
        :meth:`DynamicSource.commit` before returning."""
        ...


@runtime_checkable
class DynamicSource(Source, Protocol):
    """A source whose partitions are assigned and revoked at run time (a consumer group).

    :meth:`Source.list_parts` returns the partitions assigned right now. The service calls
    :meth:`start` once, then :meth:`poll` whenever it waits for input and between batches;
    assignment changes reach it through the :class:`AssignmentListener` during ``poll``.

    When a partition is revoked the service keeps its last processed snapshot with
    ``snapshot[RELEASED] = True`` (also in checkpoints). When the partition comes back,
    :meth:`Source.build_part` receives that marked snapshot and may prefer progress another
    consumer made meanwhile (for Kafka: the larger of the checkpointed and the committed
    offset); an unmarked snapshot is resumed exactly (crash recovery).
    """

    def start(self, listener: AssignmentListener) -> None:
        """Begin (joining the group happens during later :meth:`poll` calls)."""
        ...

    def poll(self, timeout_s: float) -> int | None:
        """Fetch input into the partitions and run the assignment protocol; block at most
        ``timeout_s`` seconds. Never raises for transport problems (they are retried).
        Returns how many records were fetched into the partitions (``None``: not known);
        while a batch steps the service polls with ``timeout_s = 0`` and waits for the step
        instead when nothing came."""
        ...

    def commit(self, positions: dict[str, dict[str, Any]]) -> None:
        """Tell the transport how far the service has durably checkpointed (snapshots by
        partition key); only partitions assigned right now are committed."""
        ...

    def close(self) -> None:
        """Commit what was last passed to :meth:`commit`, leave the group, release."""
        ...
