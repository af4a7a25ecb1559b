"""Benchmarks of the foundations (streamkm.batch): 1-D DP scaling, Lloyd vs scikit-learn,
and full-batch kernel k-means at n = 20,000.

Run from the repository root:

    .venv/bin/python benchmarks/bench_foundations.py [--quick]

Prints markdown tables (the ones in docs/benchmarks.md, section "foundations").
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Callable

import numpy as np

from streamkm.batch import KernelKMeans, KMeans, kmeans_1d, kmeans_plusplus


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls (seconds)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_kmeans_1d(sizes: list[int], k: int) -> None:
    rng = np.random.default_rng(0)
    kmeans_1d(rng.normal(size=100), k)  # compile
    print(f"\n### Exact 1-D k-means (DP + divide and conquer), k = {k}\n")
    print("| n | time (s) | time / (n log2 n) (ns) | cost |")
    print("|---:|---:|---:|---:|")
    for n in sizes:
        centers = rng.normal(0, 10, size=k)
        x = centers[rng.integers(0, k, n)] + rng.normal(size=n)
        cost = kmeans_1d(x, k)[2]
        t = best_time(lambda: kmeans_1d(x, k), 3 if n <= 10**5 else 1)
        print(f"| {n:,} | {t:.4f} | {t / (n * math.log2(n)) * 1e9:.2f} | {cost:.4g} |")


def bench_lloyd(configs: list[tuple[int, int, int]], max_iter: int) -> None:
    from sklearn.cluster import KMeans as SkKMeans
    from sklearn.datasets import make_blobs
    from threadpoolctl import threadpool_limits

    KMeans(2, random_state=0).fit(np.random.default_rng(0).normal(size=(100, 2)))  # compile
    print(
        "\n### Lloyd: streamkm.batch.KMeans vs scikit-learn KMeans "
        f"(same init, tol=0, max_iter={max_iter})\n"
    )
    print(
        "| n | d | k | dtype | streamkm (s) | sklearn, default threads (s) | sklearn, 1 thread (s) "
        "| streamkm / sklearn (default, 1 thread) | iterations (ours/sk) | inertia rel. diff |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|---|---|---:|")
    for n, d, k in configs:
        for dtype in (np.float64, np.float32):
            x, _ = make_blobs(n, n_features=d, centers=k, cluster_std=4.0, random_state=1)
            x = x.astype(dtype)
            init, _ = kmeans_plusplus(x, k, np.random.default_rng(2))
            ours = KMeans(k, init=init, max_iter=max_iter, tol=0.0)
            ref = SkKMeans(k, init=init, n_init=1, max_iter=max_iter, tol=0.0, algorithm="lloyd")
            t_ours = best_time(lambda: ours.fit(x), 2)
            t_ref = best_time(lambda: ref.fit(x), 2)
            with threadpool_limits(1):
                t_ref1 = best_time(lambda: ref.fit(x), 2)
            rel = abs(ours.inertia_ - ref.inertia_) / ref.inertia_
            print(
                f"| {n:,} | {d} | {k} | {np.dtype(dtype).name} | {t_ours:.3f} | {t_ref:.3f} | "
                f"{t_ref1:.3f} | {t_ours / t_ref:.2f}, {t_ours / t_ref1:.2f} | "
                f"{ours.n_iter_}/{ref.n_iter_} | {rel:.1e} |"
            )


def bench_kernel_kmeans(n: int) -> None:
    from sklearn.datasets import make_blobs

    x, _ = make_blobs(n, n_features=10, centers=10, random_state=0)
    print(
        "\n### Full-batch kernel k-means (rbf, median-heuristic gamma, k = 10, n_init = 1), "
        f"n = {n:,}\n"
    )
    print("| dtype | time (s) | iterations | objective | kernel matrix (GB) |")
    print("|---|---:|---:|---:|---:|")
    for dtype in (np.float32, np.float64):
        xd = x.astype(dtype)
        model = KernelKMeans(10, n_init=1, random_state=0)
        t = best_time(lambda: model.fit(xd), 1)
        gb = n * n * np.dtype(dtype).itemsize / 1e9
        print(
            f"| {np.dtype(dtype).name} | {t:.2f} | {model.n_iter_} | {model.objective_:.5f} "
            f"| {gb:.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = parser.parse_args()
    if args.quick:
        bench_kmeans_1d([10**3, 10**4, 10**5], k=10)
        bench_lloyd([(20_000, 8, 8)], max_iter=50)
        bench_kernel_kmeans(2_000)
    else:
        bench_kmeans_1d([10**3, 10**4, 10**5, 10**6], k=10)
        bench_lloyd([(100_000, 16, 32), (200_000, 2, 8)], max_iter=100)
        bench_kernel_kmeans(20_000)


if __name__ == "__main__":
    main()
