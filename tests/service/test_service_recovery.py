"""Kill -9 recovery and graceful SIGTERM of the real service process.

The service runs as a subprocess (``python -m streamkm.cli run -c ...``) on a file of known
records with bad ones mixed in. It is killed with SIGKILL at seeded random points and
restarted; at the end the model must equal an uninterrupted run's, bit for bit, and every
valid record must have affected it exactly once.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from streamkm import MiniBatchKernelKMeans
from streamkm.io.checkpoint import CheckpointStore
from tests.helpers.processes import (count_lines, kill, log_events, start_service, stop,
                                     wait_until)

pytestmark = pytest.mark.integration

N_VALID = 6000
DIM = 3
BAD_LINES = [b'{"id": "x", "x": [1, 2', b'{"x": [1.0, 2.0]}', b'{"x": [NaN, 0, 0]}',
             b"\x00\x01\x02garbage", b"", b'{"x": [1e300, 0, 0]}', b"\xff\xfe{}"]


def write_input(path: Path, seed: int = 3) -> tuple[list[str], int]:
    rng = np.random.default_rng(seed)
    centers = np.array([[0, 0, 0], [4, 4, 0], [0, 4, 4], [4, 0, 4]], dtype=float)
    ids, n_bad, lines = [], 0, []
    for i in range(N_VALID):
        x = centers[i % 4] + rng.normal(0, 0.6, DIM)
        ids.append(f"r{i}")
        lines.append(json.dumps({"id": f"r{i}", "x": x.tolist()}).encode())
        if i % 97 == 13:
            lines.append(BAD_LINES[n_bad % len(BAD_LINES)])
            n_bad += 1
    path.write_bytes(b"\n".join(lines) + b"\n")
    return ids, n_bad


MODEL_BLOBS = "n_clusters = 4\ntau = 60\nn_init = 2\nrandom_state = 11"


def write_config(folder: Path, data: Path, *, dim: int = DIM, model: str = MODEL_BLOBS,
                 batch_size: int = 128) -> Path:
    config = folder / "streamkm.toml"
    config.write_text(f"""
[source]
paths = ["{data}"]
poll_interval_ms = 5
[decoding]
dim = {dim}
[model]
{model}
[batching]
batch_size = {batch_size}
first_batch_size = {batch_size}
max_wait_ms = 2000  # batches cut by size only: a time cut under load moves batch boundaries
[checkpoint]
dir = "ck"
every_batches = 4
every_seconds = 3600
keep = 3
[sinks]
assignments = "out/assignments.jsonl"
events = "out/events.jsonl"
dead_letter = "out/dead.jsonl"
[metrics]
enabled = false
[logging]
level = "info"
""")
    return config


def final_model(folder: Path) -> tuple[MiniBatchKernelKMeans, dict]:
    ckpt = CheckpointStore(folder / "ck").load_latest()
    assert ckpt is not None and ckpt.model_meta is not None
    return MiniBatchKernelKMeans.from_state(ckpt.model_arrays, ckpt.model_meta), ckpt.meta


def _started_runs(log: Path) -> int:
    return sum(e.get("event") == "service_started" for e in log_events(log))


def run_to_end(folder: Path, config: Path, n_valid: int) -> None:
    log = folder / "service.log"
    runs_before = _started_runs(log)
    proc = start_service(config, log)
    try:
        # the service must be up (its stop handlers installed) before it is stopped: when
        # an earlier, killed run had already written every assignment, a SIGTERM sent at
        # once arrived during start-up and ended the process with -15 (CI)
        wait_until(lambda: count_lines(folder / "out" / "assignments.jsonl") >= n_valid
                   and _started_runs(log) > runs_before, 90,
                   "every record assigned by a started service", [proc])
        assert stop(proc) == 0
    finally:
        kill(proc)


def crash_four_times_then_finish(folder: Path, config: Path, n_valid: int,
                                 service_process) -> None:
    """SIGKILL the service at seeded random points (the first likely before any batch),
    four times, then let a fifth run finish the input."""
    assignments = folder / "out" / "assignments.jsonl"
    rng = np.random.default_rng(2024)
    for round_ in range(4):
        proc = service_process(config, folder / "service.log")
        try:
            if round_ == 0:
                time.sleep(float(rng.uniform(0.05, 0.4)))  # likely before the first batch
            else:
                done = count_lines(assignments)
                if n_valid - done < 6:  # a killed run wrote (nearly) everything already
                    break
                target = done + int(rng.integers(1, (n_valid - done) // 3))
                wait_until(lambda: count_lines(assignments) >= target, 90,
                           f"{target} assignments", [proc], interval=0.005)
                time.sleep(float(rng.uniform(0, 0.02)))
        finally:
            kill(proc)
    run_to_end(folder, config, n_valid)


def assert_same_model(reference: Path, crashed: Path, n_valid: int) -> MiniBatchKernelKMeans:
    """The crashed run's final checkpoint equals the uninterrupted run's, bit for bit, and
    every valid record affected the model once; returns the crashed run's model."""
    expected, _ = final_model(reference)
    got, _ = final_model(crashed)
    assert int(got.counts_.sum()) == n_valid
    assert int(expected.counts_.sum()) == n_valid
    arrays_expected, model_meta_expected = expected.get_state()
    arrays_got, model_meta_got = got.get_state()
    assert set(arrays_got) == set(arrays_expected)
    for name in arrays_expected:
        np.testing.assert_array_equal(arrays_got[name], arrays_expected[name], err_msg=name)
    assert model_meta_got == model_meta_expected
    return got


