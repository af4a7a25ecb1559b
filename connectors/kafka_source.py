"""Kafka source: a kafka-python consumer group as a :class:`~streamkm.sources.DynamicSource`.

One :class:`KafkaSource` owns one ``KafkaConsumer`` (``enable_auto_commit=False``)
subscribed to ``topics`` or a ``pattern``. Every assigned topic-partition is a
:class:`KafkaPartition` keyed ``"<topic>:<partition>"`` whose snapshot is
``{"topic", "partition", "offset"}`` with ``offset`` the next offset to hand out.

Where a partition starts when it is assigned:

* an unmarked checkpointed snapshot (this process owned the partition when it
  checkpointed: crash recovery) is resumed exactly, whatever the broker's committed offset;
* a snapshot marked released (the partition moved to another consumer meanwhile) resumes
  at the larger of its offset and the group's committed offset, so records another
  consumer already processed are not processed again;
* without a snapshot: the committed offset, else ``auto_offset_reset``.

With transactional outputs (``replay_committed``) the offsets are committed inside the
output transaction *before* the checkpoint, so after a crash between the two the committed
offset can be ahead of an unmarked snapshot: the partition then resumes at the snapshot (the
restored model has not seen those records) and the records below the committed offset are
handed out ``replayed`` (their outputs exist; the sinks write nothing for them).

The positions in the checkpoint are the source of truth; offsets are committed to the
broker after each checkpoint (asynchronously, counted in
``streamkm_kafka_commits_total`` / ``streamkm_kafka_commit_failures_total``) for lag
tooling and for the consumers that take partitions over. A rebalance listener hands
revocations to the service before the partitions are given up, so the service checkpoints
and commits first; lost partitions (the member was evicted) are checkpointed but not
committed.

kafka-python runs rebalance listeners on its IO thread while the polling thread waits, and
forbids blocking client calls there; the listener therefore only seeks, and the one
blocking lookup (the committed offset of a released partition) happens right after ``poll``
returns. Until then the partition hands nothing out: what the consumer returns for it is
dropped, and the seek to the settled offset makes the consumer fetch it again from there.

The source never leaves a partition paused across a ``poll``: kafka-python sets aside the
fetched records of a paused partition and may never hand them back after the resume (its
in-line records slot is only refilled when empty, and a partition with records set aside is
not fetched again), so the partition would stall with nothing paused and nothing buffered.
A newly assigned partition is paused in the assignment callback and resumed there as soon as
the service built it, before the consumer hands out anything.

Each partition buffers what the consumer fetched until the service asks for it. A ``poll``
takes everything the consumer has fetched so far, across partitions, in one pass (repeated
non-blocking consumer polls of ``max_poll_records`` until one returns less), so the batcher
finds whole batches in the buffers instead of a shrinking series of small reads; every
consumer poll also sends the fetches for the partitions it emptied, which the broker answers
while the model steps. Backpressure pauses nothing either; the source bounds what it takes:
each ``poll`` asks the consumer for at most ``max_buffered_records`` minus the fullest
partition's buffer (at least one record, so the group protocol keeps running on every poll;
the service drains its buffers between polls). The consumer keeps what it did not hand out,
position included; it fetches a partition again only once its fetched records were taken, so
its own memory stays bounded by one fetch per partition and nothing is fetched twice.
Messages larger than ``max_record_bytes`` are handed out with ``error="oversized"`` (first
KiB kept) and end up in the dead-letter sink.

A record kafka-python cannot parse (a header key that is not UTF-8, a record batch failing
its CRC, a batch it cannot decompress) makes ``poll`` raise while it unpacks the fetched
bytes, and the fetcher would then turn the same dead record iterator for ever. The source
recognises that error by where it was raised (kafka-python's record unpacking, or
``CorruptRecordError``), takes the partition from the fetcher's in-line records and the
offset from the consumer's position (the record that failed: positions move only past
records handed out), hands that offset out with ``error="undecodable_record"`` and the
client's error as detail (dead-lettered like any bad record), and seeks one past it. A
corrupt batch of n records therefore gives n dead letters, one per offset, and never skips a
record that could be read. The partition keeps flowing and a restart never meets the record
again (its offset is in the checkpoint like any other).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from kafka import ConsumerRebalanceListener

from streamkm.exceptions import OutputTransactionError, ParameterError
from streamkm.logs import log_event
from streamkm.sources import (
    ERROR_PREFIX_BYTES,
    LAG_RECORDS,
    OVERSIZED,
    RELEASED,
    UNDECODABLE_RECORD,
    AssignmentListener,
)

from .kafka_common import (
    KafkaRecord,
    LazyKafkaClient,
    kafka_python_failure,
    part_key,
    silence_kafka_python_logs,
)

__all__ = ["KafkaSource", "KafkaPartition", "kafka_source_from_config",
           "THROUGHPUT_CONSUMER_SETTINGS", "make_record", "settle_start"]

_log = logging.getLogger("streamkm.kafka")
SNAPSHOT_VERSION = 1

#: Fetch settings the service's consumer starts from (``[kafka] consumer`` overrides them):
#: up to 4 MiB per partition and fetch, so one fetch holds a full default batch of large
#: records; the broker answers once it has 64 KiB or after 100 ms, so an idle topic costs
#: fewer round trips without delaying a batch noticeably; a 1 MiB socket receive buffer.
#: See docs/service.md (Kafka) and benchmarks/bench_pipeline.py for the measurement.
THROUGHPUT_CONSUMER_SETTINGS: dict[str, Any] = {
    "max_partition_fetch_bytes": 4 << 20,
    "fetch_min_bytes": 64 << 10,
    "fetch_max_wait_ms": 100,
    "receive_buffer_bytes": 1 << 20,
}


class KafkaPartition:
    """One assigned topic-partition: a buffer of fetched messages and the next offset.

    Built by :meth:`KafkaSource.build_part`; see the module docstring for where it starts.
    """

    #: :meth:`lag` counts messages.
    lag_unit = LAG_RECORDS

    def __init__(self, source: KafkaSource, tp: Any, resume_state: dict[str, Any] | None,
                 *, replay_committed: bool = False) -> None:
        self._source = source
        self.tp = tp
        self.key = part_key(tp.topic, tp.partition)
        self._buffer: deque[KafkaRecord] = deque()
        self._resume_state = dict(resume_state) if resume_state is not None else None
        offset = resume_state.get("offset") if resume_state is not None else None
        self.next_offset: int | None = int(offset) if offset is not None else None
        released = resume_state is not None and bool(resume_state.get(RELEASED))
        #: Resume exactly at the snapshot, records below the committed offset replayed.
        self.replays = replay_committed and not released
        #: Records below this offset are handed out ``replayed`` (see the module docstring).
        self.replay_until: int | None = None
        #: False until the start offset is settled (released partitions, and every
        #: partition with transactional outputs, look up the committed offset first);
        #: nothing is fetched or handed out before.
        self.resolved = not (offset is not None and (released or self.replays))
        self.closed = False

    # ------------------------------------------------------------------ SourcePartition

    def next_batch(self, max_records: int) -> list[KafkaRecord]:
        """Up to ``max_records`` buffered messages, in offset order."""
        if not self._buffer or max_records <= 0:
            return []
        n = min(max_records, len(self._buffer))
        out = [self._buffer.popleft() for _ in range(n)]
        self.next_offset = int(out[-1].position["offset"]) + 1
        return out

    def snapshot(self) -> dict[str, Any]:
        """``{"topic", "partition", "offset", "version"}``; ``offset`` is the next offset to
        hand out (``None`` until known). Before the start is settled: the resume state."""
        if not self.resolved and self._resume_state is not None:
            return dict(self._resume_state)
        return {"version": SNAPSHOT_VERSION, "topic": self.tp.topic,
                "partition": self.tp.partition, "offset": self.next_offset}

    def lag(self) -> float | None:
        """Messages between the next offset to hand out and the high watermark."""
        highwater = self._source.highwater(self.tp)
        if highwater is None or self.next_offset is None:
            return None
        return float(max(0, highwater - self.next_offset))

    def close(self) -> None:
        """Forget the buffer; the source stops tracking this object."""
        self.closed = True
        self._buffer.clear()
        self._source._forget(self)

    # ------------------------------------------------------------------ used by the source

    @property
    def buffered(self) -> int:
        """Messages fetched but not handed out yet."""
        return len(self._buffer)

    def settle(self, offset: int | None, replay_until: int | None = None) -> None:
        """The start offset is known (``None``: left to the consumer's own reset); records
        below ``replay_until`` are handed out ``replayed``."""
        self.next_offset = offset
        self.replay_until = replay_until
        self._buffer.clear()
        self.resolved = True

    @staticmethod
    def message_offset(msg: Any) -> int:
        """The offset of one message as the client returns it."""
        return int(msg.offset)

    @staticmethod
    def to_record(msg: Any, max_record_bytes: int, replayed: bool) -> KafkaRecord:
        """One message as the client returns it, as a :class:`KafkaRecord`."""
        return _to_record(msg, max_record_bytes, replayed)

    def accept(self, messages: list[Any], max_record_bytes: int) -> int:
        """Buffer fetched messages, skipping any before the next offset (refetches); the
        number buffered."""
        expected = self.next_offset
        if self._buffer:
            expected = int(self._buffer[-1].position["offset"]) + 1
        replay_until = self.replay_until
        offset_of, to_record, append = self.message_offset, self.to_record, self._buffer.append
        before = len(self._buffer)
        for msg in messages:
            offset = offset_of(msg)
            if expected is not None and offset < expected:
                continue
            expected = offset + 1
            append(to_record(msg, max_record_bytes,
                             replay_until is not None and offset < replay_until))
        return len(self._buffer) - before

    def accept_undecodable(self, offset: int, error: str) -> None:
        """Buffer the record at ``offset`` that the client could not parse, as an
        ``undecodable_record`` carrying ``error``."""
        replayed = self.replay_until is not None and offset < self.replay_until
        position = {"topic": self.tp.topic, "partition": self.tp.partition, "offset": offset}
        self._buffer.append(KafkaRecord(value=b"", key=None, position=position,
                                        error=UNDECODABLE_RECORD, replayed=replayed,
                                        detail=error))


def _to_record(msg: Any, max_record_bytes: int, replayed: bool = False) -> KafkaRecord:
    position = {"topic": msg.topic, "partition": msg.partition, "offset": msg.offset}
    return make_record(msg.value, msg.key, msg.headers, position, max_record_bytes, replayed)


def make_record(value: bytes | None, raw_key: bytes | None, raw_headers: Any,
                position: dict[str, Any], max_record_bytes: int,
                replayed: bool = False) -> KafkaRecord:
    """The :class:`KafkaRecord` of one message's parts (an ``oversized`` record, its first
    KiB kept, when the value is longer than ``max_record_bytes``)."""
    value = value if value is not None else b""
    key = raw_key.decode("utf-8", "replace") if raw_key is not None else None
    headers = (tuple((str(k), bytes(v) if v is not None else b"") for k, v in raw_headers)
               if raw_headers else ())
    error = None
    if len(value) > max_record_bytes:
        position["length"] = len(value)
        value, error = value[:ERROR_PREFIX_BYTES], OVERSIZED
    return KafkaRecord(value=value, key=key, position=position, error=error, raw_key=raw_key,
                       headers=headers, replayed=replayed)


class _RebalanceListener(ConsumerRebalanceListener):
    """Forwards kafka-python's rebalance callbacks to the source (IO thread)."""

    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    def on_partitions_revoked(self, revoked: Any) -> None:
        self._source._handle_revoked(revoked, lost=False)

    def on_partitions_lost(self, lost: Any) -> None:
        self._source._handle_revoked(lost, lost=True)

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._source._handle_assigned(assigned)


