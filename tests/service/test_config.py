"""Service configuration: TOML loading, env overrides, errors naming the key (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streamkm.cli import main
from streamkm.config.schema import config_hash, load_config
from streamkm.exceptions import ConfigError

REPO = Path(__file__).resolve().parents[2]

MINIMAL = """
[source]
paths = ["in.jsonl"]
[decoding]
dim = 3
[model]
n_clusters = 4
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "streamkm.toml"
    path.write_text(text)
    return path


@pytest.mark.unit
def test_example_config_loads() -> None:
    config = load_config(REPO / "examples" / "streamkm.toml", env={})
    assert config.model.n_clusters == 4
    assert config.metrics.address == "127.0.0.1"
    assert config.source.paths[0].is_absolute()


@pytest.mark.unit
def test_minimal_config_defaults_and_relative_paths(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL), env={})
    assert config.source.paths == [tmp_path / "in.jsonl"]
    assert config.checkpoint.dir == tmp_path / "state" / "checkpoints"
    assert config.batching.batch_size == 1024
    assert config.metrics.port == 9108 and config.metrics.address == "127.0.0.1"


@pytest.mark.unit
@pytest.mark.parametrize("extra, rows", [
    ("", 3072),  # the initialisation sample fit starts from at the default batch size
    ("[batching]\nbatch_size = 5000\n", 5000),
    ("[batching]\nbatch_size = 64\n", 3072),
    ("[batching]\nbatch_size = 64\nfirst_batch_size = 500\n", 500),
    # the kernel follows drift / a re-sketch: the first batch decides nothing lasting
    ("[batching]\nbatch_size = 64\n[drift]\nenabled = true\n", 64),
    ('[batching]\nbatch_size = 64\n[sketch]\nkind = "gaussian"\nn_components = 2\n', 64),
])
def test_first_batch_holds_the_initialisation_sample(tmp_path: Path, extra: str,
                                                     rows: int) -> None:
    config = load_config(write(tmp_path, MINIMAL + extra), env={})
    assert config.first_batch == rows
    # a larger model.init_size (the rows the model starts from) makes it larger
    sized = load_config(write(tmp_path, MINIMAL.replace("n_clusters = 4", "n_clusters = 4\n"
                                                        "init_size = 5000") + extra), env={})
    assert sized.first_batch == (rows if "first_batch_size" in extra else max(rows, 5000))


@pytest.mark.unit
def test_env_override_applies_and_is_typed(tmp_path: Path) -> None:
    env = {"STREAMKM_MODEL__N_CLUSTERS": "8", "STREAMKM_METRICS__ENABLED": "false",
           "STREAMKM_SINKS__EVENTS": "", "STREAMKM_SOURCE__PATHS": '["a", "b"]',
           "STREAMKM_LOGGING__LEVEL": "debug", "STREAMKM_UNRELATED": "x"}
    config = load_config(write(tmp_path, MINIMAL), env=env)
    assert config.model.n_clusters == 8
    assert config.metrics.enabled is False
    assert config.sinks.events is None
    assert config.source.paths == [tmp_path / "a", tmp_path / "b"]
    assert config.logging.level == "debug"


@pytest.mark.unit
def test_config_hash_tracks_model_not_paths(tmp_path: Path) -> None:
    base = load_config(write(tmp_path, MINIMAL), env={})
    moved = load_config(write(tmp_path, MINIMAL), env={"STREAMKM_CHECKPOINT__DIR": "x"})
    other = load_config(write(tmp_path, MINIMAL), env={"STREAMKM_MODEL__N_CLUSTERS": "5"})
    assert config_hash(base) == config_hash(moved) != config_hash(other)


@pytest.mark.unit
@pytest.mark.parametrize(("text", "env", "needles"), [
    (MINIMAL + "bogus_key = 1\n", {}, ["model.bogus_key", "1"]),
    (MINIMAL + "[sketch2]\nx = 1\n", {}, ["sketch2"]),
    (MINIMAL.replace("n_clusters = 4", 'n_clusters = "four"'), {}, ["model.n_clusters", "four"]),
    (MINIMAL.replace("n_clusters = 4", "n_clusters = -2"), {}, ["model.n_clusters", "-2"]),
    (MINIMAL + '[metrics]\nport = 70000\n', {}, ["metrics.port", "70000"]),
    (MINIMAL + '[model.x]\n', {}, ["model.x"]),
    (MINIMAL.replace('dim = 3', 'dim = 3\nformat = "xml"'), {}, ["decoding.format", "xml"]),
    (MINIMAL.replace("[decoding]\ndim = 3\n", ""), {}, ["decoding", "required"]),
    (MINIMAL + '[batching]\nbatch_size = 2\n', {}, ["batch_size", "n_clusters"]),
    (MINIMAL + '[batching]\nfirst_batch_size = 3\n', {},
     ["batching.first_batch_size (3)", "n_clusters (4)"]),
    (MINIMAL + '[batching]\nfirst_batch_size = 0\n', {}, ["first_batch_size", "0"]),
    (MINIMAL.replace('paths = ["in.jsonl"]', 'paths = ["in.bin"]\nframing = "fixed"'), {},
     ["record_size"]),
    (MINIMAL, {"STREAMKM_MODEL__N_CLUSTERS": "abc"},
     ["model.n_clusters", "abc", "STREAMKM_MODEL__N_CLUSTERS"]),
    (MINIMAL, {"STREAMKM_MODEL__NOPE": "1"}, ["model.nope", "STREAMKM_MODEL__NOPE"]),
    (MINIMAL, {"STREAMKM_NOSECTION__KEY": "1"}, ["STREAMKM_NOSECTION__KEY", "nosection"]),
    ("[source\n", {}, ["not valid TOML"]),
])
def test_bad_config_names_key_and_value(tmp_path: Path, text: str, env: dict[str, str],
                                        needles: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), env=env)
    for needle in needles:
        assert needle in str(info.value)


@pytest.mark.unit
def test_missing_file_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "absent.toml", env={})


@pytest.mark.unit
def test_cli_config_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    bad = write(tmp_path, MINIMAL + "unknown_thing = 3\n")
    assert main(["run", "-c", str(bad)]) == 2
    assert "model.unknown_thing" in capsys.readouterr().err
    good = write(tmp_path, MINIMAL)
    monkeypatch.setenv("STREAMKM_BATCHING__MAX_WAIT_MS", "-5")
    assert main(["run", "-c", str(good)]) == 2
    err = capsys.readouterr().err
    assert "batching.max_wait_ms" in err and "-5" in err


@pytest.mark.integration
def test_console_script_bad_config_exit_2(tmp_path: Path) -> None:
    bad = write(tmp_path, MINIMAL.replace("n_clusters = 4", "n_clusters = 0"))
    proc = subprocess.run([sys.executable, "-m", "streamkm.cli", "run", "-c", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "model.n_clusters" in proc.stderr and "0" in proc.stderr
