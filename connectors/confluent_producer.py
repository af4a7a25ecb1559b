"""The Kafka sinks' producer on confluent-kafka (``[kafka] client = "confluent"``).

:class:`ConfluentProducer` gives a librdkafka producer the few calls the sinks' shared
producer handle makes of a kafka-python ``KafkaProducer`` (``send`` returning a future,
``flush`` raising when not everything was acknowledged in time, the transactional calls,
``metrics``, ``close``), so the sinks, their retries, keys, dead letters, transactions and
fencing are one implementation for both clients (:mod:`streamkm_connectors.kafka_sinks`).

Delivery reports arrive in librdkafka's callbacks, which run inside ``poll``/``flush`` on
the calling thread: ``send`` serves the ready ones, and a future that is not done yet serves
them when asked.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from streamkm.logs import log_event

from .confluent_common import BrokerStates, common_properties, confluent_failure, import_confluent

__all__ = ["ConfluentProducer", "DeliveryFuture", "confluent_producer_properties",
           "confluent_sink_handle"]

_log = logging.getLogger("streamkm.kafka")


class DeliveryFuture:
    """The delivery of one message: done once the broker acknowledged or refused it."""

    __slots__ = ("_owner", "_done", "exception")

    def __init__(self, owner: ConfluentProducer) -> None:
        self._owner = owner
        self._done = False
        #: The delivery error (``KafkaException``), ``None`` if delivered or not done.
        self.exception: BaseException | None = None

    def _report(self, err: Any, _msg: Any) -> None:
        if err is not None:
            from confluent_kafka import KafkaException

            self.exception = KafkaException(err)
        self._done = True

    @property
    def is_done(self) -> bool:
        """Acknowledged or refused (serves the producer's ready delivery reports first)."""
        if not self._done:
            self._owner.serve()
        return self._done

    def succeeded(self) -> bool:
        """Done and acknowledged."""
        return self._done and self.exception is None

    def failed(self) -> bool:
        """Done and refused."""
        return self._done and self.exception is not None


#: polls of 0.1 s for the error callback after a flush failed inside confluent-kafka
_FATAL_POLLS = 20


def _fenced(exc: BaseException) -> bool:
    """Whether ``exc`` leaves the producer unusable: a fatal error, or the broker's word
    that a newer producer took its transactional id (which librdkafka reports as abortable,
    but the abort's ``EndTxn`` is refused too)."""
    from confluent_kafka import KafkaError

    error = exc.args[0] if exc.args else None
    if not isinstance(error, KafkaError):
        return False
    return error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH)


