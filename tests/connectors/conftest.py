"""Fixtures of the connector tests."""

from __future__ import annotations

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
