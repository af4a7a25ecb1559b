"""RTMM vs RSCD initial-pair generation, and bisection quality of RTMM pairs (Li and He).

Prints markdown tables (the ones in docs/benchmarks.md, section "drift"):

1. time to draw m distinct pairs of n items, RTMM vs RSCD (the seed's table 2 grid), and
   RTMM at n far beyond any dataset, to show it is flat in n and linear in m;
2. RSCD as m approaches N = n(n-1)/2, where collisions pile up, vs RTMM;
3. kernel 2-means bisection: SSE of the best of m RTMM pairs vs the best of m pairs drawn
   with repeats, over several seeds and datasets;
4. time of one ``kernel_bisect`` call (kernel matrix included) at reservoir sizes.

Run from the repository root, with one BLAS and one numba thread (the machine is shared,
and threads spinning on small GEMMs and kernel blocks only add contention)::

    OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_rtmm.py
    OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_rtmm.py --quick
    ... --tables bisect   # a subset: grid, flat, exhaustion, quality, bisect
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from sklearn.datasets import make_blobs, make_circles, make_moons

from streamkm.drift import kernel_2means_from_pairs, kernel_bisect, rscd_pairs, rtmm_pairs
from streamkm.kernels import KernelSpec, median_heuristic_gamma


def _timings(draw: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median and standard deviation of the wall time of ``draw()`` after a warm-up, in ms."""
    draw()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        draw()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times)), 1e3 * float(np.std(times))


def _fmt(median_std: tuple[float, float]) -> str:
    return f"{median_std[0]:.2f} ± {median_std[1]:.2f}"


def table_grid(repeats: int, sizes: list[int], counts: list[int]) -> None:
    print("### Time to draw m distinct pairs (ms, median ± std)\n")
    print("| n | N = n(n-1)/2 | m | RTMM | RSCD | RSCD / RTMM |")
    print("|---:|---:|---:|---:|---:|---:|")
    skipped = []
    for n in sizes:
        total = n * (n - 1) // 2
        for m in counts:
            if m > total:
                skipped.append((n, m))
                continue
            rng = np.random.default_rng(0)
            rtmm = _timings(lambda: rtmm_pairs(n, m, random_state=rng), repeats)
            rscd = _timings(lambda: rscd_pairs(n, m, random_state=rng), repeats)
            print(f"| {n} | {total} | {m} | {_fmt(rtmm)} | {_fmt(rscd)} | {rscd[0] / rtmm[0]:.0f}x |")
    print()
    print("skipped (m > N): " + (", ".join(f"n={n}, m={m}" for n, m in skipped) or "none"))
    print()


def table_flat_in_n(repeats: int, counts: list[int]) -> None:
    print("### RTMM alone at huge n (ms, median ± std): flat in n, linear in m\n")
    huge = [10**3, 10**6, 3 * 10**9, 2**32, 2**40, 2**62]
    print("| m | " + " | ".join(f"n={n:.3g}" for n in huge) + " |")
    print("|---:|" + "---:|" * len(huge))
    for m in counts:
        rng = np.random.default_rng(0)
        cells = []
        for n in huge:
            if m > n * (n - 1) // 2:
                cells.append("m > N")
                continue
            cells.append(_fmt(_timings(lambda: rtmm_pairs(n, m, random_state=rng), repeats)))
        print(f"| {m} | " + " | ".join(cells) + " |")
    print()
    print("(n > 2^32 uses the exact Python-integer path: Floyd sampling and math.isqrt per pair.)\n")


def table_near_exhaustion(repeats: int, n: int) -> None:
    total = n * (n - 1) // 2
    print(f"### Drawing most of the pairs: n = {n}, N = {total} (ms, median ± std)\n")
    print("| m / N | m | expected RSCD draws | RTMM | RSCD | RSCD / RTMM |")
    print("|---:|---:|---:|---:|---:|---:|")
    for fraction in (0.5, 0.75, 0.9, 0.99, 1.0):
        m = int(round(fraction * total))
        # coupon collector: N (H_N - H_{N-m}) draws to see m distinct pairs
        draws = total * sum(1.0 / k for k in range(total - m + 1, total + 1))
        rng = np.random.default_rng(1)
        rtmm = _timings(lambda: rtmm_pairs(n, m, random_state=rng), repeats)
        rscd = _timings(lambda: rscd_pairs(n, m, random_state=rng), repeats)
        print(f"| {fraction} | {m} | {draws:,.0f} | {_fmt(rtmm)} | {_fmt(rscd)} | {rscd[0] / rtmm[0]:.0f}x |")
    print()


