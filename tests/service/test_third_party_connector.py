"""A connector package outside streamkm adds a source kind with its own TOML section and a
sinks kind with its own ``[sinks]`` keys: the example package under tests/connector_example,
installed through an entry point of the ``streamkm.connectors`` group, runs through
``streamkm run`` as a user would run it."""

from __future__ import annotations

import csv
import json
import os
import shutil
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


FILE_SINKS = """[sinks]
assignments = "out/assignments.jsonl"
events = "out/events.jsonl"
dead_letter = "out/dead.jsonl"
"""


def _config(folder: Path, *, records: int, blobs: str, sinks: str = FILE_SINKS) -> Path:
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
{sinks}
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


CSV_SINKS = """[sinks]
kind = "csv"
assignments = "out/assignments.csv"
dead_letter = "out/dead.csv"
"""


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh, delimiter=";"))


def test_a_connector_package_adds_a_sinks_kind_with_its_own_keys(tmp_path: Path) -> None:
    env = _installed(tmp_path / "site")
    config = _config(tmp_path, records=600, blobs=f"centers = {json.dumps(CENTERS)}",
                     sinks=CSV_SINKS)
    env["STREAMKM_SINKS__DELIMITER"] = ";"  # the kind's own key, from the environment
    shown = cli("config", "show", "-c", str(config), env=env)
    assert shown.returncode == 0, shown.stderr
    assert 'kind = "csv"' in shown.stdout and 'delimiter = ";"' in shown.stdout
    out = tmp_path / "out" / "assignments.csv"

    # the header line is counted: 601 lines are 600 assignments
    run_until_assigned(config, 601, env=env, assignments=out)
    rows = _csv_rows(out)
    assert sorted(int(r["id"][1:]) for r in rows) == list(range(600))  # each record once
    by_center = [{r["cluster"] for r in rows if int(r["id"][1:]) % 3 == c} for c in range(3)]
    assert all(len(clusters) == 1 for clusters in by_center), by_center
    assert _csv_rows(tmp_path / "out" / "dead.csv") == []

    # the core knows the kind's output files from its hook: without the checkpoints, a
    # start over them is refused, naming them, and --from-start empties them
    shutil.rmtree(tmp_path / "ck")
    refused = cli("run", "-c", str(config), env=env)
    assert refused.returncode == 2 and str(out) in refused.stderr, refused.stderr
    run_until_assigned(config, 601, "--reset-model", "--from-start", env=env, assignments=out)
    assert sorted(int(r["id"][1:]) for r in _csv_rows(out)) == list(range(600))


def test_a_key_of_another_sinks_kind_names_the_kind_it_needs(tmp_path: Path) -> None:
    config = _config(tmp_path, records=10, blobs="seed = 1",
                     sinks=FILE_SINKS + 'delimiter = ";"\n')
    proc = cli("run", "-c", str(config), env=_installed(tmp_path / "site"))
    assert proc.returncode == 2, proc.stderr
    assert "sinks.delimiter = ';' needs sinks.kind = 'csv'" in proc.stderr, proc.stderr
