"""Kafka plumbing of scale-out mode: the updates topic, the model topic, leader election.

* **Updates topic** (1 partition, so the leader sees one total order): workers produce
  fences and updates with ``acks="all"`` and one request in flight (no reordering on
  retries); the leader reads it with an assigned (group-less) consumer from the offset after
  the last one its model version reflects.
* **Model topic** (1 partition, ``cleanup.policy=compact``): each version is split into
  chunks of at most ``chunk_bytes`` (so a large model fits under the broker's message size
  limit) with headers ``version``, ``chunk``, ``chunks`` and ``sha256`` of the whole. Keys
  are ``slot<version % 2>-<chunk>``: compaction keeps the two newest versions' chunks, and a
  leader dying half-way through a publication can only damage the slot of the version
  before the last, never the last complete one. Readers keep the newest complete version.
  Every version is a full snapshot, so a starting reader does not read the topic from its
  beginning: it reads windows backwards from the end until it holds a complete version
  (:meth:`ModelReader.read_to_end`), in time independent of the versions ever published.
* **Leader election**: a second consumer group (``<group>-leader``) on a 1-partition
  coordination topic; the member holding its partition 0 is the leader. The group's own
  assignor keeps partition 0 with the member that holds it (it says so when it joins), so a
  member joining or leaving moves the role only when the leader itself left or was evicted
  (dead, or cut off longer than the session timeout), and a revocation before a rebalance
  is not a step-down. The updates topic's leader claims fence a replaced leader
  (``streamkm.scaleout.leader_role``).

Broker outages: the clients never raise from their polling methods (transport errors are
logged, rate-limited, and read as "nothing arrived"); sends return futures that fail only
after the producer's ``delivery_timeout_ms``; :meth:`connected` of each class reads the
client's own ``connection-count`` metric. :class:`KafkaScaleoutTransport` builds them for a
member (``streamkm.scaleout.worker``), which retries with backoff and keeps the ledger's rules
on every send whose outcome is unknown; kafka-python's errors reach it as ``TransportError``
or ``ConfigError``.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kafka import ConsumerRebalanceListener
from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor

from streamkm.exceptions import ConfigError, StateError, TransportError
from streamkm.logs import log_event

from .kafka_common import broker_connected, part_key, silence_kafka_python_logs, split_part_key

__all__ = ["UpdatesProducer", "UpdatesReader", "ModelPublisher", "ModelReader",
           "LeaderElection", "BrokerProbe", "ensure_topics", "KafkaScaleoutTransport",
           "TRANSPORT_ERRORS"]

_log = logging.getLogger("streamkm.scaleout")


def _transport_errors() -> tuple[type[BaseException], ...]:
    from kafka.errors import KafkaError

    return (KafkaError, OSError)


#: What a broker outage raises from kafka-python calls (retried by the callers).
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = _transport_errors()


@contextmanager
def _translated(what: str) -> Iterator[None]:
    """Raise kafka-python's errors as streamkm's: invalid client settings as
    :class:`ConfigError` (never retried), transport failures as :class:`TransportError`."""
    from kafka.errors import KafkaConfigurationError

    try:
        yield
    except KafkaConfigurationError as exc:
        raise ConfigError(f"invalid Kafka client settings for scale-out mode: {exc}") from exc
    except TRANSPORT_ERRORS as exc:
        raise TransportError(f"{what}: {type(exc).__name__}: {exc}") from exc


class _RateLimitedLog:
    """Logs a recurring transport error at most every ``every_s`` seconds."""

    def __init__(self, event: str, every_s: float = 5.0) -> None:
        self._event = event
        self._every_s = every_s
        self._last = -1e18
        self.suppressed = 0

    def __call__(self, exc: BaseException, **fields: Any) -> None:
        now = time.monotonic()
        if now - self._last < self._every_s:
            self.suppressed += 1
            return
        self._last = now
        log_event(_log, "warning", self._event, error=f"{type(exc).__name__}: {exc}",
                  suppressed=self.suppressed, **fields)
        self.suppressed = 0


def ensure_topics(client_settings: dict[str, Any], topics: dict[str, dict[str, str]]) -> None:
    """Create the single-partition scale-out topics that do not exist yet (``topics``: name ->
    topic configs). A broker that refuses the configs gets the topic without them."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    admin = KafkaAdminClient(**{k: v for k, v in client_settings.items()
                                if k in KafkaAdminClient.DEFAULT_CONFIG})
    try:
        existing = set(admin.list_topics())
        for name, configs in topics.items():
            if name in existing:
                continue
            for attempt in (configs, {}):
                try:
                    admin.create_topics([NewTopic(name, 1, 1, topic_configs=attempt)])
                    break
                except TopicAlreadyExistsError:
                    break
                except KafkaError as exc:
                    if not attempt:
                        raise
                    log_event(_log, "warning", "scaleout_topic_config_refused", topic=name,
                              configs=attempt, error=repr(exc))
        deadline = time.monotonic() + 20
        while not set(topics) <= set(admin.list_topics()):
            if time.monotonic() > deadline:
                raise StateError(f"scale-out topics {sorted(topics)!r} did not appear")
            time.sleep(0.05)
    finally:
        admin.close()


