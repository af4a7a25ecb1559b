"""Pipeline throughput: the service reading a file versus the engine fed arrays in-process.

For each wire format (JSON lines, float32 binary) the same records are written to a file and
run through the whole service (file tailer -> decoder -> batcher -> engine -> assignment,
dead-letter and event sinks -> checkpoints), in-process, metrics registry included, no HTTP
server. The baseline feeds the identical arrays, in the identical batches, to
``MiniBatchKernelKMeans.step`` directly. Both are timed from the end of the first
(initialising) batch to the last record, so the initialisation is excluded from both.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_pipeline.py \
        [--records 65536] [--dim 32] [--k 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from streamkm import MiniBatchKernelKMeans
from streamkm.service.config import config_from_mapping
from streamkm.service.runtime import Service

BATCH = 1024


def make_data(n: int, dim: int, k: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 4, size=(k, dim))
    return (centers[rng.integers(k, size=n)] + rng.normal(size=(n, dim))).astype(np.float32)


def write_json(path: Path, x: np.ndarray) -> None:
    with open(path, "w") as fh:
        for i, row in enumerate(x.tolist()):
            fh.write(json.dumps({"id": i, "x": row}) + "\n")


def model_params(k: int) -> dict:
    return {"n_clusters": k, "kernel": "rbf", "tau": 200, "n_init": 1, "random_state": 0}


def engine_only(x: np.ndarray, k: int, dtype: type) -> tuple[float, int]:
    """Seconds for steps 2.. of the engine on the same batches; returns (seconds, rows)."""
    model = MiniBatchKernelKMeans(batch_size=BATCH, **model_params(k))
    xs = x.astype(dtype)
    model.step(xs[:BATCH])
    t0 = time.perf_counter()
    for start in range(BATCH, len(xs), BATCH):
        model.step(xs[start:start + BATCH])
    return time.perf_counter() - t0, len(xs) - BATCH


def pipeline(folder: Path, data: Path, fmt: str, dim: int, k: int, n: int,
             dtype: str) -> dict[str, float]:
    source = {"paths": [str(data)], "poll_interval_ms": 5}
    if fmt == "float32":
        source.update(framing="fixed", record_size=4 * dim)
    config = config_from_mapping({
        "source": source,
        "decoding": {"format": fmt, "dim": dim, "dtype": dtype},
        "model": model_params(k),
        "batching": {"batch_size": BATCH, "max_wait_ms": 1000},
        "checkpoint": {"dir": "ck", "every_batches": 25, "every_seconds": 60},
        "sinks": {"assignments": "assignments.jsonl", "events": "events.jsonl",
                  "dead_letter": "dead.jsonl"},
        "metrics": {"enabled": False},
        "logging": {"level": "warning"},
    }, base_dir=folder, where="of the benchmark")
    service = Service(config)
    service.start()
    marks: dict[str, float] = {}
    after_first: dict[str, float] = {}

    def watch() -> None:
        while service.status.records_accepted < BATCH:
            time.sleep(0.0005)
        marks["first"] = time.perf_counter()
        s = service.status
        after_first.update(read=s.read_seconds, decode=s.decode_seconds,
                           model=s.model_seconds, sinks=s.sink_seconds,
                           checkpoint=s.checkpoint_seconds)
        while service.status.records_accepted < n:
            time.sleep(0.0005)
        marks["done"] = time.perf_counter()
        service.request_stop()

    watcher = threading.Thread(target=watch)
    watcher.start()
    service.run()
    watcher.join()
    s = service.status
    wall = marks["done"] - marks["first"]
    parts = {
        "read": s.read_seconds - after_first["read"],
        "decode": s.decode_seconds - after_first["decode"],
        "engine": s.model_seconds - after_first["model"],
        "sinks": s.sink_seconds - after_first["sinks"],
        "checkpoint": s.checkpoint_seconds - after_first["checkpoint"],
    }
    parts["rest"] = wall - sum(parts.values())
    return {"seconds": wall, "rows": n - BATCH, **parts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=64 * BATCH)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3,
                        help="interleaved engine/pipeline runs; the fastest of each is kept")
    args = parser.parse_args()
    n = args.records - args.records % BATCH
    x = make_data(n, args.dim, args.k)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, dtype in (("json", "float64"), ("float32", "float32")):
            data = Path(tmp) / ("in.jsonl" if fmt == "json" else "in.f32")
            if fmt == "json":
                write_json(data, x)
            else:
                data.write_bytes(x.astype("<f4").tobytes())
            engine_best, best = float("inf"), None
            for rep in range(args.repeats):
                engine_seconds, engine_rows = engine_only(x, args.k, np.dtype(dtype).type)
                engine_best = min(engine_best, engine_seconds)
                folder = Path(tmp) / f"{fmt}-{rep}"
                folder.mkdir()
                result = pipeline(folder, data, fmt, args.dim, args.k, n, dtype)
                if best is None or result["seconds"] < best["seconds"]:
                    best = result
            assert best is not None
            rows.append((fmt, dtype, engine_rows / engine_best, best["rows"] / best["seconds"],
                         best))
    print(f"records={n} dim={args.dim} k={args.k} kernel=rbf tau=200 batch={BATCH} "
          f"(best of {args.repeats} interleaved runs)")
    keys = ("read", "decode", "engine", "sinks", "checkpoint", "rest")
    print("| format | dtype | engine rec/s | pipeline rec/s | ratio | "
          + " | ".join(keys) + " |")
    print("|---|---|---|---|---|" + "---|" * len(keys))
    for fmt, dtype, engine_rate, pipe_rate, r in rows:
        share = " | ".join(f"{100 * r[key] / r['seconds']:.0f}%" for key in keys)
        print(f"| {fmt} | {dtype} | {engine_rate:,.0f} | {pipe_rate:,.0f} | "
              f"{pipe_rate / engine_rate:.2f} | {share} |")


if __name__ == "__main__":
    main()
