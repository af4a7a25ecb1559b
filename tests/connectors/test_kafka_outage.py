"""Broker outages: the service starts before the broker is reachable, and later loses it.

Tansu keeps topics, offsets and groups in memory only, so a restarted broker would come back
empty. The broker therefore stays up and the outage is made by a TCP proxy in front of it
(Tansu advertises the proxy's address, so every client connection goes through it): the
proxy refuses connections before the broker "exists", then forwards, then drops every
connection and refuses new ones for longer than the session timeout, then forwards again. The service must keep running,
report the outage in its metrics and logs, and end with every record in the model once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers.kafka_broker import (
    TcpOutageProxy,
    create_topics,
    latest_checkpoint,
    model_count,
    produce,
    read_count,
    read_topic,
    start_tansu,
    valid_value,
    write_config,
)
from tests.helpers.processes import (
    count_events,
    free_port,
    kill,
    log_events,
    metrics_url,
    scrape,
    start_service,
    stop,
    wait_until,
)

pytestmark = pytest.mark.kafka

TOPIC = "features-outage"
CONSUMER_UP = 'streamkm_kafka_broker_connected{client="consumer"}'


def produce_range(bootstrap: str, start: int, stop_: int) -> None:
    produce(bootstrap, TOPIC, [(f"k{i}".encode(), valid_value(i), i % 3)
                               for i in range(start, stop_)])


@pytest.mark.slow
def test_service_survives_broker_absent_at_start_and_outage(tmp_path: Path) -> None:
    proxy_port = free_port()
    bootstrap = f"127.0.0.1:{proxy_port}"
    config = write_config(tmp_path, bootstrap, topic=TOPIC, group="g-outage",
                          out_prefix=f"{TOPIC}-out", metrics_port=0)
    log = tmp_path / "service.log"
    proc = start_service(config, log)
    broker = proxy = None
    try:
        # 1. No broker yet: the service runs, retries, and says so.
        wait_until(lambda: metrics_url(log) is not None
                   and count_events(log, "kafka_connect_failed", client="consumer") >= 2,
                   60, "connection retries", [proc])  # the start itself is slow under load
        url = metrics_url(log)
        assert url is not None
        assert scrape(url)[CONSUMER_UP] == 0
        assert count_events(log, "kafka_broker_unavailable", client="consumer") >= 1

        # 2. The broker appears: topics, first wave.
        broker = start_tansu(tmp_path / "tansu.log", advertised_port=proxy_port)
        proxy = TcpOutageProxy(proxy_port, broker.port).start()
        create_topics(bootstrap, {TOPIC: 3, f"{TOPIC}-out-assignments": 3,
                                  f"{TOPIC}-out-events": 1, f"{TOPIC}-out-dlq": 1})
        produce_range(bootstrap, 0, 600)
        wait_until(lambda: read_count(tmp_path) >= 600, 60, "the first wave", [proc])
        wait_until(lambda: scrape(url)[CONSUMER_UP] == 1, 10, "connected gauge", [proc])

        # 3. Outage longer than the session timeout (6 s).
        proxy.cut()
        wait_until(lambda: scrape(url)[CONSUMER_UP] == 0, 20, "disconnected gauge", [proc])
        time.sleep(7)
        assert proc.poll() is None

        # 4. The broker is back: second wave.
        proxy.restore()
        produce_range(bootstrap, 600, 1200)
        wait_until(lambda: model_count(tmp_path) >= 1200, 90, "the second wave", [proc])
        wait_until(lambda: scrape(url)[CONSUMER_UP] == 1, 20, "connected gauge after the outage",
                   [proc])
        assert stop(proc) == 0
    finally:
        kill(proc)
        if proxy is not None:
            proxy.cut()
        if broker is not None:
            pass  # stopped below, after reading the outputs

    try:
        proxy.restore()  # type: ignore[union-attr]
        assert model_count(tmp_path) == 1200
        assert latest_checkpoint(tmp_path).counters["records_accepted"] == 1200
        ids = {json.loads(m.value)["id"]
               for m in read_topic(bootstrap, f"{TOPIC}-out-assignments")}
        assert ids == {f"r{i}" for i in range(1200)}
        names = [e["event"] for e in log_events(log)]
        down = max(i for i, n in enumerate(names) if n == "kafka_broker_unavailable")
        assert "kafka_broker_connected" in names[down:]
        assert "service_stopped" in names
    finally:
        proxy.cut()  # type: ignore[union-attr]
        broker.stop()  # type: ignore[union-attr]