def _producer(settings: dict[str, Any], **extra: Any) -> Any:
    from kafka import KafkaProducer

    silence_kafka_python_logs()
    known = KafkaProducer.DEFAULT_CONFIG
    # max_block_ms bounds how long send() may block (metadata unknown, buffer full) while
    # the broker is away; delivery failures surface later through the futures.
    return KafkaProducer(**{"linger_ms": 2, "max_block_ms": 5000,
                            **{k: v for k, v in settings.items() if k in known},
                            "acks": "all", "max_in_flight_requests_per_connection": 1,
                            "retries": 2**31 - 1, **extra})


def _assigned_consumer(settings: dict[str, Any], topic: str, **extra: Any) -> tuple[Any, Any]:
    from kafka import KafkaConsumer, TopicPartition

    silence_kafka_python_logs()
    known = KafkaConsumer.DEFAULT_CONFIG
    consumer = KafkaConsumer(**{k: v for k, v in settings.items() if k in known},
                             group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", **extra)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    return consumer, tp


class _TopicProducer:
    """A producer to one topic: its flush, connection state and close."""

    topic: str
    _producer: Any

    def flush(self, timeout_s: float) -> None:
        """Wait until every message handed over is acknowledged or failed."""
        with _translated(f"flush to {self.topic!r}"):
            self._producer.flush(timeout=timeout_s)

    def connected(self) -> bool:
        """True while the producer holds a broker connection."""
        return broker_connected(self._producer, "producer-metrics")

    def close(self) -> None:
        self._producer.close(timeout=5)


class UpdatesProducer(_TopicProducer):
    """Sends encoded fences and updates to partition 0 of the updates topic."""

    def __init__(self, settings: dict[str, Any], topic: str, *, max_request_bytes: int) -> None:
        self.topic = topic
        self._producer = _producer(settings, max_request_size=max_request_bytes)

    def send(self, data: bytes, *, key: bytes | None = None) -> Any:
        """Queue one message; returns the future (its ``.get()`` gives the record metadata).

        Raises
        ------
        TransportError
            Not queued (metadata unavailable or buffer full while the broker is away).
        """
        with _translated(f"send to {self.topic!r}"):
            return self._producer.send(self.topic, value=data, key=key, partition=0)


class UpdatesReader:
    """Reads the updates topic from a given offset (no consumer group)."""

    def __init__(self, settings: dict[str, Any], topic: str, start_offset: int, *,
                 max_fetch_bytes: int) -> None:
        self._consumer, self._tp = _assigned_consumer(
            settings, topic, max_partition_fetch_bytes=max_fetch_bytes,
            fetch_max_bytes=max(max_fetch_bytes, 52428800))
        self._consumer.seek(self._tp, int(start_offset))
        self._log_error = _RateLimitedLog("scaleout_updates_poll_failed")

    def poll(self, timeout_s: float, max_records: int) -> list[tuple[int, bytes]]:
        """Up to ``max_records`` ``(offset, value)`` pairs, in offset order (none while the
        broker is away: transport errors are logged, never raised)."""
        try:
            fetched = self._consumer.poll(timeout_ms=int(timeout_s * 1000),
                                          max_records=max_records)
        except (*TRANSPORT_ERRORS, ValueError) as exc:
            self._log_error(exc, topic=self._tp.topic)
            return []
        return [(m.offset, m.value) for m in fetched.get(self._tp, [])]

    def lag(self) -> int | None:
        """Messages between the read position and the high watermark (None if unknown)."""
        try:
            high = self._consumer.highwater(self._tp)
            return None if high is None else max(0, high - self._consumer.position(
                self._tp, timeout_ms=0))
        except (*TRANSPORT_ERRORS, ValueError, TypeError):
            return None

    def connected(self) -> bool:
        """True while the consumer holds a broker connection."""
        return broker_connected(self._consumer, "consumer-metrics")

    def close(self) -> None:
        self._consumer.close(autocommit=False)


class ModelPublisher(_TopicProducer):
    """Publishes encoded model versions, chunked, to partition 0 of the model topic."""

    def __init__(self, settings: dict[str, Any], topic: str, *, chunk_bytes: int) -> None:
        self.topic = topic
        self.chunk_bytes = int(chunk_bytes)
        self._producer = _producer(settings, max_request_size=self.chunk_bytes + (64 << 10))

    def send_version(self, version: int, data: bytes) -> list[Any]:
        """Hand every chunk of ``data`` to the producer; the futures, one per chunk (a
        version is delivered when all of them succeeded)."""
        digest = hashlib.sha256(data).hexdigest().encode()
        chunks = [data[i:i + self.chunk_bytes] for i in range(0, len(data), self.chunk_bytes)]
        futures = []
        for i, chunk in enumerate(chunks):
            headers = [("version", str(version).encode()), ("chunk", str(i).encode()),
                       ("chunks", str(len(chunks)).encode()), ("sha256", digest)]
            with _translated(f"publish to {self.topic!r}"):
                futures.append(self._producer.send(self.topic, value=chunk, partition=0,
                                                   key=f"slot{version % 2}-{i}".encode(),
                                                   headers=headers))
        return futures


class ModelReader:
    """Follows the model topic and reassembles the newest complete version.

    ``on_version(version, data)`` is called for each complete version newer than the last
    one delivered (older or torn ones are ignored).
    """

    def __init__(self, settings: dict[str, Any], topic: str, *, max_fetch_bytes: int,
                 on_version: Callable[[int, bytes], None], from_tail: bool = True) -> None:
        self._consumer, self._tp = _assigned_consumer(
            settings, topic, max_partition_fetch_bytes=max_fetch_bytes,
            fetch_max_bytes=max(max_fetch_bytes, 52428800))
        self._consumer.seek_to_beginning(self._tp)
        self._on_version = on_version
        self._partial: dict[int, dict[int, bytes]] = {}
        self.latest_version = -1
        self.torn = 0
        self._log_error = _RateLimitedLog("scaleout_model_poll_failed")
        self._from_tail = from_tail
        self.messages_read = 0

    def poll(self, timeout_s: float) -> int:
        """Read what arrived; returns the number of messages read (0 while the broker is
        away: transport errors are logged, never raised)."""
        try:
            fetched = self._consumer.poll(timeout_ms=int(timeout_s * 1000))
        except (*TRANSPORT_ERRORS, ValueError) as exc:
            self._log_error(exc, topic=self._tp.topic)
            time.sleep(min(timeout_s, 0.1))
            return 0
        messages = fetched.get(self._tp, [])
        for msg in messages:
            self._accept(msg)
        self.messages_read += len(messages)
        return len(messages)

    def connected(self) -> bool:
        """True while the consumer holds a broker connection."""
        return broker_connected(self._consumer, "consumer-metrics")

    def read_to_end(self, timeout_s: float) -> None:
        """Poll until the position reached the high watermark and two polls came back empty
        (Tansu's ListOffsets(latest) is not reliable enough to ask for the end directly).

        The first call (``from_tail``, the default) starts near the end instead of the
        beginning: see :meth:`_seek_latest_version`.

        Raises
        ------
        StateError
            Not done within ``timeout_s`` (e.g. the broker is away).
        """
        deadline = time.monotonic() + timeout_s
        if self._from_tail:
            self._seek_latest_version(deadline)
            self._from_tail = False
        idle = 0
        target: int | None = None  # the end when the read started
        while idle < 2:
            n = self.poll(0.2)
            try:
                high = self._consumer.highwater(self._tp)
                position = self._consumer.position(
                    self._tp, timeout_ms=int(max(0.0, deadline - time.monotonic()) * 1000))
                at_end = high is not None and position >= high
            except (*TRANSPORT_ERRORS, ValueError, TypeError):
                high, position, at_end = -1, -1, False  # unknown: not the end
            if target is None and high is not None and high >= 0:
                target = high
            if target is not None and position >= target:
                break  # a leader publishing faster than two empty polls never goes idle
            idle = idle + 1 if (n == 0 and (at_end or high is None)) else 0
            if time.monotonic() > deadline:
                raise StateError(f"could not read the model topic to its end within "
                                 f"{timeout_s} s")

    def _seek_latest_version(self, deadline: float, first_window: int = 16) -> None:
        """Read windows of the topic backwards from its end until a complete version was
        delivered (or the beginning is reached); leave the position after everything read.

        Every version is a full snapshot and replay from any of them is deterministic, so the
        first complete one found is a valid start (normally the newest: versions are
        published in order); the windows grow fourfold, so the messages read are bounded by a
        small multiple of one version's chunks, whatever the topic's length.
        """
        end = self._end_offset(deadline)
        hi, window, before = end, max(1, first_window), self.latest_version
        while hi > 0 and self.latest_version == before:
            lo = max(0, hi - window)
            self._consumer.seek(self._tp, lo)
            self._read_until(hi, deadline)
            hi, window = lo, window * 4
        self._consumer.seek(self._tp, end)

    def _end_offset(self, deadline: float) -> int:
        """The end offset (the high watermark after one fetch from the beginning)."""
        while True:
            try:  # one bounded fetch (its records are not needed) reports the high watermark
                self._consumer.poll(timeout_ms=200, max_records=1)
            except (*TRANSPORT_ERRORS, ValueError) as exc:
                self._log_error(exc, topic=self._tp.topic)
            high = self._consumer.highwater(self._tp)
            if high is not None:
                return int(high)
            if time.monotonic() > deadline:
                raise StateError("could not learn the end of the model topic")

    def _read_until(self, offset: int, deadline: float) -> None:
        """Read until the position reached ``offset``."""
        while True:
            try:
                if self._consumer.position(self._tp, timeout_ms=1000) >= offset:
                    return
            except (*TRANSPORT_ERRORS, ValueError, TypeError):
                pass
            if time.monotonic() > deadline:
                raise StateError(f"could not read the model topic up to offset {offset}")
            self.poll(0.2)

    def _accept(self, msg: Any) -> None:
        headers = {k: v for k, v in (msg.headers or ())}
        try:
            version = int(headers["version"])
            chunk, chunks = int(headers["chunk"]), int(headers["chunks"])
            digest = headers["sha256"].decode()
        except (KeyError, ValueError, AttributeError):
            self.torn += 1
            return
        if version <= self.latest_version:
            return
        parts = self._partial.setdefault(version, {})
        parts[chunk] = msg.value
        if len(parts) < chunks:
            return
        data = b"".join(parts[i] for i in range(chunks))
        for old in [v for v in self._partial if v <= version]:
            del self._partial[old]
        if hashlib.sha256(data).hexdigest() != digest:
            self.torn += 1
            log_event(_log, "warning", "scaleout_model_version_torn", version=version)
            return
        self.latest_version = version
        self._on_version(version, data)

    def close(self) -> None:
        self._consumer.close(autocommit=False)


class _KeepLeaderAssignor(AbstractPartitionAssignor):
    """Assigns partition 0 of the coordination topic to a member that says it holds it (the
    leader keeps it through every rebalance it survives), else to the first member by id.

    A member says so in its subscription's user data (``b"1"``) while its election believes
    it leads. A member evicted while cut off learns it lost the group (``on_partitions_lost``)
    before it can join again, so it never claims the partition back from its successor.
    """

    name = "streamkm-keep-leader"
    version = 0

    def __init__(self, election: LeaderElection) -> None:
        self._election = election

    def metadata(self, topics: Any) -> Any:
        from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

        return ConsumerProtocolSubscription(
            self.version, sorted(topics), b"1" if self._election.is_leader else b"0")

    def assign(self, cluster: Any, members: Any) -> dict[str, Any]:
        from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

        holders = sorted(m.member_id for m in members if m.metadata.user_data == b"1")
        chosen = (holders or sorted(m.member_id for m in members))[0]
        return {m.member_id: ConsumerProtocolAssignment(
                    self.version,
                    [(t, [0]) for t in sorted(m.metadata.topics)] if m.member_id == chosen
                    else [], b"")
                for m in members}

    def on_assignment(self, assignment: Any, generation: Any) -> None:
        """Nothing to remember: the election's flag is the state."""


class _ElectionListener(ConsumerRebalanceListener):
    """Eager protocol: every rebalance revokes everything before the join, so a revocation
    changes nothing (the leader keeps working and says it holds the partition); the
    assignment that follows decides. A lost membership ends the role at once."""

    def __init__(self, election: LeaderElection) -> None:
        self._election = election

    def on_partitions_revoked(self, revoked: Any) -> None:
        """Decided by the next assignment."""

    def on_partitions_lost(self, lost: Any) -> None:
        self._election._set(False)

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._election._set(any(tp.partition == 0 for tp in assigned))


class LeaderElection:
    """Membership of the leader group; :attr:`is_leader` while holding partition 0.

    The group's consumer lives on its own thread, polling with a timeout long enough for
    joins to complete (kafka-python cannot finish a join within a zero-timeout poll); the
    rebalance listener flips :attr:`is_leader`, which the service reads between batches.
    """

    def __init__(self, settings: dict[str, Any], topic: str, group_id: str, *,
                 poll_timeout_s: float = 0.2) -> None:
        silence_kafka_python_logs()
        self._settings = settings
        self._topic = topic
        self._group_id = group_id
        self._poll_timeout_s = poll_timeout_s
        self.is_leader = False
        self.changes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streamkm-leader-election",
                                        daemon=True)
        self._thread.start()

    def _set(self, leader: bool) -> None:
        if leader != self.is_leader:
            self.changes += 1
        self.is_leader = leader

    def _run(self) -> None:
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        known = KafkaConsumer.DEFAULT_CONFIG
        consumer = None
        while not self._stop.is_set():
            try:
                if consumer is None:
                    consumer = KafkaConsumer(
                        **{k: v for k, v in self._settings.items() if k in known},
                        group_id=self._group_id, enable_auto_commit=False,
                        partition_assignment_strategy=(_KeepLeaderAssignor(self),))
                    consumer.subscribe([self._topic], listener=_ElectionListener(self))
                consumer.poll(timeout_ms=int(self._poll_timeout_s * 1000), max_records=1)
            except (KafkaError, OSError, ValueError) as exc:
                # not a step-down: the group decides (a lost membership calls the listener)
                log_event(_log, "warning", "scaleout_election_poll_failed", error=repr(exc))
                self._stop.wait(0.5)
        self._set(False)
        if consumer is not None:
            try:
                consumer.close(autocommit=False, timeout_ms=5000)
            except Exception as exc:  # noqa: BLE001
                log_event(_log, "warning", "scaleout_election_close_failed", error=repr(exc))

    def poll(self) -> None:
        """Nothing to do: the election thread runs the group protocol."""

    def close(self) -> None:
        """Leave the group (another member becomes leader)."""
        self._stop.set()
        self._thread.join(timeout=10)
        self.is_leader = False


