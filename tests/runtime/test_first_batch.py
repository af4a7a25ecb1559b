"""The model's first batch is its initialisation sample: it holds ``first_batch_size`` rows
(by default at least 3,072) and on a slow stream it is given ``first_batch_wait_ms`` to
fill, so ``gamma="auto"`` can see enough rows to choose a graph kernel for non-convex
clusters (in process, a real file appended by a writer, or written before the start)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from sklearn.datasets import make_moons

from streamkm.app.service import Service
from streamkm.config.schema import config_from_mapping
from streamkm.io.batcher import Batch
from streamkm.runtime import Learned, RuntimeHook

pytestmark = pytest.mark.integration

WRITE_EVERY_S = 0.1


class FirstBatch(RuntimeHook):
    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.seen = threading.Event()

    def on_batch(self, runtime: Any, batch: Batch, learned: Learned) -> None:
        if batch.n_valid:
            self.sizes.append(batch.n_valid)
            self.seen.set()


def _start_service(tmp_path: Path, batching: dict[str, Any]
                   ) -> tuple[Service, FirstBatch, threading.Thread]:
    """The service (k 2, 2-d records) reading ``in.jsonl`` from the start, in a thread."""
    config = config_from_mapping({
        "source": {"paths": ["in.jsonl"], "start_at": "beginning", "poll_interval_ms": 5},
        "decoding": {"dim": 2}, "batching": batching,
        "model": {"n_clusters": 2, "random_state": 0},
        "checkpoint": {"dir": "ckpt"},
        "sinks": {"assignments": "out/assignments.jsonl"},
        "metrics": {"enabled": False},
    }, base_dir=tmp_path)
    service = Service(config, registry=CollectorRegistry())
    hook = FirstBatch()
    service.add_hook(hook)
    service.start()
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    return service, hook, runner


def _run_on_a_slow_stream(tmp_path: Path, batching: dict[str, Any],
                          rows_per_write: int) -> tuple[int, str]:
    """Size of the model's first batch and the kernel it chose, on a stream of
    ``rows_per_write`` records every 0.1 s."""
    x, _ = make_moons(6000, noise=0.06, random_state=0)
    data = tmp_path / "in.jsonl"
    data.write_bytes(b"")
    service, hook, runner = _start_service(tmp_path, batching)
    stop_writing = threading.Event()

    def write() -> None:
        with open(data, "a") as fh:
            for start in range(0, len(x), rows_per_write):
                if stop_writing.is_set():
                    return
                fh.write("".join(json.dumps({"id": i, "x": x[i].tolist()}) + "\n"
                                 for i in range(start, start + rows_per_write)))
                fh.flush()
                time.sleep(WRITE_EVERY_S)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        assert hook.seen.wait(30), "no batch within 30 s"
    finally:
        stop_writing.set()
        writer.join()
        service.request_stop()
        runner.join(60)
    assert not runner.is_alive()
    return hook.sizes[0], service.model.kernel_.name


def test_a_slow_streams_first_batch_fills_and_auto_chooses_a_graph_kernel(tmp_path):
    # ~1600 records/s: 3072 rows take ~1.9 s, within the default 5 s even at half speed
    size, kernel = _run_on_a_slow_stream(tmp_path, {}, rows_per_write=160)
    assert size == 3072
    assert kernel == "anchor"


def test_first_batch_size_sets_the_first_batch(tmp_path):
    size, kernel = _run_on_a_slow_stream(tmp_path, {"first_batch_size": 1024},
                                         rows_per_write=160)
    assert size == 1024
    assert kernel == "anchor"


def test_without_the_longer_first_wait_the_first_batch_is_cut_short(tmp_path):
    # ~300 records/s: 500 ms gives ~150 rows (3072 would need the writer 10 s ahead)
    size, kernel = _run_on_a_slow_stream(
        tmp_path, {"max_wait_ms": 500, "first_batch_wait_ms": 500}, rows_per_write=30)
    assert size < 1024
    assert kernel == ("anchor" if size >= 500 else "rbf")


def test_the_default_first_batch_finds_two_noisy_rings(tmp_path):
    """Rings of factor 0.6 with noise 0.08 (so much noise between them that every k-nn
    graph joins them): from a first batch of 1,024 rows "auto" keeps a kernel that cuts
    across both rings (ARI ~0); from the default 3,072 it takes the level set."""
    from sklearn.datasets import make_circles
    from sklearn.metrics import adjusted_rand_score

    x, labels = make_circles(6000, factor=0.6, noise=0.08, random_state=0)
    (tmp_path / "in.jsonl").write_text("".join(
        json.dumps({"id": i, "x": row.tolist()}) + "\n" for i, row in enumerate(x)))
    service, hook, runner = _start_service(tmp_path, {})
    try:
        deadline = time.monotonic() + 60
        while sum(hook.sizes) < len(x) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        service.request_stop()
        runner.join(60)
    assert not runner.is_alive()
    assert hook.sizes[0] == 3072 and sum(hook.sizes) == len(x)
    assert service.model.kernel_.name == "level_set"
    rows = [json.loads(line) for line in
            (tmp_path / "out" / "assignments.jsonl").read_text().splitlines()]
    found = {str(row["id"]): row["cluster"] for row in rows}
    assert adjusted_rand_score(labels, [found[str(i)] for i in range(len(x))]) >= 0.95
