"""``[kafka] client``: the confluent-kafka client's configuration, and its clear errors.

In-process, no broker: the sections become librdkafka properties (the source's and the
producer's), librdkafka refuses unknown properties by name, the keys streamkm manages are
refused, scale-out with the confluent client is refused naming both keys, and a missing
confluent-kafka package is a configuration error naming the extra that installs it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from streamkm.config.schema import config_from_mapping
from streamkm.exceptions import ConfigError
from streamkm_connectors.confluent_producer import confluent_producer_properties
from streamkm_connectors.confluent_source import ConfluentKafkaSource, confluent_source_from_config
from streamkm_connectors.kafka_source import KafkaSource
from streamkm_connectors.registration import kafka_source

pytestmark = pytest.mark.unit

BASE = {"decoding": {"dim": 2}, "model": {"n_clusters": 2}}
SOURCE = {"kind": "kafka", "topics": ["features"], "group_id": "g1"}


def _config(kafka: dict, tmp_path: Path | None = None, **sections: dict) -> object:
    return config_from_mapping({**BASE, "source": SOURCE, **sections,
                                "kafka": {"client": "confluent", **kafka}},
                               env={}, base_dir=tmp_path)


def test_kafka_python_is_the_default_and_confluent_builds_its_own_source(
        tmp_path: Path) -> None:
    default = config_from_mapping({**BASE, "source": SOURCE}, env={})
    assert default.kafka.client == "kafka-python"
    assert type(kafka_source(default.source, default, None)) is KafkaSource
    config = _config({}, tmp_path)
    assert isinstance(kafka_source(config.source, config, None), ConfluentKafkaSource)


def test_sections_become_librdkafka_properties(tmp_path: Path) -> None:
    config = _config({"bootstrap_servers": ["h1:9092", "h2:9093"], "client_id": "node-1",
                      "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                      "sasl_plain_username": "svc", "sasl_plain_password": "s3cret",
                      "ssl_cafile": "ca.pem", "ssl_check_hostname": False,
                      "transactional_id": "t-1",
                      "consumer": {"fetch.min.bytes": 1},
                      "producer": {"compression.type": "lz4"}},
                     tmp_path, source={**SOURCE, "group_instance_id": "node-1",
                                       "auto_offset_reset": "latest"},
                     sinks={"kind": "kafka"})
    source = confluent_source_from_config(config.source, config.kafka)
    props = source.properties
    assert props["bootstrap.servers"] == "h1:9092,h2:9093"
    assert props["group.id"] == "g1" and props["group.instance.id"] == "node-1"
    assert props["auto.offset.reset"] == "latest"
    assert props["enable.auto.commit"] is False and props["enable.auto.offset.store"] is False
    assert props["security.protocol"] == "sasl_ssl" and props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["sasl.username"] == "svc" and props["sasl.password"] == "s3cret"
    assert props["ssl.ca.location"] == str(tmp_path / "ca.pem")
    assert props["ssl.endpoint.identification.algorithm"] == "none"
    assert props["isolation.level"] == "read_uncommitted"
    assert props["fetch.min.bytes"] == 1  # [kafka.consumer] overrides the throughput default
    assert props["max.partition.fetch.bytes"] == 4 << 20
    assert source.replay_committed and source.max_poll_records == 2000
    producer = confluent_producer_properties(config.sinks, config.kafka)
    assert producer["transactional.id"] == "t-1" and producer["compression.type"] == "lz4"
    assert producer["partitioner"] == "murmur2_random"  # kafka-python's key -> partition
    assert "s3cret" not in repr(config)


@pytest.mark.parametrize(("kafka", "message"), [
    ({"consumer": {"fetch.min.byts": 1}},
     r"kafka.consumer: librdkafka refuses the settings \['fetch.min.byts'\]"),
    ({"producer": {"linger_ms": 5}},
     r"kafka.producer: librdkafka refuses the settings \['linger_ms'\]"),
    ({"consumer": {"group.id": "other"}},
     "kafka.consumer.group.id = 'other' is set by streamkm"),
    ({"producer": {"transactional.id": "x"}},
     "kafka.producer.transactional.id = 'x' is set by streamkm"),
    ({"client": "librdkafka"}, "'kafka.client' has bad value 'librdkafka'"),
    ({"consumer": {"partition.assignment.strategy": "cooperative-sticky"}},
     "partition.assignment.strategy = 'cooperative-sticky'.*range or roundrobin"),
])
def test_bad_confluent_settings_are_clear_errors(kafka: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(kafka)


def test_scaleout_with_the_confluent_client_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError, match=r"kafka.client = 'confluent' is not supported with "
                                          r"scaleout.enabled = true.*kafka-python"):
        _config({}, scaleout={"enabled": True}, sinks={"kind": "kafka"})


def test_a_missing_confluent_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # import fails
    with pytest.raises(ConfigError, match=r"kafka.client = 'confluent' needs the "
                                          r"confluent-kafka package.*streamkm\[confluent\]"):
        _config({})
    config_from_mapping({**BASE, "source": SOURCE}, env={})  # kafka-python still works
