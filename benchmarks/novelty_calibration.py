"""Calibration of the novelty score: the share of records flagged at ``outlier_alpha`` on
streams without outliers, after warm-up (the batches after the first ``WARMUP``).

Run from the repository root:

    .venv/bin/python benchmarks/novelty_calibration.py [--alpha 0.01]

Prints the markdown table of docs/novelty.md ("Calibration"). The streams are seeded and the
figures are counts, not timings: tests/cluster/test_novelty_calibration.py checks the same
streams. Streams: blobs (16,384 rows, 5 clusters, d = 8), moons (16,384 rows, noise 0.08,
2 clusters), gauss64 (16,384 rows, 10 clusters, d = 64, sd 2), digits (scikit-learn's ``load_digits``, standardised, 8 shuffled passes,
10 clusters) and the KEEL set penbased (10,992 rows, d = 16, shuffled, 10 clusters); each in
batches of 1,024 with the default ``outliers="exclude"``. Kernels: the default
(``gamma="auto"``, which may choose a graph kernel; the chosen one is shown), rbf at the
median width and linear.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np
from sklearn.datasets import make_blobs, make_moons

from streamkm import MiniBatchKernelKMeans

_spec = importlib.util.spec_from_file_location(
    "_quality_data", Path(__file__).resolve().parent / "_quality_data.py")
quality_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quality_data)

BATCH = 1024
WARMUP = 4  # batches before the flags are counted
STREAMS = ("blobs", "moons", "gauss64", "digits", "penbased")
KERNELS = {"auto": {}, "rbf": {"gamma": "median"}, "linear": {"kernel": "linear"}}


def stream(name: str) -> tuple[np.ndarray, int]:
    """The rows of the stream ``name`` in arrival order and its number of clusters."""
    if name == "blobs":
        return make_blobs(16384, centers=5, n_features=8, random_state=0)[0], 5
    if name == "moons":
        return make_moons(16384, noise=0.08, random_state=0)[0], 2
    if name == "gauss64":
        return make_blobs(16384, centers=10, n_features=64, cluster_std=2.0,
                          random_state=0)[0], 10
    if name == "digits":
        x = quality_data.digits()[0]
        rng = np.random.default_rng(0)
        return np.vstack([x[rng.permutation(len(x))] for _ in range(8)]), 10
    if name == "penbased":
        x = quality_data.keel("penbased")[0]
        return x[np.random.default_rng(1).permutation(len(x))], 10
    raise ValueError(f"unknown stream {name!r}")


def flagged_share(name: str, kernel: str, alpha: float = 0.01) -> tuple[float, str]:
    """Share of the rows flagged after warm-up, and the kernel the model used."""
    x, k = stream(name)
    model = MiniBatchKernelKMeans(k, random_state=0, outlier_alpha=alpha, **KERNELS[kernel])
    flags = []
    for i, batch in enumerate(np.array_split(x, len(x) // BATCH)):
        report = model.step(batch)
        if i >= WARMUP:
            flags.append(report.outliers)
    return float(np.concatenate(flags).mean()), model.kernel_.name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=0.01)
    args = parser.parse_args()
    print(f"| stream | kernel | kernel used | flagged at alpha = {args.alpha} |")
    print("|---|---|---|---|")
    for name in STREAMS:
        for kernel in KERNELS:
            share, used = flagged_share(name, kernel, args.alpha)
            print(f"| {name} | {kernel} | {used} | {share:.4f} |", flush=True)


if __name__ == "__main__":
    main()
