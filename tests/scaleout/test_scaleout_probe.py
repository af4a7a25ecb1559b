"""The scale-out broker probe against the real (Tansu) broker behind a TCP proxy: a stalled
link (connections held open, no byte forwarded: a silent cut) is reported as unreachable
within the probe's timeout, and reachable again once bytes flow."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers.kafka_broker import TcpOutageProxy, free_port, start_tansu

from streamkm.config.schema import service_model
from streamkm_connectors.scaleout_kafka import KafkaScaleoutTransport

pytestmark = [pytest.mark.kafka]


def test_probe_reports_a_silent_cut_within_its_timeout(tmp_path: Path) -> None:
    # the broker advertises the proxy: every connection goes through it
    broker = start_tansu(tmp_path / "tansu.log", advertised_port=free_port())
    proxy = TcpOutageProxy(broker.advertised_port, broker.port).start()
    config = service_model().model_validate({
        "source": {"kind": "kafka", "topics": ["t"], "group_id": "g"},
        "kafka": {"bootstrap_servers": [f"127.0.0.1:{proxy.listen_port}"],
                  "request_timeout_ms": 40000},  # the probe's own timeout wins
        "decoding": {"dim": 2}, "model": {"n_clusters": 2}, "scaleout": {"enabled": True}})
    probe = KafkaScaleoutTransport(config).broker_probe(timeout_s=1.5)
    try:
        assert probe.reachable()
        proxy.stalled.set()
        t0 = time.monotonic()
        assert not probe.reachable()
        assert time.monotonic() - t0 < 5.0
        proxy.stalled.clear()
        assert probe.reachable()
    finally:
        probe.close()
        proxy.cut()
        broker.stop()
