"""The anchor kernel's nearest-anchor search: GEMM-narrowed (as shipped from
``GEMM_MIN_FEATURES`` features) against every distance by differences, side by side in one
run, interleaved.

Two tables, one thread (NUMBA / OpenBLAS / OMP), ``--repeats`` interleaved repeats,
median (min-max) and the per-repeat ratio differences / GEMM-narrowed:

1. ``nearest_anchors`` alone: 1,024 rows against 1,500 anchors (the anchor kernel's
   default count), r = 10, on 10-center Gaussian blobs of d features (d 16-784), the GEMM
   narrowing forced at every d; the two give the same indices and distances to the bit
   (checked every repeat).
2. The engine: per-batch time of ``MiniBatchKernelKMeans(10, kernel="anchor")
   .partial_fit`` on new 1,024-row batches of the same blobs (median of 20 batches, every
   batch updates, ``tol=0``), the search toggled by ``GEMM_MIN_FEATURES``.

    NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_anchor_search.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from sklearn.datasets import make_blobs  # noqa: E402

from streamkm import MiniBatchKernelKMeans  # noqa: E402
from streamkm._numba import anchor_graph  # noqa: E402

DIMS = (16, 32, 64, 128, 256, 784)
ENGINE_DIMS = (128, 256, 784)
ROWS, ANCHORS, NEAREST = 1024, 1500, 10


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.4f} ({min(values):.4f}-{max(values):.4f})"


def blobs(n: int, d: int, seed: int) -> np.ndarray:
    return make_blobs(n, n_features=d, centers=10, random_state=seed)[0]


@contextmanager
def gemm_from(features: int) -> Iterator[None]:
    """Narrow the search by a GEMM from ``features`` features on, inside the block."""
    saved = anchor_graph.GEMM_MIN_FEATURES
    anchor_graph.GEMM_MIN_FEATURES = features
    try:
        yield
    finally:
        anchor_graph.GEMM_MIN_FEATURES = saved


def search_times(d: int) -> tuple[float, float]:
    """Seconds by differences and GEMM-narrowed (forced below ``GEMM_MIN_FEATURES`` too)."""
    x = blobs(ROWS, d, 0)
    anchors_t = np.ascontiguousarray(blobs(ANCHORS, d, 0)[::-1].T)  # other draws, same centers
    out = {}
    with gemm_from(0):
        for name, search in (("gemm", anchor_graph.nearest_anchors),
                             ("differences", anchor_graph.nearest_anchors_by_differences)):
            t0 = time.perf_counter()
            out[name] = search(x, anchors_t, NEAREST)
            out[name + "_s"] = time.perf_counter() - t0
    for a, b in zip(out["gemm"], out["differences"]):
        assert np.array_equal(a, b), "the two searches differ"
    return out["differences_s"], out["gemm_s"]


def engine_batch_time(d: int, gemm: bool) -> float:
    with gemm_from(anchor_graph.GEMM_MIN_FEATURES if gemm else 10**9):
        x = blobs(22 * ROWS, d, 1)
        model = MiniBatchKernelKMeans(10, kernel="anchor", tol=0.0, random_state=0)
        model.partial_fit(x[:2 * ROWS])
        seconds = []
        for b in range(2, 22):
            t0 = time.perf_counter()
            model.partial_fit(x[b * ROWS:(b + 1) * ROWS])
            seconds.append(time.perf_counter() - t0)
        return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for d in DIMS:  # compile and warm up
        search_times(d)
    search = {d: ([], []) for d in DIMS}
    engine = {d: ([], []) for d in ENGINE_DIMS}
    for _ in range(args.repeats):
        for d in DIMS:
            slow, fast = search_times(d)
            search[d][0].append(slow)
            search[d][1].append(fast)
        for d in ENGINE_DIMS:
            engine[d][0].append(engine_batch_time(d, gemm=False))
            engine[d][1].append(engine_batch_time(d, gemm=True))
    print(f"\n| d | {ROWS} rows x {ANCHORS} anchors: by differences s | GEMM-narrowed s "
          "| differences / GEMM-narrowed |")
    print("|---|---|---|---|")
    for d in DIMS:
        slow, fast = search[d]
        note = "" if d >= anchor_graph.GEMM_MIN_FEATURES else " (shipped: by differences)"
        print(f"| {d}{note} | {summary(slow)} | {summary(fast)} | "
              f"{summary([s / f for s, f in zip(slow, fast)])} |")
    print("\n| d | engine partial_fit per 1,024-row batch, anchor kernel: by differences s "
          "| GEMM-narrowed s | ratio | rows/s GEMM-narrowed |")
    print("|---|---|---|---|---|")
    for d in ENGINE_DIMS:
        slow, fast = engine[d]
        print(f"| {d} | {summary(slow)} | {summary(fast)} | "
              f"{summary([s / f for s, f in zip(slow, fast)])} | "
              f"{ROWS / statistics.median(fast):,.0f} |")


if __name__ == "__main__":
    main()