def _random_pairs_with_repeats(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    first = rng.integers(0, n, size=m)
    second = rng.integers(0, n - 1, size=m)
    second += second >= first
    return np.stack([first, second], axis=1)


def _datasets(n: int, seed: int) -> dict[str, tuple[np.ndarray, KernelSpec]]:
    rng = np.random.default_rng(seed)
    blobs = make_blobs(n_samples=n, centers=4, cluster_std=1.5, random_state=seed)[0]
    moons = make_moons(n_samples=n, noise=0.1, random_state=seed)[0]
    circles = make_circles(n_samples=n, noise=0.05, factor=0.5, random_state=seed)[0]
    return {
        "blobs (4), linear": (blobs, KernelSpec("linear")),
        "moons, rbf": (moons, KernelSpec("rbf", gamma=median_heuristic_gamma(moons, "rbf", rng))),
        "circles, rbf": (circles, KernelSpec("rbf", gamma=4 * median_heuristic_gamma(circles, "rbf", rng))),
    }


def table_quality(seeds: int, sizes: list[int], counts: list[int]) -> None:
    print(f"### Bisection SSE: best of m RTMM pairs vs best of m pairs drawn with repeats ({seeds} seeds)\n")
    print("SSE is relative to the unsplit SSE (lower is better); 'distinct' is the mean number "
          "of distinct pairs among the m drawn with repeats; W/T/L counts seeds where RTMM's "
          "SSE is lower / equal (1e-9) / higher.\n")
    print("| dataset | n | m | RTMM SSE | repeats SSE | distinct (repeats) | W/T/L |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        results: dict[tuple[str, int], list[tuple[float, float, int]]] = {}
        for seed in range(seeds):
            for name, (rows, kernel) in _datasets(n, seed).items():
                k = kernel.block(rows, rows)
                unsplit = float(np.trace(k) - k.sum() / n)
                for m in counts:
                    rng = np.random.default_rng(1000 + seed)
                    rtmm = kernel_2means_from_pairs(k, rtmm_pairs(n, m, random_state=rng)).sse.min()
                    repeat_pairs = _random_pairs_with_repeats(n, m, rng)
                    repeat = kernel_2means_from_pairs(k, repeat_pairs).sse.min()
                    distinct = len({tuple(sorted(p)) for p in repeat_pairs.tolist()})
                    results.setdefault((name, m), []).append((rtmm / unsplit, repeat / unsplit, distinct))
        for (name, m), rows_ in results.items():
            arr = np.array(rows_)
            diff = arr[:, 0] - arr[:, 1]
            wins, ties = int((diff < -1e-9).sum()), int((np.abs(diff) <= 1e-9).sum())
            print(f"| {name} | {n} | {m} | {arr[:, 0].mean():.4f} | {arr[:, 1].mean():.4f} | "
                  f"{arr[:, 2].mean():.1f} | {wins}/{ties}/{len(arr) - wins - ties} |")
    print()


def table_bisect_time(repeats: int, sizes: list[int], counts: list[int]) -> None:
    print("### One kernel_bisect call, rbf kernel matrix included (ms, median ± std)\n")
    print("| n | " + " | ".join(f"m={m}" for m in counts) + " |")
    print("|---:|" + "---:|" * len(counts))
    for n in sizes:
        rows = make_moons(n_samples=n, noise=0.1, random_state=0)[0]
        kernel = KernelSpec("rbf", gamma=2.0)
        cells = []
        for m in counts:
            cells.append(_fmt(_timings(
                lambda: kernel_bisect(rows, kernel=kernel, n_pairs=m, random_state=0), repeats
            )))
        print(f"| {n} | " + " | ".join(cells) + " |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke run")
    parser.add_argument(
        "--tables", default="grid,flat,exhaustion,quality,bisect",
        help="comma-separated subset of: grid, flat, exhaustion, quality, bisect",
    )
    args = parser.parse_args()
    chosen = set(args.tables.split(","))
    counts = [1000, 10_000, 180_000]
    tables: dict[str, Callable[[], None]] = {
        "grid": lambda: table_grid(5, [1000, 10_000, 18_000], counts),
        "flat": lambda: table_flat_in_n(5, counts),
        "exhaustion": lambda: table_near_exhaustion(5, 600),
        "quality": lambda: table_quality(30, [16, 300], [1, 5, 20]),
        "bisect": lambda: table_bisect_time(10, [100, 300, 1000], [1, 5, 20]),
    }
    if args.quick:
        tables = {
            "grid": lambda: table_grid(2, [1000], [1000, 10_000]),
            "flat": lambda: table_flat_in_n(2, [1000]),
            "exhaustion": lambda: table_near_exhaustion(2, 100),
            "quality": lambda: table_quality(2, [16], [1, 5]),
            "bisect": lambda: table_bisect_time(2, [100], [1, 5]),
        }
    for name, run in tables.items():
        if name in chosen:
            run()


if __name__ == "__main__":
    main()