class ConfluentProducer:
    """A confluent-kafka ``Producer`` with the calls the sinks make of a producer.

    Parameters
    ----------
    properties : dict
        librdkafka producer properties (``transactional.id`` for exactly-once outputs).
    timeout_s : float
        Longest wait of ``init_transactions`` for the transaction coordinator.
    """

    def __init__(self, properties: dict[str, Any], *, timeout_s: float = 30.0) -> None:
        ck = import_confluent()
        self._timeout_s = timeout_s
        self._fatal: BaseException | None = None  # a fatal error of the producer
        self._in_transaction = False  # begun, and neither committed nor aborted since
        self.states = BrokerStates("producer-metrics")
        self._producer = ck.Producer({**properties, "stats_cb": self.states.on_stats,
                                      "error_cb": self._on_error})

    def _on_error(self, error: Any) -> None:
        from confluent_kafka import KafkaError, KafkaException

        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.states.set_down()
        if error.fatal() and self._fatal is None:
            self._fatal = KafkaException(error)

    def _transactional(self, call: Any, *args: Any) -> None:
        """Run a transactional call; remember a fatal error (fenced: the producer can do
        nothing more, not even abort)."""
        from confluent_kafka import KafkaException

        if self._fatal is not None:
            raise self._fatal
        try:
            call(*args)
        except KafkaException as exc:
            if _fenced(exc):
                self._fatal = exc
            raise

    def serve(self) -> None:
        """Run the delivery callbacks that are ready (without waiting)."""
        self._producer.poll(0)

    def send(self, topic: str, *, value: bytes, key: bytes | None,
             headers: list[tuple[str, bytes]]) -> DeliveryFuture:
        """Queue one message; its :class:`DeliveryFuture`.

        Raises
        ------
        BufferError
            librdkafka's queue is full (the sink tries again later).
        KafkaException
            The message cannot be queued (e.g. the producer was fenced).
        """
        from confluent_kafka import KafkaException

        future = DeliveryFuture(self)
        try:
            self._producer.produce(topic, value=value, key=key, headers=headers or None,
                                   on_delivery=future._report)
        except KafkaException as exc:
            # a producer turned fatal refuses messages for its state (_STATE) alone: the
            # error callback or the transaction state names the cause
            self._producer.poll(0)
            if self._fatal is None:
                self._fatal = self._transaction_error()
            if self._fatal is not None and self._fatal is not exc:
                raise self._fatal from exc
            raise
        self._producer.poll(0)
        return future

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every queued message is acknowledged or refused.

        Raises
        ------
        TimeoutError
            Messages are still waiting after ``timeout`` seconds.
        KafkaException
            The producer hit a fatal error (e.g. it was fenced).
        """
        try:
            left = self._producer.flush(timeout if timeout is not None else -1)
        except (KeyboardInterrupt, SystemExit):
            raise
        except:  # noqa: E722 - confluent-kafka can raise a KafkaError, which is no Exception
            # when the producer turns fatal (fenced) during the call, confluent-kafka raises
            # the bare KafkaError or loses the error (SystemError: "returned NULL without
            # setting an exception"): the transaction state, then the error callback, name it
            caught = sys.exc_info()[1]
            if self._fatal is None:
                self._fatal = self._transaction_error()
            for _ in range(0 if self._fatal is not None else _FATAL_POLLS):
                try:
                    self._producer.poll(0.1)
                except Exception as exc:  # noqa: BLE001 - the fatal error, raised by poll
                    self._fatal = exc
                if self._fatal is not None:
                    break
            if self._fatal is None:
                if isinstance(caught, Exception):
                    raise
                from confluent_kafka import KafkaException

                self._fatal = KafkaException(caught)
            raise self._fatal from None
        if left:
            raise TimeoutError(f"{left} messages not acknowledged within {timeout!r} s")

    def _transaction_error(self) -> BaseException | None:
        """The error that keeps the open transaction from completing, or ``None``.

        librdkafka checks its transaction state before every transactional call: inside a
        healthy transaction ``begin_transaction`` is refused for the state alone and changes
        nothing; after a fence or another fatal or abort-requiring error it raises that
        error, which names the cause."""
        from confluent_kafka import KafkaError, KafkaException

        if not self._in_transaction:
            return None
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and (error.fatal() or error.txn_requires_abort()):
                return exc
        return None

    def metrics(self) -> dict[str, dict[str, float]]:
        """``{"producer-metrics": {"connection-count": n}}`` (brokers connected)."""
        return self.states.metrics()

    # ------------------------------------------------------------------ transactions

    def init_transactions(self) -> None:
        """Register the transactional id with its coordinator (fences earlier producers)."""
        self._transactional(self._producer.init_transactions, self._timeout_s)

    def begin_transaction(self) -> None:
        """Start a transaction."""
        self._transactional(self._producer.begin_transaction)
        self._in_transaction = True

    def send_offsets_to_transaction(self, offsets: dict[Any, Any], group: Any) -> None:
        """Add the consumed ``offsets`` (``{(topic, partition): offset}``) of ``group`` (the
        consumer's group metadata) to the open transaction."""
        from confluent_kafka import TopicPartition

        positions = [TopicPartition(tp[0], tp[1], int(getattr(om, "offset", om)))
                     for tp, om in offsets.items()]
        self._transactional(self._producer.send_offsets_to_transaction, positions, group)

    def commit_transaction(self) -> None:
        """Commit the open transaction."""
        self._transactional(self._producer.commit_transaction)
        self._in_transaction = False

    def abort_transaction(self) -> None:
        """Abort the open transaction."""
        self._transactional(self._producer.abort_transaction)
        self._in_transaction = False

    def close(self, timeout: float = 0) -> None:
        """Deliver what is queued within ``timeout`` seconds; with ``timeout=0`` drop it
        (its deliveries fail), then release the client."""
        try:
            if timeout and timeout > 0:
                self._producer.flush(timeout)
            else:
                self._producer.purge()
                self._producer.flush(0)
        except Exception as exc:  # noqa: BLE001 - a closing producer must not raise
            log_event(_log, "warning", "kafka_producer_close_failed", error=repr(exc))
        # librdkafka's close aborts an open transaction first and waits for the coordinator
        # without a bound (a fenced producer's EndTxn may never be answered): it runs on a
        # daemon thread, left behind after the wait.
        closer = threading.Thread(target=self._close_quietly, daemon=True,
                                  name="streamkm-kafka-producer-close")
        closer.start()
        closer.join(max(timeout or 0.0, 1.0))
        if closer.is_alive():
            log_event(_log, "warning", "kafka_producer_close_failed",
                      error="librdkafka did not close the producer within "
                            f"{max(timeout or 0.0, 1.0)!r} s; left closing")

    def _close_quietly(self) -> None:
        try:
            self._producer.close()
        except Exception:  # noqa: BLE001 - already closed
            pass


def confluent_producer_properties(sinks: Any, kafka: Any) -> dict[str, Any]:
    """librdkafka producer properties of the ``[sinks]`` and ``[kafka]`` sections."""
    # murmur2: the partition of a key is kafka-python's (and the Java client's)
    props: dict[str, Any] = {"linger.ms": 5, "partitioner": "murmur2_random",
                             **common_properties(kafka),
                             "message.timeout.ms": max(sinks.flush_timeout_ms, 1000)}
    if kafka.transactional_id is not None:
        props.update({"transactional.id": kafka.transactional_id,
                      "transaction.timeout.ms": kafka.transaction_timeout_ms})
    props.update(kafka.producer)
    return props


def confluent_sink_handle(handle_class: Any, sinks: Any, kafka: Any, metrics: Any,
                          **kwargs: Any) -> Any:
    """A :class:`~streamkm_connectors.kafka_sinks.KafkaProducerHandle` (or its
    transactional subclass ``handle_class``) over a :class:`ConfluentProducer`."""
    props = confluent_producer_properties(sinks, kafka)
    settings = {"transactional_id": kafka.transactional_id,
                "reconnect_backoff_ms": kafka.reconnect_backoff_ms,
                "reconnect_backoff_max_ms": kafka.reconnect_backoff_max_ms}
    return handle_class(settings, flush_timeout_s=sinks.flush_timeout_ms / 1000.0,
                        metrics=metrics, producer_factory=lambda **_: ConfluentProducer(
                            props, timeout_s=sinks.flush_timeout_ms / 1000.0),
                        classify=confluent_failure, **kwargs)
