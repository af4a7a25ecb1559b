"""RTMM vs RSCD vs FRUS initial starts, and bisection quality of each seeding (Li and He).

Prints markdown tables (the ones in docs/benchmarks.md, section "drift"):

1. time to draw m distinct pairs of n items, RTMM vs RSCD (the seed's table 2 grid), and
   RTMM at n far beyond any dataset, to show it is flat in n and linear in m;
2. RSCD as m approaches N = n(n-1)/2, where collisions pile up, vs RTMM;
3. kernel 2-means bisection: SSE of the best of m RTMM pairs vs the best of m pairs drawn
   with repeats, over several seeds and datasets;
4. time of one ``kernel_bisect`` call (kernel matrix included) at reservoir sizes;
5. seed 003's experiment (a): time of m initial starts by RTMM, RSCD and FRUS vs the
   dimension, on generated data shaped like 20NEWS, IMDB (sparse TF-IDF) and MNIST (dense);
6. seed 003's experiment (b): the same vs m;
7. split quality of each seeding (``kernel_bisect(..., seeding=...)``) on data with a known
   best split.

Tables 5-7 interleave the methods inside every repeat and report median (min-max).

Run from the repository root, with one BLAS and one numba thread (the machine is shared,
and threads spinning on small GEMMs and kernel blocks only add contention)::

    OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_rtmm.py
    OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_rtmm.py --quick
    ... --tables dimension,growth,seedings   # a subset: grid, flat, exhaustion, quality,
                                             # bisect, dimension, growth, seedings
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from sklearn.datasets import make_blobs, make_circles, make_moons

import scipy.sparse as sp

from bench_sketch import tfidf_like, tfidf_like_with_topics
from streamkm.drift import (
    feature_range,
    kernel_2means_from_pairs,
    kernel_bisect,
    rscd_pairs,
    rtmm_pairs,
    uniform_in_box,
)
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


# ---- seed 003's high-dimensional experiments: RTMM vs RSCD vs FRUS -----------------------

# FRUS centers are dense: 2 m of them at 1.7e5 features do not fit in memory for large m, so
# they are drawn in chunks of at most this many values and handed on (discarded here), as a
# bisection consuming them pair by pair would.
_FRUS_CHUNK_VALUES = 2**22


def mnist_like(n_rows: int, seed: int) -> np.ndarray:
    """Dense 28 x 28 'digit' images: a few bright strokes on a dark background, in [0, 1]."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:28, 0:28]
    images = np.zeros((n_rows, 28, 28))
    for _ in range(4):
        cy, cx = rng.uniform(6, 22, size=(2, n_rows, 1, 1))
        width = rng.uniform(1.0, 2.5, size=(n_rows, 1, 1))
        images += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * width**2))
    images = np.clip(images, 0, 1)
    images[images < 0.1] = 0.0
    return images.reshape(n_rows, 784)


def paper_datasets(seed: int = 0) -> dict[str, tuple[object, int]]:
    """Generated stand-ins for seed 003's 20NEWS, IMDB and MNIST: name -> (rows, n_rows)."""
    return {
        "20NEWS-like (1.8e4 x 173451, sparse)": (tfidf_like(seed, 18_000, 173_451, 20, 120), 18_000),
        "IMDB-like (2e4 x 73063, sparse)": (tfidf_like(seed + 1, 20_000, 73_063, 2, 120), 20_000),
        "MNIST-like (1e4 x 784, dense)": (mnist_like(10_000, seed + 2), 10_000),
    }


