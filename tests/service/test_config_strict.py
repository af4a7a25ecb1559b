"""Strict configuration types and secrets in errors, through ``streamkm config check`` and
``streamkm run`` called in process (the subprocess forms are in test_config_tools.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkm.cli import main
from tests.service.test_config_tools import BASE, SASL, write

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("env, text", [
    # another key is bad while the secret is set
    ({"STREAMKM_MODEL__N_CLUSTERS": "true"}, BASE),
    # the secret itself has a bad type (a list) in the file
    ({}, BASE + "[kafka]\nssl_password = [123456789]\n"),
    # a secret under a name streamkm sets itself
    ({}, BASE + "[kafka.consumer]\nsasl_plain_password = \"123456789\"\n"),
    # an unknown section in the environment
    ({"STREAMKM_NOPE__API_TOKEN": "123456789"}, BASE),
])
def test_errors_never_echo_a_secret(tmp_path: Path, env: dict[str, str], text: str,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in {**SASL, "STREAMKM_KAFKA__SASL_PLAIN_PASSWORD": "123456789",
                        **env}.items():
        monkeypatch.setenv(name, value)
    for command in (["config", "check"], ["run"]):
        assert main([*command, "-c", str(write(tmp_path, text))]) == 2
        out = capsys.readouterr()
        assert "123456789" not in out.out + out.err
        assert "error" in out.err


@pytest.mark.parametrize("change, needles", [
    (("n_clusters = 4", "n_clusters = true"), ["model.n_clusters", "True"]),
    (("dim = 3", "dim = true"), ["decoding.dim", "True"]),
    (("dim = 3", "dim = 3.0"), ["decoding.dim", "3.0"]),
    (("[metrics]", '[metrics]\nenabled = 1'), ["metrics.enabled", "1"]),
    (("[decoding]", "[decoding]\nmax_abs_value = nan"), ["decoding.max_abs_value", "nan"]),
    (("[source]", "[source]\npoll_interval_ms = inf"), ["source.poll_interval_ms", "inf"]),
    (("[metrics]", '[sinks]\ndead_letter = ""\n[metrics]'), ["sinks.dead_letter", "''"]),
    (("[metrics]", '[checkpoint]\ndir = " "\n[metrics]'), ["checkpoint.dir", "' '"]),
    (('paths = ["in.jsonl"]', 'paths = [""]'), ["source.paths.0", "''"]),
])
def test_strict_types_exit_2_naming_key_and_value(tmp_path: Path, change: tuple[str, str],
                                                  needles: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", "-c", str(write(tmp_path, BASE.replace(*change)))]) == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err
