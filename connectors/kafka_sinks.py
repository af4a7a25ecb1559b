"""Kafka sinks: assignments, lifecycle events and dead letters written to topics.

The three sinks share one lazily created ``KafkaProducer``. Entries are queued by the
``write_*`` methods, handed to the producer by :meth:`KafkaTopicSink.flush` (after every
batch) and confirmed by :meth:`KafkaTopicSink.sync`, which the service calls right before
every checkpoint: it waits for the broker's acknowledgement of everything written
(``producer.flush``) and raises :class:`~streamkm.exceptions.SinkError` otherwise, so a
checkpoint is only written once its outputs are durable. Entries whose delivery failed are
sent again at the next sync. When a wait for acknowledgements fails (e.g. after a network
partition kafka-python's producer can stay wedged, its requests never answered), the producer
is closed and created again, and every message it had not acknowledged is sent again through
the new one. Kafka cannot take entries back, so after a crash the entries
written after the last checkpoint are written again: without transactions outputs are
at-least-once. Every assignment is keyed by its record id and every dead letter by its
record's position, so the **last message per key** is exact: a compacted topic, or a reader
that keeps the last assignment per id, holds one entry per record (docs/service.md).

Messages:

* **assignments**: key = the record id (as text, UTF-8; whatever the input message's key);
  headers = the input message's headers, plus ``input_key`` (the input message's key) when
  it had one; value = ``{"id", "cluster", "distance", "sq_distance", "step"}``
  (``distance`` is the kernel distance to the cluster's center, ``sq_distance`` its square);
* **events**: key = the event name; value = the event with a ``"time"``;
* **model** (``[sinks] model_topic``): key = the model's step (decimal text); value = the
  ``.npz`` the estimator's ``save`` writes (``MiniBatchKernelKMeans.load(io.BytesIO(value))``).
  Only the newest unsent model is kept while the broker is away, and a retried older model
  may arrive after a newer one: readers keep the model with the highest key;
* **dead letters**: key = the record's position as text (:func:`position_key`,
  ``<topic>:<partition>:<offset>`` for Kafka input, ``<file>:<offset>`` for files);
  value = the raw record (at most ``max_raw_bytes``); headers ``reason``, ``detail``,
  ``raw_bytes`` (``raw_truncated``) and ``source_<field>`` for every field of the record's
  position (``source_topic``, ``source_partition``, ``source_offset`` for Kafka input;
  ``source_file``, ``source_offset`` for files).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from streamkm.exceptions import OutputTransactionError, SinkError
from streamkm.io.decoding import safe_text
from streamkm.logs import log_event
from streamkm.sinks import AssignmentNovelty

from ._json_out import assignments, encode
from .kafka_common import LazyKafkaClient, kafka_python_failure, silence_kafka_python_logs

__all__ = ["KafkaProducerHandle", "KafkaOutputTransaction", "KafkaTopicSink",
           "AssignmentKafkaSink", "EventKafkaSink", "DeadLetterKafkaSink", "ModelKafkaSink",
           "kafka_sinks_from_config", "id_key", "position_key"]

_log = logging.getLogger("streamkm.kafka")
_Message = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


class KafkaProducerHandle:
    """One ``KafkaProducer`` shared by several sinks, created lazily with retries.

    Parameters
    ----------
    producer_settings : dict
        Keyword arguments for ``kafka.KafkaProducer``.
    flush_timeout_s : float
        Longest wait for acknowledgements in :meth:`flush`.
    metrics : KafkaMetrics, optional
        Receives ``broker_connected{client="producer"}``.
    producer_factory : callable, optional
        Creates the producer from the settings; ``kafka.KafkaProducer`` by default (the
        confluent-kafka client passes its :class:`~streamkm_connectors.confluent_producer.ConfluentProducer`).
    classify : callable, optional
        Which errors of ``producer_factory`` are settings errors and which are retried
        (:class:`~streamkm_connectors.kafka_common.LazyKafkaClient`); kafka-python's by default.
    """

    def __init__(self, producer_settings: dict[str, Any], *, flush_timeout_s: float = 30.0,
                 metrics: Any = None, producer_factory: Callable[..., Any] | None = None,
                 classify: Callable[[BaseException], str | None] = kafka_python_failure
                 ) -> None:
        silence_kafka_python_logs()
        if producer_factory is None:
            from kafka import KafkaProducer

            producer_factory = KafkaProducer
        self.settings = dict(producer_settings)
        self.flush_timeout_s = flush_timeout_s
        self.metrics = metrics
        self._users = 0
        self._producer_factory = producer_factory
        self._client: LazyKafkaClient[Any] = LazyKafkaClient(
            "producer", self._create_producer,
            backoff_s=max(float(self.settings.get("reconnect_backoff_ms", 500)), 100.0) / 1000,
            max_backoff_s=float(self.settings.get("reconnect_backoff_max_ms", 5000)) / 1000,
            on_connected_change=self._report_connected, classify=classify)
        self._send_paused_until = 0.0
        #: Incremented whenever the producer is replaced; futures of older producers that
        #: are not done will never complete (their messages are sent again).
        self.generation = 0
        self._failing = False  # the last flush failed: not reported as connected
        if metrics is not None:
            metrics.broker_connected.labels(client="producer").set(0)

    def _create_producer(self) -> Any:
        return self._producer_factory(**self.settings)

    def _report_connected(self, connected: bool) -> None:
        if self.metrics is not None:
            self.metrics.broker_connected.labels(client="producer").set(1 if connected else 0)

    def acquire(self) -> KafkaProducerHandle:
        """Register one more sink using the producer (closed when the last one closes)."""
        self._users += 1
        return self

    def _producer(self) -> Any:
        """The producer, created on first use.

        Raises
        ------
        SinkError
            The broker has not been reachable yet, so no producer exists.
        """
        producer = self._client.get()
        if producer is None:
            raise SinkError("no Kafka producer: the broker has not been reachable yet")
        return producer

    def send(self, topic: str, message: _Message) -> Any | None:
        """Hand one message to the producer; its future, or ``None`` if it could not be
        handed over now (no producer yet, metadata unavailable, buffer full)."""
        if time.monotonic() < self._send_paused_until:
            return None
        producer = self._client.get()
        if producer is None:
            return None
        key, value, headers = message
        try:
            self._before_send(producer)
            return producer.send(topic, value=value, key=key, headers=headers)
        except Exception as exc:  # noqa: BLE001 - KafkaTimeoutError, BufferError, ...
            self._send_failed(exc)
            self._send_paused_until = time.monotonic() + 1.0
            self._client.set_connected(False)
            log_event(_log, "warning", "kafka_send_failed", topic=topic,
                      error=f"{type(exc).__name__}: {exc}")
            return None

    def _before_send(self, producer: Any) -> None:
        """Called before every message is handed over."""

    def _send_failed(self, exc: BaseException) -> None:
        """A message could not be handed over (it stays queued and is tried again)."""

    def delivery_failed(self, exc: BaseException | None) -> None:
        """A message was refused by the broker (the sink sends it again)."""

    def flush(self) -> None:
        """Wait until everything handed over is acknowledged or failed.

        Raises
        ------
        SinkError
            No producer exists or the wait timed out.
        """
        producer = self._producer()
        try:
            producer.flush(timeout=self.flush_timeout_s)
        except Exception as exc:  # noqa: BLE001
            error = f"{type(exc).__name__}: {exc}"
            self._failing = True
            self._client.set_connected(False)
            self.reset(error)
            raise SinkError(f"Kafka producer flush did not complete within "
                            f"{self.flush_timeout_s!r} s: {error}") from exc
        self._failing = False
        self._client.probe("producer-metrics", every_s=0.0)

    def reset(self, reason: str) -> None:
        """Close the producer without waiting (its unacknowledged messages fail) and let the
        next :meth:`send` create a new one."""
        producer, self._client.client = self._client.client, None
        self.generation += 1
        log_event(_log, "warning", "kafka_producer_reset", reason=reason,
                  generation=self.generation)
        if producer is not None:
            _close_now(producer)

    def probe(self) -> None:
        """Refresh the connection gauge (at most once a second); it stays at 0 after a
        failed flush until a flush succeeds (open connections may be dead)."""
        if not self._failing:
            self._client.probe("producer-metrics")

    def release(self) -> None:
        """One sink stopped using the producer; close it after the last one."""
        self._users -= 1
        producer = self._client.client
        if self._users <= 0 and producer is not None:
            try:
                self._before_close(producer)
                producer.close(timeout=self.flush_timeout_s)
            except Exception as exc:  # noqa: BLE001
                log_event(_log, "warning", "kafka_producer_close_failed", error=repr(exc))
            self._client.client = None

    def _before_close(self, producer: Any) -> None:
        """Called before the producer is closed by :meth:`release`."""


def _close_now(producer: Any) -> None:
    """Close a producer without waiting. kafka-python's ``close`` first waits for pending
    messages and raises if they remain (its sender thread keeps running), so its sender is
    force-closed first: pending messages then fail and the close completes."""
    sender = getattr(producer, "_sender", None)
    try:
        if sender is not None:
            sender.force_close()
            sender.join(timeout=1.0)
        producer.close(timeout=0)
    except Exception as exc:  # noqa: BLE001
        log_event(_log, "warning", "kafka_producer_close_failed", error=repr(exc))


def _within(seconds: float, what: str, call: Callable[[], Any]) -> None:
    """Run one of kafka-python's transactional calls, waiting at most ``seconds``.

    ``send_offsets_to_transaction``, ``commit_transaction`` and ``abort_transaction`` wait for
    the transaction coordinator's answer without a time limit and send the request again
    after every lost connection, so a broker that drops the connection instead of answering
    (Tansu does so at the ``EndTxn`` of a fenced producer) would block the service for ever.
    The call runs on a daemon thread, left waiting after a timeout: the caller then gives the
    producer up.

    Raises
    ------
    TimeoutError
        No answer within ``seconds``.
    Exception
        Whatever the call raised.
    """
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            errors.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"streamkm-kafka-{what}", daemon=True).start()
    if not done.wait(seconds):
        raise TimeoutError(f"the transaction coordinator did not answer {what} within "
                           f"{seconds!r} s (broker unreachable, or this producer was fenced "
                           f"and the broker dropped the connection instead of answering)")
    if errors:
        raise errors[0]


class KafkaOutputTransaction(KafkaProducerHandle):
    """A transactional producer shared by the sinks: the
    :class:`~streamkm.sinks.OutputTransaction` of exactly-once Kafka outputs.

    Every message handed over since the last :meth:`commit` belongs to one open
    transaction; :meth:`commit` adds the consumed offsets of the source's assigned partitions
    (Kafka's read-process-write pattern) and commits it. The producer is created with
    ``init_transactions``, which fences (and aborts the open transaction of) any earlier
    producer with the same ``transactional_id``. A transaction that cannot complete (the
    producer was fenced, a message refused, a flush timed out, partitions lost, the
    coordinator silent for ``flush_timeout_s``) raises
    :class:`~streamkm.exceptions.OutputTransactionError`, now and at every later call: the
    process must restart from its last checkpoint. The open transaction is aborted when the
    producer is closed.

    A fenced producer learns it only from the broker, at its next transactional request:
    while no transaction commits, :meth:`check` sends one every ``check_interval_s``.

    Parameters
    ----------
    producer_settings : dict
        Keyword arguments for ``kafka.KafkaProducer``, with ``transactional_id``.
    check_interval_s : float
        Seconds without a commit after which :meth:`check` asks the coordinator.
    **kwargs
        See :class:`KafkaProducerHandle`.
    """

    def __init__(self, producer_settings: dict[str, Any], *, check_interval_s: float = 5.0,
                 **kwargs: Any) -> None:
        super().__init__(producer_settings, **kwargs)
        self.transactional_id = str(producer_settings["transactional_id"])
        self.check_interval_s = check_interval_s
        self.open = False  # a transaction has begun and is neither committed nor aborted
        self.commits = 0
        self.checks = 0  # idle checks that reached the coordinator
        self._failure: OutputTransactionError | None = None
        self._last_offsets: dict[Any, Any] | None = None
        self._last_positions: dict[str, dict[str, Any]] | None = None
        self._last_contact = time.monotonic()  # the last commit or check

    def _create_producer(self) -> Any:
        producer = super()._create_producer()
        try:
            producer.init_transactions()
        except BaseException:
            _close_now(producer)
            raise
        log_event(_log, "info", "kafka_transactions_initialised",
                  transactional_id=self.transactional_id)
        return producer

    def _fail(self, what: str, exc: BaseException) -> OutputTransactionError:
        if self._failure is None:
            self._failure = OutputTransactionError(
                f"Kafka output transaction of transactional_id {self.transactional_id!r} "
                f"failed ({what}): {type(exc).__name__}: {exc}; the outputs since the last "
                f"checkpoint are aborted and written again after a restart")
            self._failure.__cause__ = exc
            log_event(_log, "error", "kafka_transaction_failed", step=what,
                      transactional_id=self.transactional_id,
                      error=f"{type(exc).__name__}: {exc}")
        return self._failure

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure

    def send(self, topic: str, message: _Message) -> Any | None:
        self._check()
        return super().send(topic, message)

    def _before_send(self, producer: Any) -> None:
        if not self.open:
            producer.begin_transaction()
            self.open = True

    def _send_failed(self, exc: BaseException) -> None:
        from kafka.errors import KafkaTimeoutError

        if not isinstance(exc, (KafkaTimeoutError, BufferError)):  # not worth waiting for
            raise self._fail("send", exc) from exc

    def delivery_failed(self, exc: BaseException | None) -> None:
        raise self._fail("delivery", exc or RuntimeError("unknown"))

    def flush(self) -> None:
        """Wait for the acknowledgements of the open transaction's messages.

        Raises
        ------
        SinkError
            No producer exists yet (nothing was handed over: retried).
        OutputTransactionError
            The wait failed: the transaction cannot complete.
        """
        self._check()
        producer = self._producer()
        try:
            producer.flush(timeout=self.flush_timeout_s)
        except Exception as exc:  # noqa: BLE001
            raise self._fail("flush", exc) from exc

    def commit(self, positions: dict[str, dict[str, Any]], source: Any) -> None:
        """Commit the open transaction with the consumed offsets of ``positions``.

        Raises
        ------
        SinkError
            No producer could be created yet (nothing to lose: retried).
        OutputTransactionError
            The transaction failed (see the class docstring).
        """
        offsets, group = self._offsets(positions, source)
        if not self.open and (not offsets or offsets == self._last_offsets):
            self._last_positions = positions
            return  # nothing written, nothing read since the last commit
        producer = self._producer()
        try:
            self._before_send(producer)
            if offsets:
                _within(self.flush_timeout_s, "send_offsets_to_transaction",
                        lambda: producer.send_offsets_to_transaction(offsets, group))
            _within(self.flush_timeout_s, "commit_transaction", producer.commit_transaction)
        except Exception as exc:  # noqa: BLE001 - fenced, timed out, refused
            raise self._fail("commit", exc) from exc
        self.open = False
        self.commits += 1
        self._last_offsets, self._last_positions = offsets, positions
        self._last_contact = time.monotonic()

    def check(self, source: Any) -> None:
        """Ask the transaction coordinator whether this producer may still commit, if no
        transaction committed for ``check_interval_s`` and none is open.

        The check is a transaction holding the offsets of the last commit (for the
        partitions still assigned), aborted at once: the broker compares the producer's
        epoch when it stores the offsets, so a fenced producer is told without writing
        anything. Nothing is checked before the first commit, nor while a transaction is
        open (the next checkpoint commits it).

        Raises
        ------
        OutputTransactionError
            The producer was fenced, or the coordinator did not answer within
            ``flush_timeout_s``.
        """
        self._check()
        now = time.monotonic()
        producer = self._client.client
        if (self.open or producer is None or self._last_positions is None
                or now - self._last_contact < self.check_interval_s):
            return
        self._last_contact = now
        offsets, group = self._offsets(self._last_positions, source)
        if not offsets:
            return
        try:
            producer.begin_transaction()
            _within(self.flush_timeout_s, "send_offsets_to_transaction",
                    lambda: producer.send_offsets_to_transaction(offsets, group))
        except TimeoutError as exc:
            raise self._fail("check", exc) from exc
        except Exception as exc:  # noqa: BLE001 - fenced, or abortable (group rebalanced)
            self._abort_failed_check(producer, exc)
            return
        try:
            _within(self.flush_timeout_s, "abort_transaction", producer.abort_transaction)
        except Exception as exc:  # noqa: BLE001 - fenced meanwhile, timed out
            raise self._fail("check", exc) from exc
        self.checks += 1
        self._last_contact = time.monotonic()

    def _abort_failed_check(self, producer: Any, exc: Exception) -> None:
        """Abort the check's transaction after ``exc``: an abortable error (the group's
        generation changed meanwhile, ...) leaves the producer usable, so the check is
        logged and the process carries on; after a fatal one (fenced) kafka-python refuses
        the abort and the transaction fails."""
        try:
            _within(self.flush_timeout_s, "abort_transaction", producer.abort_transaction)
        except Exception:  # noqa: BLE001
            raise self._fail("check", exc) from exc
        log_event(_log, "warning", "kafka_transaction_check_failed",
                  transactional_id=self.transactional_id,
                  error=f"{type(exc).__name__}: {exc}")

    def _offsets(self, positions: dict[str, dict[str, Any]], source: Any
                 ) -> tuple[dict[Any, Any], Any]:
        """``source.transaction_offsets(positions)``, failing the transaction if the
        partitions are being lost."""
        self._check()
        try:
            return source.transaction_offsets(positions)
        except OutputTransactionError as exc:
            raise self._fail("offsets", exc) from exc

    def _before_close(self, producer: Any) -> None:
        if self.open and self._failure is None:
            try:
                _within(self.flush_timeout_s, "abort_transaction", producer.abort_transaction)
            except Exception as exc:  # noqa: BLE001 - fenced meanwhile: aborted anyway
                log_event(_log, "warning", "kafka_transaction_abort_failed",
                          error=f"{type(exc).__name__}: {exc}")
        self.open = False

    def release(self) -> None:
        """One sink stopped using the producer; abort the open transaction and close it
        after the last one (at once if the transaction failed)."""
        if self._failure is not None and self._users <= 1:
            self._users = 0
            producer, self._client.client = self._client.client, None
            if producer is not None:
                _close_now(producer)
            return
        super().release()


class KafkaTopicSink:
    """Ordered messages to one topic with at-least-once delivery through checkpoints.

    Parameters
    ----------
    handle : KafkaProducerHandle
        The shared producer.
    topic : str
        Destination topic.
    """

    def __init__(self, handle: KafkaProducerHandle, topic: str) -> None:
        self._handle = handle.acquire()
        self.topic = topic
        self._pending: deque[_Message] = deque()
        self._pending_seqs: deque[int] = deque()  # each pending message's sequence number
        # (sequence number, message, future, producer generation) handed to the producer
        self._in_flight: deque[tuple[int, _Message, Any, int]] = deque()
        self._delivered = 0
        self._written = 0  # messages enqueued: the next sequence number
        self._closed = False

    def _enqueue(self, message: _Message) -> None:
        self._pending.append(message)
        self._pending_seqs.append(self._written)
        self._written += 1

    def position(self) -> dict[str, Any]:
        """``{"topic", "delivered"}``: messages acknowledged so far by this process."""
        return {"topic": self.topic, "delivered": self._delivered}

    def restore(self, position: dict[str, Any] | None) -> None:
        """Nothing to do: Kafka cannot take messages back (at-least-once)."""

    def flush(self) -> None:
        """Hand queued messages to the producer without waiting for acknowledgements."""
        while self._pending:
            future = self._handle.send(self.topic, self._pending[0])
            if future is None:
                break
            self._in_flight.append((self._pending_seqs.popleft(), self._pending.popleft(),
                                    future, self._handle.generation))
        self._handle.probe()

    def delivery_mark(self) -> int:
        """A mark after every message written so far (see :meth:`delivered`)."""
        return self._written

    def delivered(self, mark: int) -> bool:
        """Whether every message written before ``mark`` is acknowledged, without waiting
        (a failed one stays undelivered until :meth:`sync` sends it again)."""
        in_flight = self._in_flight
        while in_flight and in_flight[0][2].is_done and in_flight[0][2].succeeded():
            in_flight.popleft()
            self._delivered += 1
        if self._pending_seqs and min(self._pending_seqs) < mark:
            return False
        return not any(seq < mark and not (future.is_done and future.succeeded())
                       for seq, _message, future, _generation in in_flight)

    def sync(self) -> dict[str, Any]:
        """Send everything and wait for the acknowledgements; the position.

        Raises
        ------
        SinkError
            Some messages are not acknowledged (they are kept and sent again next time).
        """
        self.flush()
        error: BaseException | None = None
        if self._in_flight:
            try:
                self._handle.flush()
            except SinkError as exc:
                error = exc
        retry: list[tuple[int, _Message]] = []
        still_in_flight: deque[tuple[int, _Message, Any, int]] = deque()
        for seq, message, future, generation in self._in_flight:
            if not future.is_done and generation == self._handle.generation:
                still_in_flight.append((seq, message, future, generation))
            elif not future.is_done:  # its producer was replaced: send it again
                retry.append((seq, message))
            elif future.failed():
                self._handle.delivery_failed(future.exception)
                retry.append((seq, message))
                error = error or future.exception
            else:
                self._delivered += 1
        self._in_flight = still_in_flight
        self._pending.extendleft(message for _seq, message in reversed(retry))
        self._pending_seqs.extendleft(seq for seq, _message in reversed(retry))
        if self._pending or self._in_flight:
            raise SinkError(
                f"{len(self._pending) + len(self._in_flight)} messages for Kafka topic "
                f"{self.topic!r} not acknowledged yet: {error!r}")
        return self.position()

    def await_delivery(self) -> None:
        """Send everything and wait for the acknowledgements (:meth:`sync`)."""
        self.sync()

    def close(self) -> None:
        """Try to deliver what is queued, then release the producer. Undelivered messages
        belong to records after the last checkpoint, which a restart processes again."""
        if self._closed:
            return
        self._closed = True
        try:
            self.sync()
        except (SinkError, OutputTransactionError) as exc:
            log_event(_log, "warning", "kafka_sink_closed_undelivered", topic=self.topic,
                      error=str(exc))
        self._handle.release()


def id_key(record_id: Any) -> bytes:
    """The message key of a record's assignment: its id as UTF-8 text (``str`` of a
    non-string id; undecodable characters escaped like in the JSON value)."""
    return safe_text(record_id if isinstance(record_id, str) else str(record_id)).encode()


def position_key(position: dict[str, Any]) -> bytes:
    """The message key of a dead letter: the record's position as text, its fields joined
    by ``:`` (``<topic>:<partition>:<offset>``, ``<file>:<offset>``; ``length`` and the file
    source's ``partition`` label left out, the file name being the unique part)."""
    if "file" in position:
        fields = [position["file"], position.get("offset")]
    else:
        fields = [v for k, v in position.items() if k != "length"]
    return safe_text(":".join(str(v) for v in fields)).encode()


class AssignmentKafkaSink(KafkaTopicSink):
    """One message per accepted record, keyed by its id, with the input message's headers."""

    def write_assignments(self, ids: list[Any], clusters: Any, sq_distances: Any,
                          step: int, novelty: AssignmentNovelty | None = None) -> None:
        """Queue the assignments of one batch (no input headers)."""
        self.write_record_assignments([None] * len(ids), ids, clusters, sq_distances, step,
                                      novelty)

    def write_record_assignments(self, records: list[Any], ids: list[Any], clusters: Any,
                                 sq_distances: Any, step: int,
                                 novelty: AssignmentNovelty | None = None) -> None:
        """Queue the assignments of one batch, each keyed by its record id and carrying its
        input message's headers (and key, as header ``input_key``); with the novelty fields
        when given."""
        rows = assignments(ids, clusters, sq_distances, step, novelty)
        for record, assignment in zip(records, rows):
            headers = list(getattr(record, "headers", ()))
            input_key = getattr(record, "raw_key", None)
            if input_key is None and record is not None and record.key is not None:
                input_key = record.key.encode("utf-8", "backslashreplace")
            if input_key is not None:
                headers.append(("input_key", input_key))
            self._enqueue((id_key(assignment.id), encode(assignment), headers))


class EventKafkaSink(KafkaTopicSink):
    """Model lifecycle events, keyed by the event name."""

    def write_event(self, event: dict[str, Any]) -> None:
        """Queue one event (a ``"time"`` field is added)."""
        name = str(event.get("event", ""))
        self._enqueue((name.encode("utf-8", "backslashreplace"),
                       encode({"time": round(time.time(), 6), **event}), []))


class DeadLetterKafkaSink(KafkaTopicSink):
    """Rejected raw records keyed by their position, with the reason and their origin as
    headers.

    Parameters
    ----------
    max_raw_bytes : int
        Longest raw value kept (header ``raw_bytes`` holds the full length, header
        ``raw_truncated`` is ``true`` when cut).
    """

    def __init__(self, handle: KafkaProducerHandle, topic: str, *,
                 max_raw_bytes: int = 65536) -> None:
        super().__init__(handle, topic)
        self.max_raw_bytes = max_raw_bytes

    def write_dead_letter(self, raw: bytes, reason: str, detail: str,
                          position: dict[str, Any]) -> None:
        """Queue one rejected record."""
        headers = [("reason", reason.encode()), ("detail", detail.encode("utf-8", "replace"))]
        headers.extend((f"source_{name}", str(value).encode("utf-8", "replace"))
                       for name, value in position.items())
        kept = raw[: self.max_raw_bytes]
        headers.append(("raw_bytes", str(len(raw)).encode()))
        if len(kept) < len(raw):
            headers.append(("raw_truncated", b"true"))
        self._enqueue((position_key(position), kept, headers))


class ModelKafkaSink(KafkaTopicSink):
    """The current model, keyed by its step; a newer model replaces an unsent older one."""

    def publish(self, data: bytes, version: int) -> None:
        """Queue one model (dropping a queued one that was not handed over yet)."""
        self._pending.clear()
        self._pending_seqs.clear()
        self._enqueue((str(int(version)).encode(), data, []))


def kafka_sinks_from_config(sinks: Any, kafka: Any, metrics: Any = None
                            ) -> tuple[AssignmentKafkaSink | None, EventKafkaSink | None,
                                       DeadLetterKafkaSink, ModelKafkaSink | None,
                                       KafkaOutputTransaction | None]:
    """The assignments, events, dead-letter and model Kafka sinks of the ``[sinks]`` (kind
    ``"kafka"``) and ``[kafka]`` sections, sharing one producer, and that producer's
    transaction when ``kafka.transactional_id`` is set (on the client ``kafka.client``)."""
    handle = _producer_handle(sinks, kafka, metrics)
    assignments = (AssignmentKafkaSink(handle, sinks.assignments_topic)
                   if sinks.assignments_topic else None)
    events = EventKafkaSink(handle, sinks.events_topic) if sinks.events_topic else None
    dead_letter = DeadLetterKafkaSink(handle, sinks.dead_letter_topic,
                                      max_raw_bytes=sinks.dead_letter_max_raw_bytes)
    model = ModelKafkaSink(handle, sinks.model_topic) if sinks.model_topic else None
    transaction = handle if isinstance(handle, KafkaOutputTransaction) else None
    return assignments, events, dead_letter, model, transaction


def _producer_handle(sinks: Any, kafka: Any, metrics: Any) -> KafkaProducerHandle:
    """The producer the sinks share: transactional when ``kafka.transactional_id`` is set."""
    transactional = kafka.transactional_id is not None
    cls = KafkaOutputTransaction if transactional else KafkaProducerHandle
    extra: dict[str, Any] = (
        {"check_interval_s": kafka.transaction_check_interval_ms / 1000.0}
        if transactional else {})
    if kafka.client == "confluent":
        from .confluent_producer import confluent_sink_handle

        return confluent_sink_handle(cls, sinks, kafka, metrics, **extra)
    settings = {"linger_ms": 5, "max_block_ms": 1000, **kafka.client_settings(),
                **kafka.producer}
    if transactional:
        settings.update(transactional_id=kafka.transactional_id,
                        transaction_timeout_ms=kafka.transaction_timeout_ms)
    return cls(settings, flush_timeout_s=sinks.flush_timeout_ms / 1000.0, metrics=metrics,
               **extra)