@pytest.mark.slow
def test_sigkill_recovery_is_exactly_once(tmp_path: Path, service_process) -> None:
    data = tmp_path / "in.jsonl"
    ids, n_bad = write_input(data)

    reference = tmp_path / "reference"
    reference.mkdir()
    run_to_end(reference, write_config(reference, data), N_VALID)

    crashed = tmp_path / "crashed"
    crashed.mkdir()
    crash_four_times_then_finish(crashed, write_config(crashed, data), N_VALID,
                                 service_process)
    assert_same_model(reference, crashed, N_VALID)
    _, meta_got = final_model(crashed)
    assert meta_got["counters"]["records_accepted"] == N_VALID
    assert meta_got["counters"]["records_rejected"] == n_bad

    # File sinks are exactly-once: every valid id once, every bad record quarantined once.
    assignments = crashed / "out" / "assignments.jsonl"
    out = [json.loads(line) for line in assignments.read_text().splitlines()]
    assert sorted(rec["id"] for rec in out) == sorted(ids)
    assert count_lines(crashed / "out" / "dead.jsonl") == n_bad
    reference_out = (reference / "out" / "assignments.jsonl").read_text()
    assert assignments.read_text() == reference_out


N_STREAM = 4800


def _graph_kernel_stream(shape: str) -> tuple[np.ndarray, np.ndarray, int]:
    from sklearn.datasets import make_circles, make_moons

    if shape == "moons":
        x, labels = make_moons(N_STREAM, noise=0.08, random_state=3)
        return x, labels, 2
    if shape == "rings":  # twice as long: its batches are twice as large
        x, labels = make_circles(2 * N_STREAM, factor=0.4, noise=0.05, random_state=3)
        return x, labels, 2
    raise ValueError(f"no graph-kernel stream named {shape!r}")


@pytest.mark.slow
@pytest.mark.parametrize("shape, kernel, floor, asked", [
    ("moons", "heat", 0.95, "heat"), ("moons", "anchor", 0.95, None),
    ("rings", "level_set", 0.95, "level_set")])
def test_sigkill_recovery_keeps_the_auto_graph_kernel(tmp_path: Path, service_process,
                                                      shape: str, kernel: str,
                                                      floor: float, asked: str | None) -> None:
    """The default gamma="auto" resolves on the first batch to a graph kernel: the
    anchor-graph kernel on the moons (its anchors and feature map go into every
    checkpoint); the heat kernel on moons (its graph and spectrum) and the level-set kernel
    (its pieces' rows and labels) are asked for by name. A service killed and restarted four times ends
    with the uninterrupted run's model and outputs, bit for bit, and its assignments find
    the clusters."""
    from sklearn.metrics import adjusted_rand_score

    x, labels, k = _graph_kernel_stream(shape)
    n = x.shape[0]
    data = tmp_path / "stream.jsonl"
    data.write_bytes(b"".join(json.dumps({"id": f"m{i}", "x": row.tolist()}).encode() + b"\n"
                              for i, row in enumerate(x)))
    model_table = f"n_clusters = {k}\nrandom_state = 11"
    if asked is not None:
        model_table += f'\nkernel = "{asked}"'
    # the level set needs the first batch to hold enough of each ring
    settings = {"dim": 2, "model": model_table, "batch_size": 1200 if asked else 600}

    reference = tmp_path / "reference"
    reference.mkdir()
    run_to_end(reference, write_config(reference, data, **settings), n)
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    crash_four_times_then_finish(crashed, write_config(crashed, data, **settings), n,
                                 service_process)
    model = assert_same_model(reference, crashed, n)
    assert model.kernel_.name == kernel
    assignments = crashed / "out" / "assignments.jsonl"
    assert assignments.read_text() == (reference / "out" / "assignments.jsonl").read_text()
    cluster = {rec["id"]: rec["cluster"]
               for rec in map(json.loads, assignments.read_text().splitlines())}
    assert len(cluster) == n
    found = [cluster[f"m{i}"] for i in range(n)]
    assert adjusted_rand_score(labels, found) >= floor


@pytest.mark.slow
def test_sigterm_finishes_batch_checkpoints_and_exits_0(tmp_path: Path,
                                                       service_process) -> None:
    data = tmp_path / "in.jsonl"
    data.write_bytes(b"")
    config = write_config(tmp_path, data)
    stop_writer = threading.Event()

    def writer() -> None:
        rng = np.random.default_rng(5)
        i = 0
        with open(data, "ab") as fh:
            while not stop_writer.is_set():
                rows = rng.normal(size=(50, DIM))
                fh.write(b"".join(json.dumps({"id": i + j, "x": r.tolist()}).encode() + b"\n"
                                  for j, r in enumerate(rows)))
                fh.flush()
                i += len(rows)
                time.sleep(0.01)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    proc = service_process(config, tmp_path / "service.log")
    try:
        wait_until(lambda: count_lines(tmp_path / "out" / "assignments.jsonl") >= 1000, 60,
                   "1000 assignments", [proc])
        assert stop(proc) == 0
    finally:
        stop_writer.set()
        thread.join()
    ckpt = CheckpointStore(tmp_path / "ck").load_latest()
    assert ckpt is not None
    n_out = count_lines(tmp_path / "out" / "assignments.jsonl")
    assert int(ckpt.model_arrays["counts"].sum()) == ckpt.counters["records_accepted"] == n_out
    assert ckpt.sink_positions["assignments"]["bytes"] == os.path.getsize(
        tmp_path / "out" / "assignments.jsonl")
    events = [json.loads(line) for line in (tmp_path / "service.log").read_text().splitlines()]
    names = [e["event"] for e in events]
    assert names[-2:] == ["checkpoint_written", "service_stopped"]
    assert events[-2]["reason"] in ("shutdown", "batches")