class BrokerProbe:
    """Whether the broker answers: one metadata request per call on a client of its own,
    with a short request timeout. A held TCP connection survives a silent cut (no FIN, no
    RST: a link down, a partition), so only a request that times out reveals it.

    Parameters
    ----------
    settings : dict
        Client settings (bootstrap servers, security).
    timeout_s : float
        Longest wait for the answer.
    """

    def __init__(self, settings: dict[str, Any], timeout_s: float) -> None:
        silence_kafka_python_logs()
        self._settings = settings
        self._timeout_ms = max(100, int(timeout_s * 1000))
        self._consumer: Any = None

    def reachable(self) -> bool:
        """True if the broker answered a metadata request within the timeout. A client
        whose request failed is dropped (the next call connects afresh)."""
        from kafka import KafkaConsumer
        from kafka.errors import KafkaConfigurationError

        try:
            if self._consumer is None:
                known = KafkaConsumer.DEFAULT_CONFIG
                self._consumer = KafkaConsumer(**{
                    **{k: v for k, v in self._settings.items() if k in known},
                    "group_id": None, "enable_auto_commit": False,
                    "request_timeout_ms": self._timeout_ms,
                    "bootstrap_timeout_ms": self._timeout_ms})
            self._consumer.topics()
            return True
        except KafkaConfigurationError:
            raise
        except (*TRANSPORT_ERRORS, ValueError):
            self.close()
            return False

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close(autocommit=False)
            except Exception:  # noqa: BLE001 - closing a failed client must not raise
                pass


