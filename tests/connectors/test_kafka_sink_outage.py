"""Broker outage while the Kafka sinks have messages in flight, with a short producer
delivery timeout: the deliveries expire during the outage, and once the broker is back the
sinks must resume promptly (not stay stuck), deliver every assignment at least once, and the
model must count every record exactly once.

The outage starts right after the service started reading a large wave, so records already
fetched by the consumer are processed (and their assignments sent) while the broker is
unreachable. Two kinds: ``cut`` drops every connection through the TCP proxy in front of
Tansu (see ``test_kafka_outage``); ``stall`` keeps connections open but forwards nothing (a
network partition), which used to leave kafka-python's producer wedged after the broker came
back: every later flush timed out until the producer was replaced.
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

TOPIC = "features-sink-outage"
PRODUCER_UP = 'streamkm_kafka_broker_connected{client="producer"}'
WAVE1, WAVE2, WAVE3 = 300, 8000, 300


def counted(folder: Path) -> int:
    try:
        return model_count(folder)
    except (AssertionError, FileNotFoundError):
        return 0


def produce_range(bootstrap: str, start: int, stop_: int) -> None:
    produce(bootstrap, TOPIC, [(f"k{i}".encode(), valid_value(i), i % 3)
                               for i in range(start, stop_)])


@pytest.mark.slow
@pytest.mark.parametrize("outage", ["cut", "stall"])
def test_sinks_resume_after_outage_with_expired_deliveries(tmp_path: Path, outage: str
                                                          ) -> None:
    proxy_port = free_port()
    bootstrap = f"127.0.0.1:{proxy_port}"
    broker = start_tansu(tmp_path / "tansu.log", advertised_port=proxy_port)
    proxy = TcpOutageProxy(proxy_port, broker.port).start()
    out = f"{TOPIC}-out"
    total = WAVE1 + WAVE2 + WAVE3
    try:
        create_topics(bootstrap, {TOPIC: 3, f"{out}-assignments": 3, f"{out}-events": 1,
                                  f"{out}-dlq": 1})
        config = write_config(tmp_path, bootstrap, topic=TOPIC, group="g-sink-outage",
                              out_prefix=out, metrics_port=0)
        text = config.read_text()
        text = text.replace("[decoding]", "request_timeout_ms = 2000\n[kafka.producer]\n"
                            "delivery_timeout_ms = 3000\n[decoding]", 1)
        config.write_text(text.replace("[sinks]\n", "[sinks]\nflush_timeout_ms = 5000\n", 1))
        log = tmp_path / "service.log"
        proc = start_service(config, log)
        try:
            produce_range(bootstrap, 0, WAVE1)
            wait_until(lambda: counted(tmp_path) >= WAVE1, 60, "the first wave", [proc])
            url = metrics_url(log)
            assert url is not None
            wait_until(lambda: scrape(url)[PRODUCER_UP] == 1, 10, "producer gauge", [proc])

            # A large wave; cut as soon as the service checkpointed part of it, so that
            # the records it already fetched are processed while the broker is away.
            produce_range(bootstrap, WAVE1, WAVE1 + WAVE2)
            wait_until(lambda: read_count(tmp_path) > WAVE1, 60, "the second wave", [proc],
                       interval=0.01)
            if outage == "cut":
                proxy.cut()
            else:
                proxy.stalled.set()
            cut_at = read_count(tmp_path)
            assert cut_at < WAVE1 + WAVE2, "the second wave finished before the cut"
            # Longer than the delivery timeout (3 s) and the session timeout (6 s).
            wait_until(lambda: count_events(log, "checkpoint_failed") >= 1, 30,
                       "a failed checkpoint during the outage", [proc])
            time.sleep(10)
            assert proc.poll() is None
            assert scrape(url)[PRODUCER_UP] == 0

            if outage == "cut":
                proxy.restore()
            else:
                proxy.stalled.clear()
            restored = time.monotonic()
            produce_range(bootstrap, WAVE1 + WAVE2, total)
            wait_until(lambda: counted(tmp_path) >= total, 60,
                       "every record after the outage", [proc])
            resumed_s = time.monotonic() - restored
            wait_until(lambda: scrape(url)[PRODUCER_UP] == 1, 10, "producer gauge", [proc])
            assert stop(proc) == 0
        finally:
            kill(proc)

        print(f"cut after {cut_at} records checkpointed; resumed {resumed_s:.1f} s after "
              f"the broker came back")
        assert resumed_s < 25, f"sinks stayed stuck {resumed_s:.1f} s after the outage"
        assert model_count(tmp_path) == total
        assert latest_checkpoint(tmp_path).counters["records_accepted"] == total
        ids = {json.loads(m.value)["id"]
               for m in read_topic(bootstrap, f"{out}-assignments", timeout=60)}
        assert ids == {f"r{i}" for i in range(total)}
        names = [e["event"] for e in log_events(log)]
        assert "checkpoint_failed" in names
        assert "service_stopped" in names
    finally:
        proxy.stalled.clear()
        proxy.cut()
        broker.stop()
