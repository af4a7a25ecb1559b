"""The commands of README.md and docs/ on the shipped examples work from a checkout:
``streamkm config check`` and ``streamkm run`` on ``examples/*.toml`` with the example data
under ``examples/data/``, then ``streamkm checkpoint inspect``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.service_process import cli, count_lines, run_until_assigned

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(("name", "data", "records"), [
    ("streamkm.toml", "features.jsonl", 2000),
    ("sketch.toml", "tfidf.jsonl", 1200),
])
def test_example_runs_on_its_shipped_data(tmp_path: Path, name: str, data: str,
                                          records: int) -> None:
    assert count_lines(EXAMPLES / "data" / data) == records
    examples = Path(shutil.copytree(EXAMPLES, tmp_path / "examples"))
    config = examples / name
    env = {"STREAMKM_METRICS__PORT": "0"}
    check = cli("config", "check", "-c", str(config), env=env)
    assert check.returncode == 0, check.stderr
    assert "warning" not in check.stderr  # the input exists
    # the outputs live under examples/state/ (relative to the configuration file)
    run_until_assigned(config, records, env=env,
                       assignments=examples / "state" / "assignments.jsonl")
    assert count_lines(examples / "state" / "dead_letter.jsonl") == 0
    inspect = cli("checkpoint", "inspect", str(examples / "state" / "checkpoints"))
    assert inspect.returncode == 0 and f"accepted {records}" in inspect.stdout
