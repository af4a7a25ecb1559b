"""Scale-out through a broker outage: two ``streamkm run`` processes (scale-out mode) reach
Tansu through the cuttable TCP proxy of ``helpers.kafka_broker``; mid-stream every
connection is cut for longer than the session timeout, then restored. Both processes stay
alive, report the
outage (``streamkm_kafka_broker_connected{client="scaleout"}``, log events), fence again
after the rebalances and the global model ends up counting every valid record exactly once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.kafka_broker import (
    ModelTopic,
    TcpOutageProxy,
    create_topics,
    produce,
    start_tansu,
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

PREFIX = "so-outage"
PARTITIONS = 4
CENTERS = np.array([[0.0, 0.0], [5.0, 5.0], [0.0, 5.0], [5.0, 0.0]])
SCALEOUT_UP = 'streamkm_kafka_broker_connected{client="scaleout"}'


def value(i: int) -> bytes:
    if i % 97 == 0:  # a few invalid records: dead-lettered, never counted
        return b'{"id": "bad%d", "x": [1.0]}' % i
    x = CENTERS[i % 4] + np.random.default_rng(20_000 + i).normal(0, 0.8, 2)
    return json.dumps({"id": f"r{i}", "x": x.round(6).tolist()}).encode()


def n_valid(n: int) -> int:
    return sum(1 for i in range(n) if i % 97 != 0)


def produce_range(bootstrap: str, start: int, stop_: int) -> None:
    produce(bootstrap, PREFIX, [(f"k{i}".encode(), value(i), i % PARTITIONS)
                                for i in range(start, stop_)])



def configs(tmp: Path, bootstrap: str) -> dict[str, Path]:
    out = {}
    for member in ("a", "b"):
        config = write_config(tmp / member, bootstrap, topic=PREFIX, group=f"{PREFIX}-g",
                              out_prefix=f"{PREFIX}-out", batch_size=100, metrics_port=0)
        with open(config, "a") as fh:
            fh.write(f"""
[scaleout]
enabled = true
updates_topic = "{PREFIX}-updates"
model_topic = "{PREFIX}-model"
coordination_topic = "{PREFIX}-coord"
member_id = "{member}"
publish_every_updates = 12
publish_interval_ms = 150
""")
        out[member] = config
    return out


def gauge(url: str) -> float | None:
    try:
        return scrape(url).get(SCALEOUT_UP)
    except OSError:
        return None


@pytest.mark.slow
def test_scaleout_processes_ride_out_a_broker_outage(tmp_path: Path) -> None:
    proxy_port = free_port()
    bootstrap = f"127.0.0.1:{proxy_port}"
    broker = start_tansu(tmp_path / "tansu.log", advertised_port=proxy_port)
    proxy = TcpOutageProxy(proxy_port, broker.port).start()
    procs = {}
    model = None
    try:
        create_topics(bootstrap, {PREFIX: PARTITIONS, f"{PREFIX}-out-assignments": 2,
                                  f"{PREFIX}-out-events": 1, f"{PREFIX}-out-dlq": 1})
        produce_range(bootstrap, 0, 4000)
        cfgs = configs(tmp_path, bootstrap)
        logs = {m: c.parent / "service.log" for m, c in cfgs.items()}
        procs = {m: start_service(c, logs[m]) for m, c in cfgs.items()}
        alive = list(procs.values())
        model = ModelTopic(bootstrap, f"{PREFIX}-model")
        wait_until(lambda: all(metrics_url(log) for log in logs.values()), 30,
                   "the metrics endpoints", alive)
        urls = {m: str(metrics_url(log)) for m, log in logs.items()}

        # 1. Mid-stream (the model has started counting), cut every connection for longer
        #    than the session timeout (6 s): both groups rebalance when the broker is back.
        wait_until(lambda: model.count() >= 200, 60, "the model learning", alive, 0.05)
        wait_until(lambda: all(gauge(u) == 1 for u in urls.values()), 10, "connected", alive)
        proxy.cut()
        cut_at = time.monotonic()
        wait_until(lambda: all(gauge(u) == 0 for u in urls.values()), 15,
                   "both processes to report the outage", alive, 0.2)
        time.sleep(max(0.0, 8.0 - (time.monotonic() - cut_at)))
        assert all(p.poll() is None for p in alive)

        # 2. The broker is back: more input; the global model counts every record once.
        proxy.restore()
        produce_range(bootstrap, 4000, 5000)
        expected = n_valid(5000)
        wait_until(lambda: model.count() >= expected, 90,
                   f"the global model to count {expected} records", alive, 0.2)
        wait_until(lambda: all(gauge(u) == 1 for u in urls.values()), 15, "reconnected", alive)
        time.sleep(1.0)  # nothing more arrives: not a single record counted twice
        assert model.count() == expected
        for proc in alive:
            assert stop(proc) == 0
    finally:
        for proc in procs.values():
            kill(proc)
        if model is not None:
            model.close()
        proxy.cut()
        broker.stop()

    version = model.latest
    assert version is not None and version.counters["records_applied"] == expected
    for member, log in logs.items():
        events = log_events(log)
        names = [e.get("event") for e in events]
        down = [i for i, e in enumerate(events) if e.get("event") == "kafka_broker_unavailable"
                and e.get("client") == "scaleout"]
        assert down, f"{member} did not log the outage"
        assert any(e.get("event") == "kafka_broker_connected" and e.get("client") == "scaleout"
                   for e in events[down[0]:]), f"{member} did not log the reconnection"
        assert "service_stopped" in names
        assert count_events(log, "scaleout_close_incomplete") == 0
