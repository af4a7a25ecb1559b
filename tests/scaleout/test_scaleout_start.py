"""Bounded start against the real (Tansu) broker, which never compacts: a model-topic reader
reaches the newest complete version by reading a few windows back from the end, however many
versions were ever published, and skips a torn (half-published) newest version."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.helpers.kafka_broker import TansuBroker, create_topics

from streamkm_connectors.scaleout_kafka import ModelPublisher, ModelReader

pytestmark = [pytest.mark.kafka]

CHUNK = 4096


def payload(version: int) -> bytes:
    """Three chunks, different per version."""
    return np.random.default_rng(version).bytes(2 * CHUNK + 100)


def publish(bootstrap: str, topic: str, versions: range) -> None:
    publisher = ModelPublisher({"bootstrap_servers": [bootstrap]}, topic, chunk_bytes=CHUNK)
    try:
        futures = [f for v in versions for f in publisher.send_version(v, payload(v))]
        publisher.flush(30)
        assert all(f.is_done and not f.failed() for f in futures)
    finally:
        publisher.close()


def read(bootstrap: str, topic: str, *, from_tail: bool) -> tuple[list[int], ModelReader]:
    seen: list[int] = []

    def on_version(version: int, data: bytes) -> None:
        assert data == payload(version)
        seen.append(version)

    reader = ModelReader({"bootstrap_servers": [bootstrap]}, topic, max_fetch_bytes=1 << 20,
                         on_version=on_version, from_tail=from_tail)
    reader.read_to_end(timeout_s=30)
    return seen, reader


def test_start_reads_a_bounded_tail_of_a_long_model_topic(kafka_broker: TansuBroker) -> None:
    bootstrap, topic = kafka_broker.bootstrap, "start-long-model"
    create_topics(bootstrap, {topic: 1})
    publish(bootstrap, topic, range(1, 301))  # 900 messages
    seen, reader = read(bootstrap, topic, from_tail=True)
    try:
        # the complete versions of the last window, in order, not the 300 versions
        assert seen[-1] == 300 and reader.latest_version == 300 and len(seen) <= 6
        assert reader.messages_read <= 3 * 16  # a window or two, not the 900 messages
        n_seen = len(seen)
        publish(bootstrap, topic, range(301, 303))  # and it keeps following
        while reader.latest_version < 302:
            reader.poll(0.2)
        assert seen[n_seen:] == [301, 302]
    finally:
        reader.close()
    seen_all, reader = read(bootstrap, topic, from_tail=False)
    reader.close()
    assert seen_all == list(range(1, 303)) and reader.messages_read == 906


def test_torn_newest_version_falls_back_to_the_previous_complete_one(
        kafka_broker: TansuBroker) -> None:
    bootstrap, topic = kafka_broker.bootstrap, "start-torn-model"
    create_topics(bootstrap, {topic: 1})
    publish(bootstrap, topic, range(1, 41))
    publisher: Any = ModelPublisher({"bootstrap_servers": [bootstrap]}, topic,
                                    chunk_bytes=CHUNK)
    try:  # version 41: only its first chunk (the leader died mid-publication)
        data = payload(41)
        publisher._producer.send(topic, value=data[:CHUNK], partition=0, key=b"slot1-0",
                                 headers=[("version", b"41"), ("chunk", b"0"), ("chunks", b"3"),
                                          ("sha256", b"0" * 64)])
        publisher.flush(30)
    finally:
        publisher.close()
    # windows of 1 message: the reader must go back across several windows
    seen: list[int] = []
    reader = ModelReader({"bootstrap_servers": [bootstrap]}, topic, max_fetch_bytes=1 << 20,
                         on_version=lambda v, d: seen.append(v))
    try:
        reader._seek_latest_version(deadline=float("inf"), first_window=1)
        assert seen == [40]
    finally:
        reader.close()
