"""The Kafka source on confluent-kafka (librdkafka; ``[kafka] client = "confluent"``).

Same semantics as the kafka-python source (:mod:`streamkm_connectors.kafka_source`, whose
module docstring describes them and whose partition buffers, start offsets, backpressure,
commits, readiness and metrics this source shares): the positions in the checkpoint are the
source of truth, offsets are committed after checkpoints (or inside the output transactions),
released partitions resume at the larger of their checkpointed and committed offsets.

What differs is how the client is driven:

* librdkafka runs its rebalance callbacks inside ``consume``/``poll`` on the calling thread,
  where blocking calls are allowed. The assignment callback hands the partitions to the
  service, which builds them there; each built partition's start is settled at once (the
  committed offset is looked up in the callback when needed) and the partitions are assigned
  *at* those offsets, so nothing is fetched from anywhere else. A partition the service did
  not build in the callback is assigned paused and resumed when it is built.
* Commits made while partitions are being revoked are synchronous (the group must see them
  before another member takes the partitions over); the others are asynchronous, their
  results counted when librdkafka reports them.
* The lag's high watermark is the one of the last fetch response (``get_watermark_offsets``
  cached), the broker connection state comes from librdkafka's statistics.
* librdkafka fetches in its own threads, ahead of the service and while the model steps, into
  its own bounded queue (``queued.max.messages.kbytes``); a ``poll`` takes what it holds, up to
  the partition buffers' room.
"""

from __future__ import annotations

import time
from typing import Any

from kafka import TopicPartition

from streamkm.sources import UNDECODABLE_RECORD

from .confluent_common import BrokerStates, common_properties, confluent_failure, import_confluent
from .kafka_common import KafkaRecord
from .kafka_source import (
    THROUGHPUT_CONSUMER_SETTINGS,
    KafkaPartition,
    KafkaSource,
    make_record,
    settle_start,
)

__all__ = ["ConfluentKafkaSource", "ConfluentPartition", "confluent_source_from_config",
           "THROUGHPUT_PROPERTIES"]


#: librdkafka's fetch settings the service starts from (``[kafka.consumer]`` overrides them):
#: the same as the kafka-python source's (:data:`~streamkm_connectors.kafka_source.THROUGHPUT_CONSUMER_SETTINGS`),
#: and a prefetch queue of at most 32 MiB.
THROUGHPUT_PROPERTIES: dict[str, Any] = {
    "max.partition.fetch.bytes": THROUGHPUT_CONSUMER_SETTINGS["max_partition_fetch_bytes"],
    "fetch.min.bytes": THROUGHPUT_CONSUMER_SETTINGS["fetch_min_bytes"],
    "fetch.wait.max.ms": THROUGHPUT_CONSUMER_SETTINGS["fetch_max_wait_ms"],
    "socket.receive.buffer.bytes": THROUGHPUT_CONSUMER_SETTINGS["receive_buffer_bytes"],
    "queued.max.messages.kbytes": 32 << 10,
}


class ConfluentPartition(KafkaPartition):
    """A :class:`~streamkm_connectors.kafka_source.KafkaPartition` fed with confluent-kafka
    messages."""

    @staticmethod
    def message_offset(msg: Any) -> int:
        """The offset of a confluent-kafka ``Message``."""
        return int(msg.offset())

    @staticmethod
    def to_record(msg: Any, max_record_bytes: int, replayed: bool) -> KafkaRecord:
        """A confluent-kafka ``Message`` as a record (``undecodable_record`` if its headers
        cannot be read)."""
        position = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset()}
        try:
            headers = msg.headers()
        except (UnicodeDecodeError, ValueError) as exc:
            return KafkaRecord(value=b"", key=None, position=position, error=UNDECODABLE_RECORD,
                               replayed=replayed, detail=f"{type(exc).__name__}: {exc}")
        return make_record(msg.value(), msg.key(), headers, position, max_record_bytes,
                           replayed)


class _Consumer:
    """A confluent-kafka ``Consumer`` (``raw``) with a kafka-python-like ``metrics()``."""

    def __init__(self, raw: Any, states: BrokerStates) -> None:
        self.raw = raw
        self.states = states

    def metrics(self) -> dict[str, dict[str, float]]:
        """``{"consumer-metrics": {"connection-count": n}}`` (brokers connected)."""
        return self.states.metrics()


