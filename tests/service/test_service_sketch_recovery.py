"""`streamkm run` on a sparse JSON-lines stream with an SVD sketch re-sketched every 4 batches.

An uninterrupted run is compared with one killed (SIGKILL) and restarted mid-stream: every
valid record counted and assigned exactly once, bad sparse records dead-lettered once with
their reasons, and the final engine and sketch (matrix, reservoir, epoch) bit-identical, so
the restored pipeline transforms exactly like the uninterrupted one.
"""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from streamkm import MiniBatchKernelKMeans
from streamkm.io.checkpoint import CheckpointStore
from streamkm.sketch import SketchedKernelKMeans
from tests.helpers.processes import count_lines, kill, metrics_url, start_service, stop, wait_until

pytestmark = pytest.mark.integration

N_VALID = 3000
DIM = 120
BAD = [
    (b'{"id": "bad-range", "indices": [3, 120], "values": [1, 1]}', "index_out_of_range"),
    (b'{"id": "bad-neg", "indices": [-1, 4], "values": [1, 1]}', "index_out_of_range"),
    (b'{"id": "bad-order", "indices": [9, 4], "values": [1, 1]}', "unsorted_indices"),
    (b'{"id": "bad-dup", "indices": [4, 4], "values": [1, 1]}', "unsorted_indices"),
    (b'{"id": "bad-len", "indices": [4, 5], "values": [1]}', "length_mismatch"),
    (b'{"id": "bad-nan", "indices": [4], "values": [NaN]}', "non_finite"),
    (b'{"id": "bad-json", "indices": [4', "unparseable"),
]


def write_input(path: Path) -> tuple[np.ndarray, Counter]:
    rng = np.random.default_rng(7)
    lines, reasons, rows = [], Counter(), []
    for i in range(N_VALID):
        c = i % 4
        idx = np.sort(rng.choice(np.arange(30 * c, 30 * c + 30), size=8, replace=False))
        vals = np.round(1.0 + rng.random(8), 5)
        lines.append(json.dumps({"id": f"r{i}", "indices": idx.tolist(),
                                 "values": vals.tolist()}).encode())
        row = np.zeros(DIM)
        row[idx] = vals
        rows.append(row)
        if i % 151 == 17:
            value, reason = BAD[len(reasons and list(reasons.elements())) % len(BAD)]
            lines.append(value)
            reasons[reason] += 1
    path.write_bytes(b"\n".join(lines) + b"\n")
    return np.array(rows), reasons


def write_config(folder: Path, data: Path, *, metrics: bool = False) -> Path:
    """The service's config; ``max_wait_ms`` is long enough that batches are cut by size
    only (a cut by time on a loaded machine would move batch boundaries, and the
    bit-identical comparison needs the same batches in both runs)."""
    config = folder / "streamkm.toml"
    config.write_text(f"""
[source]
paths = ["{data}"]
poll_interval_ms = 5
[decoding]
format = "json_sparse"
dim = {DIM}
[model]
n_clusters = 4
tau = 40
n_init = 2
random_state = 5
[sketch]
kind = "svd"
n_components = 6
resketch_every = 4
reservoir_size = 256
random_state = 3
[batching]
batch_size = 100
max_wait_ms = 2000
[checkpoint]
dir = "ck"
every_batches = 3
every_seconds = 3600
[sinks]
assignments = "out/assignments.jsonl"
events = "out/events.jsonl"
dead_letter = "out/dead.jsonl"
[metrics]
enabled = {"true" if metrics else "false"}
port = 0
""")
    return config


def run_to_end(folder: Path, config: Path, *, scrape: bool = False) -> str | None:
    log = folder / "service.log"
    proc = start_service(config, log)
    scraped = None
    try:
        wait_until(lambda: count_lines(folder / "out" / "assignments.jsonl") >= N_VALID, 120,
                   "every record assigned", [proc], interval=0.005)
        if scrape:
            url = metrics_url(log)
            assert url is not None, "no metrics_listening event in the log"
            with urllib.request.urlopen(url, timeout=10) as response:
                scraped = response.read().decode()
        assert stop(proc) == 0
    finally:
        kill(proc)
    return scraped