class KafkaScaleoutTransport:
    """The Kafka clients of one scale-out process (a
    :class:`streamkm.scaleout.transport.ScaleoutTransport`), built from its configuration.

    Parameters
    ----------
    config : ServiceConfig
        With a Kafka ``[source]``, ``[kafka]`` and ``[scaleout]``.
    """

    def __init__(self, config: Any) -> None:
        self._config = config
        self._client = config.kafka.client_settings()
        self._consumer = {**self._client, **config.kafka.consumer}
        self._producer = {**self._client, **config.kafka.producer}
        sc = config.scaleout
        self._fetch_bytes = max(sc.model_chunk_bytes, sc.max_update_bytes) + (64 << 10)

    def ensure_topics(self) -> None:
        sc = self._config.scaleout
        with _translated("create the scale-out topics"):
            ensure_topics(self._client, {sc.updates_topic: {}, sc.coordination_topic: {},
                                         sc.model_topic: {"cleanup.policy": "compact"}})

    def updates_sender(self) -> UpdatesProducer:
        sc = self._config.scaleout
        with _translated("connect the updates producer"):
            return UpdatesProducer(self._producer, sc.updates_topic,
                                   max_request_bytes=sc.max_update_bytes)

    def updates_reader(self, start_offset: int) -> UpdatesReader:
        with _translated("connect the updates reader"):
            return UpdatesReader(self._consumer, self._config.scaleout.updates_topic,
                                 start_offset, max_fetch_bytes=self._fetch_bytes)

    def model_publisher(self) -> ModelPublisher:
        sc = self._config.scaleout
        with _translated("connect the model publisher"):
            return ModelPublisher(self._producer, sc.model_topic,
                                  chunk_bytes=sc.model_chunk_bytes)

    def model_reader(self, on_version: Callable[[int, bytes], None]) -> ModelReader:
        with _translated("connect the model reader"):
            return ModelReader(self._consumer, self._config.scaleout.model_topic,
                               max_fetch_bytes=self._fetch_bytes, on_version=on_version)

    def broker_probe(self, timeout_s: float) -> BrokerProbe:
        return BrokerProbe(self._client, timeout_s)

    def leader_election(self) -> LeaderElection:
        src = self._config.source
        return LeaderElection(
            {**self._consumer, "session_timeout_ms": src.session_timeout_ms,
             "heartbeat_interval_ms": src.heartbeat_interval_ms,
             "max_poll_interval_ms": src.max_poll_interval_ms},
            self._config.scaleout.coordination_topic, f"{src.group_id}-leader")

    def part_key(self, position: dict[str, Any]) -> str:
        return part_key(position["topic"], position["partition"])

    def resume_state(self, key: str, offset: int) -> dict[str, Any]:
        topic, number = split_part_key(key)
        return {"version": 1, "topic": topic, "partition": number, "offset": int(offset)}
