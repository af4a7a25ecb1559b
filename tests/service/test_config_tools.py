"""``streamkm config show`` / ``config check``, strict configuration types, secrets in the
environment and in errors (issues 13 and 19), driven through the command line."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.helpers.processes import free_port
from tests.helpers.service_process import busy_port, cli
from tests.service.test_config import MINIMAL
from streamkm.config.schema import config_from_mapping, load_config

pytestmark = pytest.mark.integration

BASE = MINIMAL + "[metrics]\nport = 0\n"

SASL = {"STREAMKM_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "STREAMKM_KAFKA__SASL_MECHANISM": "PLAIN",
        "STREAMKM_KAFKA__SASL_PLAIN_USERNAME": "svc"}


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "in.jsonl").touch()
    path = tmp_path / "streamkm.toml"
    path.write_text(text)
    return path


def test_all_digit_password_from_environment_is_text_and_masked(tmp_path: Path) -> None:
    env = {**SASL, "STREAMKM_KAFKA__SASL_PLAIN_PASSWORD": "123456789"}
    config = load_config(write(tmp_path, BASE), env=env)
    assert config.kafka.sasl_plain_password.get_secret_value() == "123456789"
    assert config.kafka.client_settings()["sasl_plain_password"] == "123456789"
    # TOML quotes are removed, text stays text
    quoted = load_config(write(tmp_path, BASE),
                         env={**SASL, "STREAMKM_KAFKA__SASL_PLAIN_PASSWORD": "'00 7'",
                              "STREAMKM_KAFKA__CLIENT_ID": "0042"})
    assert quoted.kafka.sasl_plain_password.get_secret_value() == "00 7"
    assert quoted.kafka.client_id == "0042"

    proc = cli("config", "show", "-c", str(tmp_path / "streamkm.toml"), env=env)
    assert proc.returncode == 0, proc.stderr
    assert 'sasl_plain_password = "**********"' in proc.stdout
    assert "123456789" not in proc.stdout + proc.stderr


def test_bad_value_exits_2_without_echoing_a_secret(tmp_path: Path) -> None:
    """One subprocess case of each; every case runs in process in test_config_strict.py."""
    env = {**SASL, "STREAMKM_KAFKA__SASL_PLAIN_PASSWORD": "123456789",
           "STREAMKM_MODEL__N_CLUSTERS": "true"}
    proc = cli("run", "-c", str(write(tmp_path, BASE.replace("dim = 3", "dim = true"))),
               env=env)
    assert proc.returncode == 2
    assert "model.n_clusters" in proc.stderr and "decoding.dim" in proc.stderr
    assert "123456789" not in proc.stdout + proc.stderr


def test_cross_field_error_names_both_keys_not_the_whole_config(tmp_path: Path) -> None:
    proc = cli("run", "-c", str(write(tmp_path, BASE)),
               env={"STREAMKM_BATCHING__BATCH_SIZE": "2"})
    assert proc.returncode == 2
    assert proc.stderr.endswith(
        ": batching.batch_size (2) must be at least model.n_clusters (4) "
        "(from environment variable STREAMKM_BATCHING__BATCH_SIZE)\n")
    assert "(top level)" not in proc.stderr and "'source'" not in proc.stderr


def test_config_show_prints_effective_toml_that_loads_back(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + '[drift]\nenabled = true\nk_max = 6\n'
                               '[kafka.consumer]\nfetch_max_bytes = 1048576\n')
    env = {"STREAMKM_MODEL__N_CLUSTERS": "5", "STREAMKM_SINKS__EVENTS": ""}
    proc = cli("config", "show", "-c", str(path), env=env)
    assert proc.returncode == 0, proc.stderr
    shown = tomllib.loads(proc.stdout)
    assert shown["model"]["n_clusters"] == 5
    assert shown["sinks"]["events"] == ""
    assert shown["source"]["paths"] == [str(tmp_path / "in.jsonl")]
    assert shown["scaleout"] == {"enabled": False} and shown["sketch"] == {"kind": "none"}
    assert shown["kafka"]["consumer"] == {"fetch_max_bytes": 1048576}
    assert config_from_mapping(shown) == load_config(path, env=env)


def test_config_check_ok_warns_about_missing_input(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    (tmp_path / "in.jsonl").unlink()
    proc = cli("config", "check", "-c", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "[model]\nn_clusters = 4" in proc.stdout
    assert "warning: source.paths[0]" in proc.stderr and "does not exist" in proc.stderr
    assert "config OK" in proc.stderr
    assert not (tmp_path / "state").exists()  # checking creates nothing


def test_config_check_finds_busy_port_and_unreachable_broker(tmp_path: Path) -> None:
    dead = free_port()  # nobody listens there (under xdist: no other worker either)
    with busy_port() as port:
        text = BASE.replace("port = 0", f"port = {port}") + (
            f'[sinks]\nkind = "kafka"\n[kafka]\nbootstrap_servers = ["127.0.0.1:{dead}"]\n')
        proc = cli("config", "check", "-c", str(write(tmp_path, text)))
    assert proc.returncode == 2
    assert f"metrics.port {port} is in use" in proc.stderr
    assert f"kafka.bootstrap_servers ['127.0.0.1:{dead}']: no broker accepts" in proc.stderr
    assert "config has 2 error(s)" in proc.stderr


def test_a_broker_the_source_and_the_sinks_share_is_reported_once(tmp_path: Path) -> None:
    from streamkm.config.preflight import preflight

    dead = free_port()
    config = config_from_mapping({
        "source": {"kind": "kafka", "topics": ["t"]}, "sinks": {"kind": "kafka"},
        "kafka": {"bootstrap_servers": [f"127.0.0.1:{dead}"]}, "decoding": {"dim": 2},
        "model": {"n_clusters": 2}, "metrics": {"enabled": False},
        "checkpoint": {"dir": "ck"}}, base_dir=tmp_path)
    found = [f.message for f in preflight(config, network=True, broker_timeout_s=1.0)]
    assert [m for m in found if "no broker accepts" in m] == [
        f"kafka.bootstrap_servers ['127.0.0.1:{dead}']: no broker accepts a connection: "
        f"127.0.0.1:{dead} (Connection refused): start the broker or set [kafka] "
        f"bootstrap_servers or STREAMKM_KAFKA__BOOTSTRAP_SERVERS"], found
    assert preflight(config, network=False) == []  # without the network checks: no broker


def test_python_dash_m_streamkm() -> None:
    from streamkm import __version__

    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"streamkm {__version__}"