def frus_stream(x: object, n_centers: int, rng: np.random.Generator) -> float:
    """Draw n_centers FRUS centers of x chunk by chunk; returns a checksum (keeps work live)."""
    low, high = feature_range(x)
    chunk = max(1, _FRUS_CHUNK_VALUES // low.shape[0])
    total = 0.0
    for start in range(0, n_centers, chunk):
        total += float(uniform_in_box(low, high, min(chunk, n_centers - start), rng)[0, 0])
    return total


def interleaved(methods: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Wall times (ms) of every method, one call of each per repeat in rotating order, after
    one warm-up call each."""
    for run in methods.values():
        run()
    names = list(methods)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            methods[name]()
            times[name].append(1e3 * (time.perf_counter() - start))
    return times


def _med(times: list[float]) -> str:
    return f"{np.median(times):.3g} ({min(times):.3g}-{max(times):.3g})"


def _three_methods(x: object, n: int, m: int) -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(0)
    return {
        "RTMM": lambda: rtmm_pairs(n, m, random_state=rng),
        "RSCD": lambda: rscd_pairs(n, m, random_state=rng),
        "FRUS": lambda: frus_stream(x, 2 * m, rng),
    }


def table_dimension(repeats: int, counts: list[int], datasets: dict[str, tuple[object, int]]) -> None:
    print(f"### Seed 003 (a): time of m initial starts vs the dimension (ms, median (min-max) of {repeats}, interleaved)\n")
    print("RTMM and RSCD draw m pairs of row indices; FRUS draws 2 m centers in the feature range "
          "(range included; 'range' is that part alone).\n")
    print("| data | n_features | m | RTMM | RSCD | FRUS | FRUS range | FRUS / RTMM |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, (x, n) in datasets.items():
        d = x.shape[1]
        for m in counts:
            methods = _three_methods(x, n, m)
            methods["range"] = lambda: feature_range(x)
            t = interleaved(methods, repeats)
            ratio = np.median(t["FRUS"]) / np.median(t["RTMM"])
            print(f"| {name} | {d} | {m} | {_med(t['RTMM'])} | {_med(t['RSCD'])} | "
                  f"{_med(t['FRUS'])} | {_med(t['range'])} | {ratio:,.0f}x |")
    print()


def table_growth(repeats: int, x: np.ndarray, counts_by_n: dict[int, list[int]]) -> None:
    print(f"### Seed 003 (b): time of m initial starts vs m, 784 features (ms, median (min-max) of {repeats}, interleaved)\n")
    print("n rows of the MNIST-like data; per-pair cost in ns in brackets.\n")
    print("| n | N = n(n-1)/2 | m | m / N | RTMM | RSCD | FRUS |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, counts in counts_by_n.items():
        rows = x[:n]
        total = n * (n - 1) // 2
        for m in counts:
            t = interleaved(_three_methods(rows, n, m), repeats)
            cells = [f"{_med(t[k])} [{1e6 * np.median(t[k]) / m:.0f}]" for k in ("RTMM", "RSCD", "FRUS")]
            print(f"| {n} | {total} | {m} | {m / total:.2g} | " + " | ".join(cells) + " |")
    print()


def _two_group_data(seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Datasets with a known best 2-split: rows and the generating side of each row."""
    out = {}
    # four blobs at the corners of an 8 x 3 rectangle: left | right is best, top | bottom a
    # local optimum 2-means can get stuck in
    x, corner = make_blobs(n_samples=300, centers=[[0, 0], [0, 3], [8, 0], [8, 3]],
                           cluster_std=1.0, random_state=seed)
    out["4 blobs on an 8 x 3 rectangle, 2-D"] = (x, (corner >= 2).astype(int))
    centers = np.zeros((2, 50))
    centers[1, :] = 0.45
    x, y = make_blobs(n_samples=300, centers=centers, cluster_std=1.0, random_state=seed)
    out["2 blobs 3.2 std apart, 50-D"] = (x, y)
    x, y = make_blobs(n_samples=[270, 30], centers=[[0] * 10, [2] * 10], cluster_std=1.0,
                      random_state=seed)
    out["blobs 270 + 30, 10-D"] = (x, y)
    docs, topic = tfidf_like_with_topics(seed, 300, 2000, 2, 40)
    out["2 topics, TF-IDF-like 2000-D"] = (docs.toarray(), topic)
    return out


def _euclidean_sse(x: np.ndarray, labels: np.ndarray) -> float:
    return float(sum(((x[labels == c] - x[labels == c].mean(axis=0)) ** 2).sum() for c in np.unique(labels)))


def table_seedings(seeds: int, counts: list[int]) -> None:
    print(f"### Split quality of each seeding, linear kernel, n = 300 ({seeds} seeds)\n")
    print("'best' (the best known split) is the lower of the SSE of the generating split and of 2-means started from it. "
          "SSE / best is the mean over seeds (1 = the known best split); 'hit' the fraction of "
          "seeds whose split reaches it (relative 1e-9); ARI against the generating split.\n")
    print("| data | m | RTMM SSE / best | RSCD SSE / best | FRUS SSE / best | hit RTMM / RSCD / FRUS | ARI RTMM / RSCD / FRUS |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    from sklearn.metrics import adjusted_rand_score

    results: dict[tuple[str, int], dict[str, list[tuple[float, bool, float]]]] = {}
    for seed in range(seeds):
        for name, (x, y) in _two_group_data(seed).items():
            refined = kernel_2means_from_labels_once(x, y)
            best = min(_euclidean_sse(x, y), _euclidean_sse(x, refined))
            for m in counts:
                cell = results.setdefault((name, m), {"rtmm": [], "rscd": [], "frus": []})
                for seeding in cell:
                    r = kernel_bisect(x, n_pairs=m, seeding=seeding, random_state=1000 + seed)
                    cell[seeding].append((r.sse / best, r.sse <= best * (1 + 1e-9),
                                          adjusted_rand_score(y, r.labels)))
    for (name, m), cell in results.items():
        arr = {k: np.array(v, dtype=float) for k, v in cell.items()}
        order = ("rtmm", "rscd", "frus")
        sse = " | ".join(f"{arr[k][:, 0].mean():.4f}" for k in order)
        hit = " / ".join(f"{arr[k][:, 1].mean():.2f}" for k in order)
        ari = " / ".join(f"{arr[k][:, 2].mean():.2f}" for k in order)
        print(f"| {name} | {m} | {sse} | {hit} | {ari} |")
    print()


def kernel_2means_from_labels_once(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Linear-kernel 2-means started from the given split (the known split's local optimum)."""
    from streamkm.drift import kernel_2means_from_labels

    return kernel_2means_from_labels(x @ x.T, labels[None, :]).labels[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke run")
    parser.add_argument(
        "--tables", default="grid,flat,exhaustion,quality,bisect,dimension,growth,seedings",
        help="comma-separated subset of: grid, flat, exhaustion, quality, bisect, dimension, "
             "growth, seedings",
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
        "dimension": lambda: table_dimension(5, [100, 1000], paper_datasets()),
        "growth": lambda: table_growth(5, mnist_like(10_000, 2), {
            10_000: [100, 1000, 10_000, 100_000, 180_000],
            600: [1000, 10_000, 100_000, 170_000, 179_700],
        }),
        "seedings": lambda: table_seedings(30, [1, 5, 20]),
    }
    if args.quick:
        tables = {
            "grid": lambda: table_grid(2, [1000], [1000, 10_000]),
            "flat": lambda: table_flat_in_n(2, [1000]),
            "exhaustion": lambda: table_near_exhaustion(2, 100),
            "quality": lambda: table_quality(2, [16], [1, 5]),
            "bisect": lambda: table_bisect_time(2, [100], [1, 5]),
            "dimension": lambda: table_dimension(2, [10], {
                "20NEWS-like, small": (tfidf_like(0, 500, 173_451, 20, 120), 500),
                "MNIST-like, small": (mnist_like(500, 2), 500),
            }),
            "growth": lambda: table_growth(2, mnist_like(200, 2), {200: [100, 10_000]}),
            "seedings": lambda: table_seedings(2, [1, 5]),
        }
    for name, run in tables.items():
        if name in chosen:
            run()


if __name__ == "__main__":
    main()