class KafkaSource:
    """A consumer group as a dynamic source of partitions.

    Parameters
    ----------
    topics : list of str, optional
        Topics to subscribe to (exactly one of ``topics`` and ``pattern``).
    pattern : str, optional
        Regular expression of topic names to subscribe to.
    consumer_settings : dict
        Keyword arguments for ``kafka.KafkaConsumer`` (bootstrap servers, group id,
        security, timeouts, ...). ``enable_auto_commit`` is always ``False``.
    max_record_bytes : int
        Larger message values become ``oversized`` records.
    max_buffered_records : int
        Most fetched records a partition buffers: a poll takes no more than the fullest
        buffer has room for (see the module docstring).
    commit_timeout_ms : int
        Timeout of the final synchronous commit at :meth:`close` and of the committed-offset
        lookup for released partitions.
    metrics : KafkaMetrics, optional
        Where lag, commits, rebalances and the connection state go.
    consumer_factory : callable, optional
        Creates the consumer from the settings (tests); ``kafka.KafkaConsumer`` by default.
    replay_committed : bool
        The offsets are committed inside output transactions (see the module docstring).
    """

    def __init__(self, *, topics: list[str] | None = None, pattern: str | None = None,
                 consumer_settings: dict[str, Any], max_record_bytes: int = 1 << 20,
                 max_buffered_records: int = 10000, commit_timeout_ms: int = 10000,
                 metrics: Any = None,
                 consumer_factory: Callable[..., Any] | None = None,
                 replay_committed: bool = False) -> None:
        if bool(topics) == (pattern is not None):
            raise ParameterError(f"set exactly one of topics ({topics!r}) and pattern "
                                 f"({pattern!r})")
        if not consumer_settings.get("group_id"):
            raise ParameterError(f"consumer_settings needs a group_id, got "
                                 f"{consumer_settings.get('group_id')!r}")
        for name, value in (("max_record_bytes", max_record_bytes),
                            ("max_buffered_records", max_buffered_records),
                            ("commit_timeout_ms", commit_timeout_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParameterError(f"{name} must be a positive int, got {value!r}")
        silence_kafka_python_logs()
        self.topics = list(topics or [])
        self.pattern = pattern
        self.settings = {**consumer_settings, "enable_auto_commit": False}
        self.group_id = str(consumer_settings["group_id"])
        #: Most records one consumer call returns (the consumer's ``max_poll_records``).
        self.max_poll_records = int(self.settings.get("max_poll_records", 500))
        self.max_record_bytes = max_record_bytes
        self.max_buffered_records = max_buffered_records
        self.commit_timeout_ms = commit_timeout_ms
        self.metrics = metrics
        self.replay_committed = replay_committed
        if consumer_factory is None:
            from kafka import KafkaConsumer

            consumer_factory = KafkaConsumer
        self._factory = consumer_factory
        backoff_ms = float(self.settings.get("reconnect_backoff_ms", 500))
        self._client: LazyKafkaClient[Any] = LazyKafkaClient(
            "consumer", self._create_consumer, backoff_s=max(backoff_ms, 100.0) / 1000.0,
            max_backoff_s=float(self.settings.get("reconnect_backoff_max_ms", 5000)) / 1000.0,
            on_connected_change=self._report_connected, classify=self.classify_failure)
        self._listener: AssignmentListener | None = None
        self._parts: dict[Any, KafkaPartition] = {}
        self._assigned: list[Any] = []
        self._losing = False
        self._in_group = False  # an assignment (possibly empty) came since the last loss
        self._last_commit: dict[Any, Any] = {}
        self._poll_error_logged = 0.0
        if metrics is not None:
            metrics.broker_connected.labels(client="consumer").set(0)

    # ------------------------------------------------------------------ client

    #: Which errors of creating the consumer are settings errors, which are retried.
    classify_failure = staticmethod(kafka_python_failure)

    def _create_consumer(self) -> Any:
        consumer = self._factory(**self.settings)
        try:
            if self.pattern is not None:
                consumer.subscribe(pattern=self.pattern, listener=_RebalanceListener(self))
            else:
                consumer.subscribe(self.topics, listener=_RebalanceListener(self))
        except Exception:
            consumer.close(autocommit=False)
            raise
        return consumer

    def _report_connected(self, connected: bool) -> None:
        if self.metrics is not None:
            self.metrics.broker_connected.labels(client="consumer").set(1 if connected else 0)

    def readiness(self) -> tuple[bool, str]:
        """Ready while the consumer holds a broker connection and has received its (possibly
        empty) partition assignment from the group (:class:`~streamkm.sources.ReportsReadiness`)."""
        group = self.group_id
        if self.consumer is None:
            return False, ("no Kafka consumer: the broker could not be reached yet "
                           "(kafka_connect_failed in the log)")
        if not self._client.connected:
            return False, "the Kafka consumer has no broker connection"
        if not self._in_group:
            return False, f"connected; waiting for a partition assignment in group {group!r}"
        parts = self.list_parts()
        return True, (f"connected; group {group!r} assigned {len(parts)} partition(s)"
                      + (f": {', '.join(parts)}" if parts else ""))

    @property
    def consumer(self) -> Any:
        """The kafka-python consumer (``None`` until it could be created)."""
        return self._client.client

    # ------------------------------------------------------------------ Source

    def list_parts(self) -> list[str]:
        """Keys of the partitions assigned right now."""
        return sorted(part_key(tp.topic, tp.partition) for tp in self._assigned)

    #: The partitions this source builds.
    partition_class: type[KafkaPartition] = KafkaPartition

    def _new_part(self, part_key_: str, resume_state: dict[str, Any] | None) -> KafkaPartition:
        """A new buffer for the assigned partition ``part_key_`` (replacing an older one).

        Raises
        ------
        ParameterError
            The partition is not assigned to this consumer.
        """
        from kafka import TopicPartition

        from .kafka_common import split_part_key

        topic, number = split_part_key(part_key_)
        tp = TopicPartition(topic, number)
        if self.consumer is None or tp not in set(self._assigned):
            raise ParameterError(f"Kafka partition {part_key_!r} is not assigned to this "
                                 f"consumer (assigned: {self.list_parts()!r})")
        old = self._parts.get(tp)
        if old is not None:
            old.closed = True
        part = self.partition_class(self, tp, resume_state,
                                    replay_committed=self.replay_committed)
        self._parts[tp] = part
        return part

    def build_part(self, part_key_: str, resume_state: dict[str, Any] | None) -> KafkaPartition:
        """The partition ``"<topic>:<partition>"`` (assigned to this consumer), starting as
        described in the module docstring."""
        part = self._new_part(part_key_, resume_state)
        tp, consumer = part.tp, self.consumer
        if part.resolved and part.next_offset is not None:
            consumer.seek(tp, part.next_offset)
        consumer.resume(tp)  # an unsettled partition drops what it gets until it is settled
        return part

    def _forget(self, part: KafkaPartition) -> None:
        if self._parts.get(part.tp) is part:
            del self._parts[part.tp]
            if self.metrics is not None:
                try:
                    self.metrics.consumer_lag_records.remove(part.tp.topic, str(part.tp.partition))
                except KeyError:
                    pass

    def highwater(self, tp: Any) -> int | None:
        """The last high watermark the broker reported for ``tp`` (``None`` if unknown)."""
        consumer = self.consumer
        if consumer is None:
            return None
        try:
            return consumer.highwater(tp)
        except Exception:  # noqa: BLE001 - not assigned any more
            return None

    # ------------------------------------------------------------------ DynamicSource

    def start(self, listener: AssignmentListener) -> None:
        """Remember the service's listener and try to create the consumer."""
        self._listener = listener
        self._client.get()

    def poll(self, timeout_s: float) -> int:
        """Fetch into the partition buffers and run the group protocol (rebalance hooks
        fire in here); at most about ``timeout_s`` seconds (``0``: only what has arrived,
        the fetches for the next records are sent and answered meanwhile). Transport errors
        are logged and retried, never raised. Returns the records buffered by this call."""
        consumer = self._client.get()
        if consumer is None:
            time.sleep(min(timeout_s, self._client.seconds_to_next_attempt()))
            return 0
        taken, limit, timeout_ms = 0, self._intake(), int(timeout_s * 1000)
        while True:  # everything fetched so far, across partitions, up to the buffers' room
            got, returned = self._poll_once(consumer, timeout_ms, limit)
            taken += got
            if returned < limit:
                break  # what the consumer had fetched is taken (or the poll failed)
            room = self._room()
            if room <= 0:
                break
            limit, timeout_ms = min(self.max_poll_records, room), 0
        self._client.probe("consumer-metrics")
        self._update_lag()
        return taken

    def _poll_once(self, consumer: Any, timeout_ms: int, limit: int) -> tuple[int, int]:
        """One ``consumer.poll`` of at most ``limit`` records into the partition buffers:
        ``(records buffered, records the consumer returned)`` (``(n, 0)`` after a failure)."""
        from kafka.errors import KafkaError

        taken = returned = 0
        try:
            fetched = consumer.poll(timeout_ms=timeout_ms, max_records=limit)
        except Exception as exc:
            fetched = {}
            if self._skip_undecodable(consumer, exc):
                taken = 1
            else:
                if not isinstance(exc, (KafkaError, OSError, ValueError)):
                    raise
                self._log_poll_error(exc)
                time.sleep(min(timeout_ms / 1000.0, 0.1))
        settled = self._settle_released(consumer)
        for tp, messages in fetched.items():
            returned += len(messages)
            part = self._parts.get(tp)
            if part is None or not part.resolved or part.closed or tp in settled:
                continue  # fetched before the start was settled: fetched again after the seek
            part.accept(messages, self.max_record_bytes)
            taken += len(messages)
        return taken, returned

    def commit(self, positions: dict[str, dict[str, Any]]) -> None:
        """Commit the offsets of ``positions`` for the partitions assigned right now
        (asynchronously; nothing during a loss of membership, nor with transactional outputs,
        whose transactions commit the offsets)."""
        if self._losing or not self._assigned or self.replay_committed:
            return
        offsets = self._offsets_to_commit(positions)
        if not offsets:
            return
        self._last_commit = offsets
        self._send_commit(offsets)

    def _send_commit(self, offsets: dict[Any, Any]) -> None:
        """Commit ``offsets`` (from :meth:`_offsets_to_commit`) asynchronously."""
        try:
            self.consumer.commit_async(offsets, callback=self._commit_done)
        except Exception as exc:  # noqa: BLE001 - commits are advisory; retried next checkpoint
            self._commit_done(offsets, exc)

    def transaction_offsets(self, positions: dict[str, dict[str, Any]]
                            ) -> tuple[dict[Any, Any], Any]:
        """The offsets of ``positions`` for the partitions assigned right now and the
        group's metadata, for ``send_offsets_to_transaction``.

        Raises
        ------
        OutputTransactionError
            The partitions are being lost (this member was evicted): another member may be
            processing them, so this transaction must not commit.
        """
        if self._losing:
            raise OutputTransactionError(
                f"partitions {sorted(part_key(tp.topic, tp.partition) for tp in self._assigned)}"
                f" were lost (evicted from group {self.group_id!r})")
        offsets = self._offsets_to_commit(positions) if self._assigned else {}
        group: Any = self.group_id
        consumer = self.consumer
        if consumer is not None and offsets:
            try:  # with the generation: a real Kafka refuses a stale member's offsets
                group = self._group_metadata(consumer)
            except Exception:  # noqa: BLE001 - no generation known: the bare group id
                pass
        return offsets, group

    @staticmethod
    def _group_metadata(consumer: Any) -> Any:
        """The consumer's group metadata for ``send_offsets_to_transaction``."""
        return consumer.group_metadata()

    def close(self) -> None:
        """Commit the last checkpointed offsets synchronously, leave the group, close."""
        self._listener = None  # kafka-python revokes on close; the service has finished
        consumer = self.consumer
        if consumer is None:
            return
        assigned = set(self._assigned)
        final = {tp: om for tp, om in self._last_commit.items() if tp in assigned}
        if final and not self._losing:
            self._commit_and_wait(final)
        try:
            self._close_consumer(consumer)
        except Exception as exc:  # noqa: BLE001
            log_event(_log, "warning", "kafka_close_failed", error=repr(exc))
        self._client.client = None
        self._in_group = False
        self._assigned = []
        self._parts.clear()

    # ------------------------------------------------------------------ internals

    def _commit_and_wait(self, offsets: dict[Any, Any]) -> None:
        """Commit ``offsets`` synchronously (the last commit, at :meth:`close`)."""
        try:
            self.consumer.commit(offsets, timeout_ms=self.commit_timeout_ms)
            self._commit_done(offsets, None)
        except Exception as exc:  # noqa: BLE001
            self._commit_done(offsets, exc)

    def _close_consumer(self, consumer: Any) -> None:
        """Leave the group and close the consumer."""
        consumer.close(autocommit=False, timeout_ms=self.commit_timeout_ms)

    def _next_offsets(self, positions: dict[str, dict[str, Any]]) -> dict[Any, int]:
        """The next offset of every assigned partition with one in ``positions``."""
        offsets = {}
        for tp in self._assigned:
            snapshot = positions.get(part_key(tp.topic, tp.partition))
            if snapshot is not None and snapshot.get("offset") is not None:
                offsets[tp] = int(snapshot["offset"])
        return offsets

    def _offsets_to_commit(self, positions: dict[str, dict[str, Any]]) -> dict[Any, Any]:
        from kafka.structs import OffsetAndMetadata

        return {tp: OffsetAndMetadata(offset, "", -1)
                for tp, offset in self._next_offsets(positions).items()}

    def _commit_done(self, offsets: Any, result: Any) -> None:
        if isinstance(result, BaseException):
            if self.metrics is not None:
                self.metrics.commit_failures.inc()
            log_event(_log, "warning", "kafka_commit_failed", error=repr(result),
                      partitions=sorted(part_key(tp.topic, tp.partition) for tp in offsets))
        elif self.metrics is not None:
            self.metrics.commits.inc()

    def _handle_revoked(self, tps: Any, *, lost: bool) -> None:
        keys = sorted(part_key(tp.topic, tp.partition) for tp in tps)
        self._losing = lost
        if lost:
            self._in_group = False
        try:
            if self._listener is not None and keys:
                self._listener.on_revoked(keys, lost=lost)
        finally:
            self._losing = False
            gone = set(tps)
            self._assigned = [tp for tp in self._assigned if tp not in gone]
            for tp in gone:
                part = self._parts.pop(tp, None)
                if part is not None:
                    part.closed = True

    def _note_assigned(self, tps: list[Any]) -> None:
        """Record an assignment: in the group, ``tps`` assigned, one rebalance counted."""
        self._in_group = True
        known = set(self._assigned)
        self._assigned.extend(tp for tp in tps if tp not in known)
        if self.metrics is not None:
            self.metrics.rebalances.inc()

    def _tell_assigned(self, tps: list[Any]) -> None:
        """Hand the assigned partitions to the service (which builds them)."""
        if self._listener is not None and tps:
            self._listener.on_assigned([part_key(tp.topic, tp.partition) for tp in tps])

    def _handle_assigned(self, tps: Any) -> None:
        tps = sorted(tps)
        self._note_assigned(tps)
        consumer = self.consumer
        for tp in tps:  # nothing is fetched before the service built the partition
            consumer.pause(tp)
        self._tell_assigned(tps)

    def _settle_released(self, consumer: Any) -> set[Any]:
        """Resolve the start of released partitions: max(checkpointed, committed); with
        transactional outputs of the others: checkpointed, replayed up to committed. Returns
        the partitions settled (and sought) now."""
        settled = set()
        for tp, part in list(self._parts.items()):
            if part.resolved or part.closed:
                continue
            try:
                committed = consumer.committed(tp, timeout_ms=self.commit_timeout_ms)
            except Exception as exc:  # noqa: BLE001 - retried after the next poll
                self._log_poll_error(exc)
                continue
            offset = settle_start(part, committed)
            if offset is not None:
                consumer.seek(tp, offset)
            settled.add(tp)
        return settled

    def _skip_undecodable(self, consumer: Any, exc: BaseException) -> bool:
        """If ``exc`` is kafka-python failing to parse a fetched record: hand that record out
        as ``undecodable_record`` and seek past it (see the module docstring); True if so."""
        tp = _unparsed_partition(consumer, exc)
        part = self._parts.get(tp) if tp is not None else None
        if part is None or part.closed or not part.resolved:
            return False
        try:
            offset = int(consumer.position(tp, timeout_ms=self.commit_timeout_ms))
        except Exception:  # noqa: BLE001 - position unknown: an ordinary poll failure
            return False
        message = str(exc.args[0]) if exc.args else str(exc)
        error = f"{type(exc).__name__}: {message.replace(str(tp), part.key)}"
        log_event(_log, "warning", "kafka_record_undecodable", partition=part.key,
                  offset=offset, error=error)
        part.accept_undecodable(offset, error)
        consumer.seek(tp, offset + 1)
        return True

    def _intake(self) -> int:
        """Most records the next ``poll`` may take: ``max_poll_records``, or less if the
        fullest partition buffer has less room (counted as backpressure); at least 1 (the
        consumer needs a positive count and keeps the rest, position included)."""
        limit = self.max_poll_records
        room = self._room()
        if room < limit:
            limit = max(1, room)
            if self.metrics is not None:
                self.metrics.backpressure.inc()
        return limit

    def _room(self) -> int:
        """Records the fullest partition buffer can still take."""
        fullest = max((part.buffered for part in self._parts.values()), default=0)
        return self.max_buffered_records - fullest

    def _update_lag(self) -> None:
        if self.metrics is None:
            return
        for tp, part in self._parts.items():
            lag = part.lag()
            if lag is not None:
                self.metrics.consumer_lag_records.labels(
                    topic=tp.topic, partition=str(tp.partition)).set(lag)

    def _log_poll_error(self, exc: BaseException) -> None:
        now = time.monotonic()
        if now - self._poll_error_logged >= 5.0:
            self._poll_error_logged = now
            log_event(_log, "warning", "kafka_poll_failed", error=f"{type(exc).__name__}: {exc}")


def settle_start(part: KafkaPartition, committed: int | None) -> int | None:
    """Settle where an unsettled partition starts, given its group's ``committed`` offset
    (``None``: none), as the module docstring says; the start offset (``None``: the
    consumer's own reset)."""
    replay_until = None
    if part.replays:
        offset = part.next_offset
        if committed is not None and offset is not None and int(committed) > offset:
            replay_until = int(committed)
    else:
        offset = part.next_offset if committed is None else max(int(committed),
                                                                part.next_offset or 0)
    log_event(_log, "info", "kafka_partition_resumed", partition=part.key,
              checkpoint_offset=part.next_offset, committed_offset=committed,
              offset=offset, replay_until=replay_until)
    part.settle(offset, replay_until)
    return offset


def _unparsed_partition(consumer: Any, exc: BaseException) -> Any:
    """The partition whose fetched bytes kafka-python failed to parse when it raised ``exc``
    (``None`` if ``exc`` came from elsewhere: transport, coordinator, arguments)."""
    from kafka.errors import CorruptRecordError

    if not isinstance(exc, CorruptRecordError) and not _raised_unpacking(exc):
        return None
    in_line = getattr(getattr(consumer, "_fetcher", None), "_next_partition_records", None)
    return getattr(in_line, "topic_partition", None)


def _raised_unpacking(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "_unpack_records" or "kafka/record/" in code.co_filename.replace(
                "\\", "/"):
            return True
        tb = tb.tb_next
    return False


def kafka_source_from_config(source: Any, kafka: Any, metrics: Any = None) -> KafkaSource:
    """A :class:`KafkaSource` from the ``[source]`` (kind ``"kafka"``) and ``[kafka]``
    configuration sections."""
    settings = {
        **THROUGHPUT_CONSUMER_SETTINGS,
        **kafka.client_settings(),
        "group_id": source.group_id,
        "auto_offset_reset": source.auto_offset_reset,
        "session_timeout_ms": source.session_timeout_ms,
        "heartbeat_interval_ms": source.heartbeat_interval_ms,
        "max_poll_interval_ms": source.max_poll_interval_ms,
        "max_poll_records": source.max_poll_records,
        **kafka.consumer,
    }
    if source.group_instance_id is not None:
        settings["group_instance_id"] = source.group_instance_id
    return KafkaSource(topics=source.topics or None, pattern=source.pattern,
                       consumer_settings=settings, max_record_bytes=source.max_record_bytes,
                       max_buffered_records=source.max_buffered_records,
                       commit_timeout_ms=source.commit_timeout_ms, metrics=metrics,
                       replay_committed=kafka.transactional_id is not None)
