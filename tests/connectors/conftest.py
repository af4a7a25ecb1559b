"""Fixtures of the connector tests."""

from __future__ import annotations

from typing import Any

import pytest

#: The Kafka client libraries of ``[kafka] client``.
KAFKA_CLIENTS = ("kafka-python", "confluent")


@pytest.fixture(params=KAFKA_CLIENTS)
def kafka_client(request: pytest.FixtureRequest) -> str:
    """``[kafka] client`` of a test that runs once per Kafka client library (the broker is
    the same real one; give each run its own topics and groups, e.g. suffixed with
    :func:`client_tag`)."""
    return str(request.param)


def client_tag(client: str) -> str:
    """A short name of ``client`` for topic and group names."""
    return "kp" if client == "kafka-python" else "ck"


class PartitionBuilder:
    """The service's side of a Kafka source's assignments, in-process: builds every
    assigned partition fresh (no resume state), as the service does, into ``parts``."""

    def __init__(self, source: Any = None) -> None:
        self.source, self.parts = source, {}

    def on_assigned(self, keys: list[str]) -> None:
        for key in keys:
            self.parts[key] = self.source.build_part(key, None)

    def on_revoked(self, keys: list[str], *, lost: bool) -> None:
        for key in keys:
            self.parts.pop(key, None)
