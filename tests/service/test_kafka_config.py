"""Kafka configuration: the example file loads, bad keys and values are clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkm.config.schema import config_from_mapping, load_config
from streamkm.exceptions import ConfigError

pytestmark = pytest.mark.unit

BASE = {"decoding": {"dim": 2}, "model": {"n_clusters": 2}}
KAFKA_SOURCE = {"kind": "kafka", "topics": ["features"]}


def test_example_kafka_config_loads() -> None:
    config = load_config(Path(__file__).parents[2] / "examples" / "kafka.toml", env={})
    assert config.source.kind == "kafka" and config.sinks.kind == "kafka"
    settings = config.kafka.client_settings()
    assert settings["bootstrap_servers"] == ["127.0.0.1:9092"]


def test_settings_pass_through_and_secrets_stay_hidden(tmp_path: Path) -> None:
    config = config_from_mapping(
        {**BASE, "source": {**KAFKA_SOURCE, "group_instance_id": "node-1"},
         "kafka": {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                   "sasl_plain_username": "svc", "sasl_plain_password": "s3cret",
                   "ssl_cafile": "ca.pem", "api_version": "3.6",
                   "consumer": {"fetch_max_bytes": 1 << 20},
                   "producer": {"compression_type": "gzip"}}},
        env={"STREAMKM_KAFKA__CLIENT_ID": '"node-1"'}, base_dir=tmp_path)
    settings = config.kafka.client_settings()
    assert settings["sasl_plain_password"] == "s3cret"
    assert settings["ssl_cafile"] == str(tmp_path / "ca.pem")
    assert settings["api_version"] == (3, 6) and settings["client_id"] == "node-1"
    assert "s3cret" not in repr(config)
    assert config.kafka.consumer == {"fetch_max_bytes": 1 << 20}


@pytest.mark.parametrize(("raw", "message"), [
    ({"source": {"kind": "kafka"}}, "set exactly one of source.topics"),
    ({"source": {**KAFKA_SOURCE, "pattern": "f.*"}}, "set exactly one of source.topics"),
    ({"source": {**KAFKA_SOURCE, "paths": ["a"]}}, "unknown config key 'source.paths'"),
    ({"source": {"kind": "kafak", "topics": ["t"]}}, "'source.kind' has bad value 'kafak'"),
    ({"source": {**KAFKA_SOURCE, "session_timeout_ms": "soon"}},
     "'source.session_timeout_ms' has bad value 'soon'"),
    ({"source": KAFKA_SOURCE, "kafka": {"consumer": {"enable_auto_commit": True}}},
     "kafka.consumer.enable_auto_commit = True is set by streamkm"),
    ({"source": KAFKA_SOURCE, "kafka": {"producer": {"lingr_ms": 5}}},
     "unknown kafka-python producer setting 'lingr_ms'"),
    ({"source": KAFKA_SOURCE, "kafka": {"security_protocol": "SASL_SSL"}},
     "kafka.sasl_mechanism is required"),
    ({"source": KAFKA_SOURCE, "kafka": {"bootstrap_server": ["h:9092"]}},
     "unknown config key 'kafka.bootstrap_server'"),
    ({"source": {"paths": ["a"]}, "sinks": {"dead_letter_topic": "dlq"}},
     "sinks.dead_letter_topic = 'dlq' needs sinks.kind = 'kafka'"),
    ({"source": KAFKA_SOURCE, "kafka": {"transactional_id": "t1"}},
     "kafka.transactional_id = 't1' needs source.kind = 'kafka' and sinks.kind = 'kafka', "
     "got 'kafka' and 'file'"),
    ({"source": KAFKA_SOURCE, "sinks": {"kind": "kafka"}, "kafka": {"transactional_id": ""}},
     "'kafka.transactional_id' has bad value ''"),
    ({"source": KAFKA_SOURCE, "sinks": {"kind": "kafka"},
      "kafka": {"transaction_timeout_ms": 1000}},
     "kafka.transaction_timeout_ms = 1000 needs kafka.transactional_id"),
    ({"source": KAFKA_SOURCE, "sinks": {"kind": "kafka"},
      "kafka": {"transaction_check_interval_ms": 1000}},
     "kafka.transaction_check_interval_ms = 1000 needs kafka.transactional_id"),
    ({"source": KAFKA_SOURCE, "sinks": {"kind": "kafka"},
      "kafka": {"transactional_id": "t1", "transaction_check_interval_ms": 0}},
     "'kafka.transaction_check_interval_ms' has bad value 0"),
    ({"source": KAFKA_SOURCE, "sinks": {"kind": "kafka"}, "scaleout": {"enabled": True},
      "kafka": {"transactional_id": "t1"}},
     "kafka.transactional_id = 't1' is not supported with scaleout.enabled = true"),
    ({"source": KAFKA_SOURCE, "sinks": {"kind": "kafka"},
      "kafka": {"producer": {"transactional_id": "t1"}}},
     "kafka.producer.transactional_id = 't1' is set by streamkm or in [kafka]"),
])
def test_bad_kafka_config_is_a_clear_error(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match="invalid configuration") as info:
        config_from_mapping({**BASE, **raw})
    assert message in str(info.value)


def test_transactional_outputs_reach_the_producer_and_the_source() -> None:
    from streamkm_connectors.kafka_sinks import KafkaOutputTransaction, kafka_sinks_from_config
    from streamkm_connectors.kafka_source import kafka_source_from_config

    config = config_from_mapping({**BASE, "source": KAFKA_SOURCE, "sinks": {"kind": "kafka"},
                                  "kafka": {"transactional_id": "node-1",
                                            "transaction_timeout_ms": 20000,
                                            "transaction_check_interval_ms": 2500}})
    *sinks, transaction = kafka_sinks_from_config(config.sinks, config.kafka)
    assert isinstance(transaction, KafkaOutputTransaction)
    assert transaction.settings["transactional_id"] == "node-1"
    assert transaction.settings["transaction_timeout_ms"] == 20000
    assert transaction.check_interval_s == 2.5
    assert "transaction_check_interval_ms" not in transaction.settings  # not kafka-python's
    assert "transactional_id" not in config.kafka.client_settings()  # not for the consumer
    assert kafka_source_from_config(config.source, config.kafka).replay_committed
    for sink in filter(None, sinks):  # the model sink is off
        sink.close()
