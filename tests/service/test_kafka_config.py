"""Kafka configuration: the example file loads, bad keys and values are clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkm.exceptions import ConfigError
from streamkm.service.config import config_from_mapping, load_config

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
])
def test_bad_kafka_config_is_a_clear_error(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match="invalid configuration") as info:
        config_from_mapping({**BASE, **raw})
    assert message in str(info.value)
