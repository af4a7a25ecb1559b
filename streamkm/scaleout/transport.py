"""What scale-out mode needs from its message transport (implemented by a connector, e.g.
``streamkm_connectors.scaleout_kafka``; found through :mod:`streamkm.io.registry`).

Every method that talks to the broker raises :class:`~streamkm.exceptions.TransportError`
(retried by the caller) or :class:`~streamkm.exceptions.ConfigError` (invalid client
settings, never retried), never the client library's own errors. Polling methods never
raise for transport problems (nothing arrived). Sends are asynchronous and return
:class:`SendFuture` objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["SendFuture", "UpdatesSender", "UpdatesReader", "ModelPublisher", "ModelReader",
           "LeaderElection", "BrokerProbe", "ScaleoutTransport"]


class SendFuture(Protocol):
    """The outcome of one asynchronous send."""

    is_done: bool
    exception: BaseException | None

    def add_callback(self, fn: Callable[[Any], None]) -> Any:
        """``fn(metadata)`` once delivered (``metadata.offset``: the message's offset)."""
        ...

    def add_errback(self, fn: Callable[[BaseException], None]) -> Any:
        """``fn(exception)`` once delivery failed (outcome unknown: it may be in the topic)."""
        ...

    def failed(self) -> bool:
        """True once delivery failed."""
        ...


class UpdatesSender(Protocol):
    """Sends encoded fences and updates to the (single-partition) updates topic."""

    def send(self, data: bytes) -> SendFuture: ...

    def flush(self, timeout_s: float) -> None: ...

    def connected(self) -> bool: ...

    def close(self) -> None: ...


class UpdatesReader(Protocol):
    """Reads the updates topic from an offset (the leader)."""

    def poll(self, timeout_s: float, max_records: int) -> list[tuple[int, bytes]]: ...

    def lag(self) -> int | None: ...

    def close(self) -> None: ...


class ModelPublisher(Protocol):
    """Publishes encoded model versions (the leader)."""

    def send_version(self, version: int, data: bytes) -> list[SendFuture]: ...

    def flush(self, timeout_s: float) -> None: ...

    def close(self) -> None: ...


class ModelReader(Protocol):
    """Follows the model topic; calls its ``on_version(version, data)`` per new version."""

    def poll(self, timeout_s: float) -> int: ...

    def read_to_end(self, timeout_s: float) -> None:
        """Read to the end of the topic; :class:`~streamkm.exceptions.StateError` if not
        done within ``timeout_s``. A fresh reader starts near the end (every version is a
        full snapshot), so this takes the same time however many versions were published."""
        ...

    def connected(self) -> bool: ...

    def close(self) -> None: ...


class LeaderElection(Protocol):
    """Membership of the leader group; :attr:`is_leader` while this process leads."""

    is_leader: bool
    #: How often :attr:`is_leader` flipped (an assignment moved the role to or from us).
    changes: int

    def close(self) -> None: ...


class BrokerProbe(Protocol):
    """Asks the broker for an answer (a request, not just a held connection)."""

    def reachable(self) -> bool:
        """True if the broker answered within the probe's timeout (never raises for
        transport problems)."""
        ...

    def close(self) -> None: ...


class ScaleoutTransport(Protocol):
    """Builds the clients of one scale-out process and maps input positions to partitions."""

    def ensure_topics(self) -> None:
        """Create the updates, coordination and model topics if missing."""
        ...

    def updates_sender(self) -> UpdatesSender: ...

    def updates_reader(self, start_offset: int) -> UpdatesReader: ...

    def model_publisher(self) -> ModelPublisher: ...

    def model_reader(self, on_version: Callable[[int, bytes], None]) -> ModelReader: ...

    def leader_election(self) -> LeaderElection: ...

    def broker_probe(self, timeout_s: float) -> BrokerProbe:
        """A probe whose requests give up after ``timeout_s``."""
        ...

    def part_key(self, position: dict[str, Any]) -> str:
        """The input partition key of a record's position."""
        ...

    def resume_state(self, part_key: str, offset: int) -> dict[str, Any]:
        """The input partition snapshot that resumes ``part_key`` at ``offset``."""
        ...