class ConfluentKafkaSource(KafkaSource):
    """A consumer group on confluent-kafka as a dynamic source of partitions.

    Parameters
    ----------
    topics, pattern
        As for :class:`~streamkm_connectors.kafka_source.KafkaSource` (``pattern`` is a
        regular expression matched at the start of topic names).
    properties : dict
        librdkafka consumer properties, with ``group.id``; automatic commits and offset
        stores are always off.
    max_poll_records : int
        Most records one consumer call takes.
    **kwargs
        ``max_record_bytes``, ``max_buffered_records``, ``commit_timeout_ms``, ``metrics``,
        ``replay_committed``: as for :class:`~streamkm_connectors.kafka_source.KafkaSource`.
    """

    partition_class = ConfluentPartition
    classify_failure = staticmethod(confluent_failure)

    def __init__(self, *, topics: list[str] | None = None, pattern: str | None = None,
                 properties: dict[str, Any], max_poll_records: int = 2000,
                 **kwargs: Any) -> None:
        self.properties = {**properties, "enable.auto.commit": False,
                           "enable.auto.offset.store": False}
        settings = {"group_id": properties.get("group.id"), "max_poll_records": max_poll_records,
                    "reconnect_backoff_ms": properties.get("reconnect.backoff.ms", 100),
                    "reconnect_backoff_max_ms": properties.get("reconnect.backoff.max.ms", 5000)}
        super().__init__(topics=topics, pattern=pattern, consumer_settings=settings,
                         consumer_factory=self._no_factory, **kwargs)
        self._states = BrokerStates("consumer-metrics")
        self._in_assign = False  # inside librdkafka's assignment callback
        self._revoking = False  # inside its revocation callback
        self._sync_commit = False

    @staticmethod
    def _no_factory(**_settings: Any) -> Any:  # the consumer is made by _create_consumer
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ client

    def _create_consumer(self) -> _Consumer:
        ck = import_confluent()
        raw = ck.Consumer({**self.properties, "stats_cb": self._states.on_stats,
                           "error_cb": self._on_error, "on_commit": self._on_commit})
        try:
            topics = [f"^{self.pattern}"] if self.pattern is not None else list(self.topics)
            raw.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                          on_lost=self._on_lost)
        except Exception:
            raw.close()
            raise
        return _Consumer(raw, self._states)

    def _on_error(self, error: Any) -> None:
        from confluent_kafka import KafkaError

        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._states.set_down()
            self._client.set_connected(False)
        self._log_poll_error(RuntimeError(str(error)))

    # ------------------------------------------------------------------ rebalances

    def _on_assign(self, raw: Any, partitions: list[Any]) -> None:
        ck = import_confluent()
        tps = sorted(TopicPartition(p.topic, p.partition) for p in partitions)
        self._note_assigned(tps)
        self._in_assign = True
        try:
            self._tell_assigned(tps)
        finally:
            self._in_assign = False
        starts, paused = [], []
        for tp in tps:
            offset, ready = self._start(raw, tp)
            starts.append(ck.TopicPartition(tp.topic, tp.partition, offset))
            if not ready:
                paused.append(ck.TopicPartition(tp.topic, tp.partition))
        raw.assign(starts)
        if paused:  # not built (or not settled) yet: resumed by build_part / poll
            raw.pause(paused)

    def _start(self, raw: Any, tp: Any) -> tuple[int, bool]:
        """Where an assigned partition starts and whether it may be fetched right away."""
        from confluent_kafka import OFFSET_STORED

        part = self._parts.get(tp)
        if part is None or part.closed:
            return OFFSET_STORED, False
        if not part.resolved:
            try:
                committed = self._committed(raw, tp)
            except Exception as exc:  # noqa: BLE001 - settled after the next poll
                self._log_poll_error(exc)
                return OFFSET_STORED, False
            settle_start(part, committed)
        return (part.next_offset if part.next_offset is not None else OFFSET_STORED), True

    def _committed(self, raw: Any, tp: Any) -> int | None:
        """The group's committed offset of ``tp`` (``None``: none)."""
        from confluent_kafka import TopicPartition as CTopicPartition

        (found,) = raw.committed([CTopicPartition(tp.topic, tp.partition)],
                                 timeout=self.commit_timeout_ms / 1000.0)
        if found.error is not None:
            from confluent_kafka import KafkaException

            raise KafkaException(found.error)
        return int(found.offset) if found.offset >= 0 else None

    def _on_revoke(self, raw: Any, partitions: list[Any]) -> None:
        self._revoked(partitions, lost=False)

    def _on_lost(self, raw: Any, partitions: list[Any]) -> None:
        self._revoked(partitions, lost=True)

    def _revoked(self, partitions: list[Any], *, lost: bool) -> None:
        self._revoking = True
        try:
            self._handle_revoked([TopicPartition(p.topic, p.partition) for p in partitions],
                                 lost=lost)
        finally:
            self._revoking = False

    def build_part(self, part_key_: str, resume_state: dict[str, Any] | None) -> KafkaPartition:
        """The partition ``"<topic>:<partition>"`` (assigned to this consumer), starting as
        the kafka-python source's do."""
        part = self._new_part(part_key_, resume_state)
        if self._in_assign:
            return part  # the assignment callback assigns it at its start
        raw = self.consumer.raw
        ctp = self._ctp(part.tp)
        if part.resolved:
            if part.next_offset is not None:
                self._seek(raw, part.tp, part.next_offset)
            raw.resume([ctp])
        return part  # an unsettled partition is settled after the next poll

    @staticmethod
    def _ctp(tp: Any, offset: int | None = None) -> Any:
        from confluent_kafka import TopicPartition as CTopicPartition

        if offset is None:
            return CTopicPartition(tp.topic, tp.partition)
        return CTopicPartition(tp.topic, tp.partition, offset)

    def _seek(self, raw: Any, tp: Any, offset: int) -> bool:
        try:
            raw.seek(self._ctp(tp, offset))
        except Exception as exc:  # noqa: BLE001 - not fetching yet: retried after a poll
            self._log_poll_error(exc)
            return False
        return True

    def _settle_released(self, consumer: Any) -> set[Any]:
        """Settle the partitions whose start the assignment callback could not settle (the
        committed-offset lookup failed), seek and resume them."""
        settled = set()
        raw = consumer.raw
        for tp, part in list(self._parts.items()):
            if part.resolved or part.closed:
                continue
            try:
                committed = self._committed(raw, tp)
            except Exception as exc:  # noqa: BLE001 - retried after the next poll
                self._log_poll_error(exc)
                continue
            offset = settle_start(part, committed)
            if offset is not None and not self._seek(raw, tp, offset):
                part.resolved = False
                continue
            raw.resume([self._ctp(tp)])
            settled.add(tp)
        return settled

    # ------------------------------------------------------------------ DynamicSource

    def poll(self, timeout_s: float) -> int:
        """Take what librdkafka has fetched into the partition buffers (waiting up to
        ``timeout_s`` for the first record when it has nothing) and run the group protocol
        (rebalance callbacks fire in here). Transport errors are logged, never raised.
        Returns the records buffered by this call."""
        consumer = self._client.get()
        if consumer is None:
            time.sleep(min(timeout_s, self._client.seconds_to_next_attempt()))
            return 0
        from confluent_kafka import KafkaException

        raw = consumer.raw
        self._settle_released(consumer)
        taken, limit = 0, self._intake()
        try:
            messages = raw.consume(num_messages=limit, timeout=0)
            if not messages and timeout_s > 0:
                first = raw.poll(timeout_s)
                messages = [first] if first is not None else []
                if first is not None and limit > 1:
                    messages.extend(raw.consume(num_messages=limit - 1, timeout=0))
            while True:
                taken += self._accept(messages)
                room = self._room()
                if len(messages) < limit or room <= 0:
                    break
                limit = min(self.max_poll_records, room)
                messages = raw.consume(num_messages=limit, timeout=0)
        except (KafkaException, RuntimeError) as exc:  # transport; a closed consumer
            self._log_poll_error(exc)
            time.sleep(min(timeout_s, 0.1))
        self._client.probe("consumer-metrics")
        self._update_lag()
        return taken

    def _accept(self, messages: list[Any]) -> int:
        """Buffer consumed messages in their partitions; the number buffered."""
        by_partition: dict[tuple[str, int], list[Any]] = {}
        for msg in messages:
            if msg.error() is not None:
                self._log_poll_error(RuntimeError(str(msg.error())))
                continue
            by_partition.setdefault((msg.topic(), msg.partition()), []).append(msg)
        taken = 0
        for tp, batch in by_partition.items():
            part = self._parts.get(TopicPartition(*tp))
            if part is None or not part.resolved or part.closed:
                continue  # fetched before the start was settled: fetched again after the seek
            taken += part.accept(batch, self.max_record_bytes)
        return taken

    def highwater(self, tp: Any) -> int | None:
        """The high watermark of the last fetch response for ``tp`` (``None`` if unknown)."""
        consumer = self.consumer
        if consumer is None:
            return None
        try:
            _low, high = consumer.raw.get_watermark_offsets(self._ctp(tp), cached=True)
        except Exception:  # noqa: BLE001 - not assigned any more
            return None
        return int(high) if high >= 0 else None

    def _send_commit(self, offsets: dict[Any, Any]) -> None:
        """Commit ``offsets``: synchronously while partitions are revoked (the group sees
        them before another member takes the partitions over), else asynchronously."""
        self._commit(offsets, wait=self._revoking)

    def _commit(self, offsets: dict[Any, int], *, wait: bool) -> None:
        raw = self.consumer.raw
        listed = [self._ctp(tp, offset) for tp, offset in offsets.items()]
        try:
            if not wait:
                raw.commit(offsets=listed, asynchronous=True)
                return
            self._sync_commit = True
            try:
                raw.commit(offsets=listed, asynchronous=False)
            finally:
                self._sync_commit = False
        except Exception as exc:  # noqa: BLE001 - commits are advisory; retried next checkpoint
            self._commit_done(list(offsets), exc)
            return
        self._commit_done(list(offsets), None)

    def _on_commit(self, error: Any, partitions: list[Any]) -> None:
        if self._sync_commit:
            return  # counted by _commit
        from confluent_kafka import KafkaException

        failed = error is not None or any(p.error is not None for p in partitions)
        cause = error or next((p.error for p in partitions if p.error is not None), None)
        self._commit_done([TopicPartition(p.topic, p.partition) for p in partitions],
                          KafkaException(cause) if failed else None)

    def _offsets_to_commit(self, positions: dict[str, dict[str, Any]]) -> dict[Any, Any]:
        return self._next_offsets(positions)

    @staticmethod
    def _group_metadata(consumer: Any) -> Any:
        return consumer.raw.consumer_group_metadata()

    def _commit_and_wait(self, offsets: dict[Any, Any]) -> None:
        self._commit(offsets, wait=True)

    def _close_consumer(self, consumer: Any) -> None:
        consumer.raw.close()


