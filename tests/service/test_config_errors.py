"""A bad value in any section is reported as ``config key 'section.key' has bad value V:
<what the key accepts>``, from the file and from a ``STREAMKM_<SECTION>__<KEY>`` variable
(then naming the variable too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkm.config.schema import load_config, service_model
from streamkm.exceptions import ConfigError

pytestmark = pytest.mark.unit

BASE = {"source": 'paths = ["in.jsonl"]', "decoding": "dim = 2", "model": "n_clusters = 3"}

#: section -> (key, bad value as TOML, how it is quoted, what the message says is accepted,
#: keys the section needs for the key to apply)
CASES: dict[str, tuple[str, str, str, str, str]] = {
    "source": ("poll_interval_ms", "-5.0", "-5.0", "greater than 0", ""),
    "decoding": ("format", '"xml"', "'xml'", "'json', 'csv', 'float32' or 'json_sparse'", ""),
    "model": ("kernel", '"foo"', "'foo'", "must be a str among {", ""),
    "batching": ("max_wait_ms", "0", "0", "greater than 0", ""),
    "checkpoint": ("keep", "0", "0", "greater than or equal to 1", ""),
    "sinks": ("dead_letter_max_raw_bytes", "-1", "-1", "greater than or equal to 0", ""),
    "metrics": ("port", "70000", "70000", "less than or equal to 65535", ""),
    "ui": ("sample_size", "5", "5", "greater than or equal to 10", ""),
    "logging": ("level", '"loud"', "'loud'", "'debug', 'info', 'warning' or 'error'", ""),
    "status": ("interval_s", "-1.0", "-1.0", "greater than or equal to 0", ""),
    "warnings": ("reject_ratio", "2.0", "2.0", "less than or equal to 1", ""),
    "sketch": ("eps", "0.0", "0.0", "greater than 0", 'kind = "gaussian"'),
    "drift": ("threshold", "0.0", "0.0", "must be > 0.0, got 0.0", "enabled = true"),
    "scaleout": ("publish_every_updates", "0", "0", "greater than 0", "enabled = true"),
    "kafka": ("request_timeout_ms", "0", "0", "greater than 0", ""),
}


def _write(tmp_path: Path, section: str, lines: list[str]) -> Path:
    tables = dict(BASE)
    tables[section] = "\n".join([tables.get(section, ""), *lines]).strip()
    path = tmp_path / "streamkm.toml"
    path.write_text("".join(f"[{name}]\n{body}\n" for name, body in tables.items()))
    return path


def test_every_section_has_a_case() -> None:
    assert set(CASES) == set(service_model().model_fields)  # connectors' sections too


@pytest.mark.parametrize("section", list(CASES))
def test_bad_value_names_the_key_and_what_it_accepts(section: str, tmp_path: Path) -> None:
    key, value, quoted, accepted, needs = CASES[section]
    path = _write(tmp_path, section, [needs, f"{key} = {value}"])
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    message = str(info.value)
    assert f"config key '{section}.{key}' has bad value {quoted}: " in message
    assert accepted in message.split(f"'{section}.{key}'", 1)[1]
    assert "environment variable" not in message


@pytest.mark.parametrize("section", list(CASES))
def test_bad_value_from_the_environment_names_the_variable(section: str,
                                                           tmp_path: Path) -> None:
    key, value, quoted, accepted, needs = CASES[section]
    variable = f"STREAMKM_{section.upper()}__{key.upper()}"
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, section, [needs]), env={variable: value})
    message = str(info.value)
    assert (f"config key '{section}.{key}' has bad value {quoted}: " in message
            and f"(from environment variable {variable})" in message), message
    assert accepted in message
