"""Per-batch cost of the median-width rbf, the anchor-graph kernel (what ``gamma="auto"``
resolves to on most data) and the density-weighted heat kernel, on the same streams.

Each model is initialised on its first batch (as the service does, 1024 rows: the anchor
kernel's anchors and the heat kernel's landmarks are that batch), then timed on the next
batches, in updating mode (``tol=0``: every step updates) and converged mode (defaults:
after early stop the steps only assign). Kernels are interleaved within each repeat; one
thread. Usage::

    NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_auto_kernels.py --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _quality_data import pendigits  # noqa: E402

from streamkm import MiniBatchKernelKMeans  # noqa: E402

BATCH = 1024
STEPS = 24
KERNELS = {
    "rbf (median width)": {"gamma": "median"},
    "anchor": {"kernel": "anchor"},
    "heat (auto's options)": {"kernel": "heat",
                              "kernel_params": {"n_neighbors": 20, "weights": "density"}},
}
MODES = {"updating": {"tol": 0.0, "patience": 1_000_000}, "converged": {}}


def streams() -> dict[str, tuple[np.ndarray, int]]:
    """The service benchmark's blobs (bench_pipeline.make_data) at d 2 and 32, and PenDigits."""
    out = {}
    for dim in (2, 32):
        rng = np.random.default_rng(0)
        centers = rng.normal(0, 4, size=(8, dim))
        n = BATCH * (STEPS + 1)
        out[f"blobs d={dim}, k=8"] = (centers[rng.integers(8, size=n)]
                                      + rng.normal(size=(n, dim)), 8)
    x, _ = pendigits()
    rows = np.random.default_rng(0).integers(x.shape[0], size=BATCH * (STEPS + 1))
    out["PenDigits d=16, k=10"] = (x[rows], 10)
    return out


def per_batch_ms(x: np.ndarray, k: int, params: dict, mode: str) -> float:
    model = MiniBatchKernelKMeans(k, batch_size=BATCH, n_init=1, random_state=0,
                                  **params, **MODES[mode])
    model.partial_fit(x[:BATCH])
    t0 = time.perf_counter()
    for start in range(BATCH, x.shape[0], BATCH):
        model.partial_fit(x[start:start + BATCH])
    return (time.perf_counter() - t0) / STEPS * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    data = streams()
    x, k = next(iter(data.values()))
    for params in KERNELS.values():  # compile every kernel outside the timing
        per_batch_ms(x[:3 * BATCH], k, params, "updating")
    timings: dict[tuple[str, str, str], list[float]] = {}
    for _ in range(args.repeats):
        for name, (x, k) in data.items():
            for mode in MODES:
                for kernel, params in KERNELS.items():
                    timings.setdefault((name, mode, kernel), []).append(
                        per_batch_ms(x, k, params, mode))
    print(f"\n| stream | mode | " + " | ".join(f"{k} ms / batch" for k in KERNELS)
          + " | anchor / rbf |")
    print("|---|---|" + "---|" * (len(KERNELS) + 1))
    for name in data:
        for mode in MODES:
            cells = []
            for kernel in KERNELS:
                v = timings[(name, mode, kernel)]
                cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})")
            ratio = [a / r for a, r in zip(timings[(name, mode, "anchor")],
                                           timings[(name, mode, "rbf (median width)")])]
            cells.append(f"{statistics.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})")
            print(f"| {name} | {mode} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
