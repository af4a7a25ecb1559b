"""A connector package outside streamkm adds a source kind with its own TOML section: the
example package under tests/connector_example, installed through an entry point of the
``streamkm.connectors`` group, runs through ``streamkm run`` as a user would run it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.processes import count_lines
from tests.helpers.service_process import cli, run_until_assigned

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[1] / "connector_example"
CENTERS = [[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]]


def _installed(site: Path) -> dict[str, str]:
    """The environment of a process that has the example connector installed: its package
    on the path and a distribution in ``site`` declaring the entry point."""
    dist = site / "streamkm_blobs-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: streamkm-blobs\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[streamkm.connectors]\nblobs = streamkm_blobs:register\n")
    path = [str(EXAMPLE), str(site), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in path if p)}


def _config(folder: Path, *, records: int, blobs: str) -> Path:
    config = folder / "streamkm.toml"
    config.write_text(f"""
[source]
kind = "blobs"
records = {records}
[blobs]
{blobs}
[decoding]
dim = 2
[model]
n_clusters = 3
n_init = 2
random_state = 3
[batching]
batch_size = 100
first_batch_size = 100
max_wait_ms = 200
[checkpoint]
dir = "ck"
every_batches = 3
[sinks]
assignments = "out/assignments.jsonl"
events = "out/events.jsonl"
dead_letter = "out/dead.jsonl"
[metrics]
enabled = false
""")
    return config


def test_a_connector_package_adds_a_source_kind_with_its_own_section(tmp_path: Path) -> None:
    env = _installed(tmp_path / "site")
    centers = json.dumps(CENTERS)
    config = _config(tmp_path, records=900, blobs=f"centers = {centers}\nseed = 4")
    # the connector's section takes environment overrides like streamkm's own
    env["STREAMKM_BLOBS__SPREAD"] = "0.3"
    shown = cli("config", "show", "-c", str(config), env=env)
    assert shown.returncode == 0, shown.stderr
    assert "[blobs]" in shown.stdout and "spread = 0.3" in shown.stdout

    run_until_assigned(config, 900, env=env)
    out = [json.loads(line) for line in (tmp_path / "out" / "assignments.jsonl").open()]
    assert sorted(int(a["id"][1:]) for a in out) == list(range(900))  # each record once
    # record i lies around center i % 3: one cluster per center
    by_center = [{a["cluster"] for a in out if int(a["id"][1:]) % 3 == c} for c in range(3)]
    assert all(len(clusters) == 1 for clusters in by_center), by_center
    assert len(set.union(*by_center)) == 3
    assert count_lines(tmp_path / "out" / "dead.jsonl") == 0

    # the checkpoint written at the stop holds the connector's own position, after the last
    inspected = cli("checkpoint", "inspect", str(tmp_path / "ck"), env=env)
    assert inspected.returncode == 0, inspected.stderr
    assert 'blobs: {"next": 900}' in inspected.stdout, inspected.stdout


@pytest.mark.parametrize(("blobs", "records", "needle"), [
    ("spread = -1.0", 10, "config key 'blobs.spread' has bad value -1.0"),
    ("centres = [[0.0, 0.0]]", 10, "unknown config key 'blobs.centres'"),
    ("", 0, "config key 'source.records' has bad value 0"),
])
def test_bad_values_in_a_connector_section_name_the_key(tmp_path: Path, blobs: str,
                                                        records: int, needle: str) -> None:
    config = _config(tmp_path, records=records, blobs=blobs)
    proc = cli("run", "-c", str(config), env=_installed(tmp_path / "site"))
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr


def test_without_the_package_its_kind_is_refused_naming_the_installed_kinds(
        tmp_path: Path) -> None:
    config = _config(tmp_path, records=10, blobs="seed = 1")
    proc = cli("run", "-c", str(config))
    assert proc.returncode == 2, proc.stderr
    assert "config key 'source.kind' has bad value 'blobs': expected 'file' or 'kafka'" \
        in proc.stderr