def final_pipeline(folder: Path) -> tuple[SketchedKernelKMeans, object]:
    ckpt = CheckpointStore(folder / "ck").load_latest()
    assert ckpt is not None and ckpt.sketch_meta is not None
    engine = MiniBatchKernelKMeans.from_state(ckpt.model_arrays, ckpt.model_meta)
    return SketchedKernelKMeans.from_parts(engine, ckpt.sketch_arrays, ckpt.sketch_meta), ckpt


def sample_value(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exported")


@pytest.mark.slow
def test_sparse_sketched_stream_survives_sigkill_exactly_once(tmp_path: Path,
                                                             service_process) -> None:
    data = tmp_path / "in.jsonl"
    rows, reasons = write_input(data)
    n_bad = sum(reasons.values())

    reference = tmp_path / "reference"
    reference.mkdir()
    scraped = run_to_end(reference, write_config(reference, data, metrics=True), scrape=True)
    assert sample_value(scraped, "streamkm_sketch_epoch") == N_VALID // 100 // 4
    assert sample_value(scraped, 'streamkm_resketches_total{trigger="schedule"}') > 0
    assert sample_value(scraped, "streamkm_resketch_seconds_count") > 0

    crashed = tmp_path / "crashed"
    crashed.mkdir()
    config = write_config(crashed, data)
    assignments = crashed / "out" / "assignments.jsonl"
    for target in (700, 1900):  # after the 1st and the 4th re-sketch
        proc = service_process(config, crashed / "service.log")
        try:
            wait_until(lambda: count_lines(assignments) >= target, 120,
                       f"{target} assignments", [proc], interval=0.005)
        finally:
            kill(proc)
    run_to_end(crashed, config)
    assert (crashed / "service.log").read_text().count('"checkpoint_restored"') == 2

    expected, ckpt_expected = final_pipeline(reference)
    got, ckpt_got = final_pipeline(crashed)
    assert got.sketch_epoch_ == expected.sketch_epoch_ == N_VALID // 100 // 4
    for name, array in ckpt_expected.sketch_arrays.items():
        np.testing.assert_array_equal(ckpt_got.sketch_arrays[name], array, err_msg=name)
    for name, array in ckpt_expected.model_arrays.items():
        np.testing.assert_array_equal(ckpt_got.model_arrays[name], array, err_msg=name)
    assert set(ckpt_got.sketch_arrays) == set(ckpt_expected.sketch_arrays)
    meta_got, meta_expected = dict(ckpt_got.sketch_meta), dict(ckpt_expected.sketch_meta)
    meta_got.pop("last_resketch_seconds")
    meta_expected.pop("last_resketch_seconds")
    assert meta_got == meta_expected
    X = sp.csr_matrix(rows)
    np.testing.assert_array_equal(got.sketch(X), expected.sketch(X))
    np.testing.assert_array_equal(got.predict(X), expected.predict(X))

    counters = ckpt_got.meta["counters"]
    assert counters["records_accepted"] == N_VALID and int(got.counts_.sum()) == N_VALID
    assert counters["records_rejected_by_reason"] == dict(reasons)
    out = [json.loads(line) for line in assignments.read_text().splitlines()]
    assert sorted(r["id"] for r in out) == sorted(f"r{i}" for i in range(N_VALID))
    assert assignments.read_text() == (reference / "out" / "assignments.jsonl").read_text()
    dead = [json.loads(line) for line in (crashed / "out" / "dead.jsonl").read_text().splitlines()]
    assert len(dead) == n_bad and Counter(d["reason"] for d in dead) == reasons
    def events(folder: Path) -> list[dict]:
        lines = (folder / "out" / "events.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k != "time"} for line in lines]

    assert events(crashed) == events(reference)
    resketched = [e for e in events(crashed) if e["event"] == "resketched"]
    assert [e["sketch_epoch"] for e in resketched] == list(range(1, N_VALID // 100 // 4 + 1))
