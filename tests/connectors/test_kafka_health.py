"""``/readyz`` and the lag of a Kafka-source ``streamkm run`` against a real broker (Tansu
behind a TCP proxy that can cut it off): not ready while the broker is unreachable (alive
all along), ready once the consumer is connected and in its group, not ready again when the
broker goes away; the lag is exported in records, never in bytes. On each Kafka client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.kafka_broker import (
    TcpOutageProxy,
    create_topics,
    produce,
    read_count,
    start_tansu,
    valid_value,
    write_config,
)
from tests.helpers.processes import free_port, kill, metrics_url, start_service, stop, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TOPIC = "features-health"


def probe(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_readiness_follows_the_broker_and_lag_is_in_records(kafka_client: str,
                                                            tmp_path: Path) -> None:
    proxy_port = free_port()
    bootstrap = f"127.0.0.1:{proxy_port}"
    broker = start_tansu(tmp_path / "tansu.log", advertised_port=proxy_port)
    proxy = TcpOutageProxy(proxy_port, broker.port).start()
    proc = None
    try:
        create_topics(bootstrap, {TOPIC: 2, f"{TOPIC}-out-assignments": 1,
                                  f"{TOPIC}-out-events": 1, f"{TOPIC}-out-dlq": 1})
        produce(bootstrap, TOPIC, [(f"k{i}".encode(), valid_value(i), i % 2)
                                   for i in range(200)])
        config = write_config(tmp_path, bootstrap, topic=TOPIC, group="g-health",
                              out_prefix=f"{TOPIC}-out", metrics_port=0, client=kafka_client)
        log = tmp_path / "service.log"
        proc = start_service(config, log)
        wait_until(lambda: metrics_url(log) is not None, 60, "the listener", [proc])
        base = str(metrics_url(log)).removesuffix("/metrics")
        wait_until(lambda: read_count(tmp_path) >= 200, 60, "the records read", [proc])
        wait_until(lambda: probe(base + "/readyz")[0] == 200, 30, "ready", [proc])
        source = probe(base + "/readyz")[1]["checks"]["source"]
        assert source["ok"] and f"{TOPIC}:0, {TOPIC}:1" in source["detail"]
        assert "'g-health'" in source["detail"]
        metrics = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
        lag = sorted(line.rsplit(" ", 1)[0] for line in metrics.splitlines()
                     if line.startswith("streamkm_source_lag"))
        assert lag == [f'streamkm_source_lag_records{{partition="{TOPIC}:{p}"}}'
                       for p in range(2)]

        proxy.cut()  # the broker goes away: not ready, but alive (it retries)
        wait_until(lambda: probe(base + "/readyz")[0] == 503, 30, "not ready in the outage",
                   [proc])
        status, ready = probe(base + "/readyz")
        assert ready["status"] == "not_ready" and not ready["checks"]["source"]["ok"]
        assert "no broker connection" in ready["checks"]["source"]["detail"]
        assert probe(base + "/healthz")[0] == 200

        proxy.restore()
        wait_until(lambda: probe(base + "/readyz")[0] == 200, 60, "ready after the outage",
                   [proc])
        assert stop(proc) == 0
    finally:
        if proc is not None:
            kill(proc)
        proxy.cut()
        broker.stop()