def confluent_source_from_config(source: Any, kafka: Any, metrics: Any = None
                                 ) -> ConfluentKafkaSource:
    """A :class:`ConfluentKafkaSource` from the ``[source]`` (kind ``"kafka"``) and
    ``[kafka]`` configuration sections."""
    props: dict[str, Any] = {
        **THROUGHPUT_PROPERTIES,
        **common_properties(kafka),
        "group.id": source.group_id,
        "auto.offset.reset": source.auto_offset_reset,
        "session.timeout.ms": source.session_timeout_ms,
        "heartbeat.interval.ms": source.heartbeat_interval_ms,
        "max.poll.interval.ms": source.max_poll_interval_ms,
        # the kafka-python source's default: aborted transactions' records are read too
        "isolation.level": "read_uncommitted",
        **kafka.consumer,
    }
    if source.group_instance_id is not None:
        props["group.instance.id"] = source.group_instance_id
    return ConfluentKafkaSource(
        topics=source.topics or None, pattern=source.pattern, properties=props,
        max_poll_records=source.max_poll_records, max_record_bytes=source.max_record_bytes,
        max_buffered_records=source.max_buffered_records,
        commit_timeout_ms=source.commit_timeout_ms, metrics=metrics,
        replay_committed=kafka.transactional_id is not None)
