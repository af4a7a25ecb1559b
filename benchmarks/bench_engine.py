"""Benchmarks of the engine (MiniBatchKernelKMeans), side by side in one run.

Run from the repository root:

    .venv/bin/python benchmarks/bench_engine.py [--quick] [--tables 1,2,3,4,5,6,7] [--repeats 5]

Every table times its contenders interleaved (A, B, A, B, ...) and reports the median with
(min-max) over the repeats. Tables 1-6 run the engine on one thread (``streamkm.num_threads(1)``,
BLAS held to one thread inside a step) and their reference GEMMs on one BLAS thread too, so
ratios compare like with like; table 7 compares 1 and 2 threads and the default. Every step in every table
updates the model (``tol=0``, the model never converges) unless the table says otherwise.

Prints the markdown tables of docs/benchmarks.md, section "engine":
1. per-step time and RSS as the stream grows from 10^3 to 10^6 rows (d=64, k=10, b=1024, tau=200);
2. per-step time / one GEMM of the shapes b x d times d x (k*tau + b) (the first table's run);
3. linear kernel vs scikit-learn MiniBatchKMeans.partial_fit on the same batches;
4. rbf mini-batch vs exact full-batch kernel k-means at n = 20,000, d = 64;
5. the grid k x b x d: step / (GEMM + exp over the step's own kernel block);
6. float32 vs float64 step throughput;
7. 1 vs 2 threads vs the default, by batch size: step speed-ups and the GEMM's own.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import psutil
from threadpoolctl import ThreadpoolController

from streamkm import MiniBatchKernelKMeans, num_threads
from streamkm._core.threads import block_threads, row_chunks
from streamkm.batch import KernelKMeans

BLAS = ThreadpoolController()

D, K, B, TAU = 64, 10, 1024, 200


class MixtureStream:
    """Batches from a fixed Gaussian mixture (k well separated components in d dims)."""

    def __init__(self, d: int, k: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.means = self.rng.normal(scale=2.0, size=(k, d))

    def batch(self, n: int) -> np.ndarray:
        labels = self.rng.integers(self.means.shape[0], size=n)
        return self.means[labels] + self.rng.normal(size=(n, self.means.shape[1]))

    def labelled(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = self.rng.integers(self.means.shape[0], size=n)
        return self.means[labels] + self.rng.normal(size=(n, self.means.shape[1])), labels


def rss_mib() -> float:
    return psutil.Process().memory_info().rss / 2**20


def bench_growth(total_rows: int) -> None:
    stream = MixtureStream(D, K, seed=0)
    model = MiniBatchKernelKMeans(K, batch_size=B, tau=TAU, tol=0.0, random_state=0)
    model.step(stream.batch(B))  # initialisation (not timed)
    z = np.random.default_rng(1).normal(size=(K * TAU + B, D))
    times, gemms, checkpoints = [], [], []
    seen = B
    while seen < total_rows:
        x = stream.batch(B)
        start = time.perf_counter()
        model.step(x)
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        x @ z.T  # the physical limit: one GEMM of the same shapes, interleaved
        gemms.append(time.perf_counter() - start)
        seen += B
        if len(times) in (10, 100) or seen >= total_rows:
            checkpoints.append((seen, rss_mib()))
    times = np.array(times) * 1e3
    gemms = np.array(gemms) * 1e3
    n = max(10, len(times) // 20)
    early, late = np.median(times[:n]), np.median(times[-n:])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n### 1. Per-step time as the stream grows (d={D}, k={K}, b={B}, tau={TAU}, rbf, every step updates)\n")
    print("| rows seen | steps | median step, first 5% (ms) | median step, last 5% (ms) | late / early | RSS (MiB) |")
    print("|---:|---:|---:|---:|---:|---|")
    rss = ", ".join(f"{s:,}: {r:.0f}" for s, r in checkpoints)
    print(f"| {B:,} -> {seen:,} | {len(times)} | {early:.2f} | {late:.2f} | {late / early:.2f} | {rss} (peak {peak:.0f}) |")
    support = int(model._centers.support_sizes().sum())
    print(f"\nSupport rows held at the end: {support} (bound k*tau = {K * TAU}).")
    print("\n### 2. Per-step time against one GEMM of the same shapes\n")
    print(f"GEMM: ({B} x {D}) @ ({D} x {K * TAU + B}), timed interleaved with the steps.\n")
    print("| median step (ms) | median GEMM (ms) | step / GEMM |")
    print("|---:|---:|---:|")
    print(f"| {np.median(times):.2f} | {np.median(gemms):.2f} | {np.median(times) / np.median(gemms):.2f} |")


def bench_linear_vs_sklearn(n_batches: int) -> None:
    from sklearn.cluster import MiniBatchKMeans
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # scikit-learn's OpenMP runtime is loaded only now: limit it too
    stream = MixtureStream(D, K, seed=2)
    batches = [stream.batch(B) for _ in range(n_batches + 1)]
    ours = MiniBatchKernelKMeans(K, kernel="linear", batch_size=B, tol=0.0, n_init=1, random_state=0)
    theirs = MiniBatchKMeans(K, batch_size=B, n_init=1, random_state=0)
    ours.partial_fit(batches[0])
    theirs.partial_fit(batches[0])
    t_ours, t_theirs = [], []
    for x in batches[1:]:  # alternate, so both see the same machine load
        start = time.perf_counter()
        ours.partial_fit(x)
        t_ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        theirs.partial_fit(x)
        t_theirs.append(time.perf_counter() - start)
    a, b = np.median(t_ours) * 1e3, np.median(t_theirs) * 1e3
    probe = stream.batch(20000)
    print(f"\n### 3. Linear kernel vs scikit-learn MiniBatchKMeans.partial_fit (d={D}, k={K}, b={B}, {n_batches} batches)\n")
    print("| streamkm linear, median step (ms) | scikit-learn, median partial_fit (ms) | streamkm / scikit-learn | streamkm mean sq. distance | scikit-learn mean sq. distance |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {a:.3f} | {b:.3f} | {a / b:.2f} | {-ours.score(probe):.3f} | {-theirs.score(probe) / len(probe):.3f} |")


def bench_vs_exact(n: int, n_inits: list[int]) -> None:
    from sklearn.metrics import adjusted_rand_score

    stream = MixtureStream(D, K, seed=3)
    # Overlapping components make the problem non-trivial (means at scale 0.7 in 64 dims).
    stream.means *= 0.35
    x, y = stream.labelled(n)
    print(f"\n### 4. rbf mini-batch vs exact full-batch kernel k-means (n={n:,}, d={D}, k={K}, same gamma, same n_init)\n")
    print("| n_init | method | time (s) | full-data objective | ARI vs truth | steps / iterations |")
    print("|---:|---|---:|---:|---:|---:|")
    summary = []
    for n_init in n_inits:
        start = time.perf_counter()
        ours = MiniBatchKernelKMeans(K, batch_size=B, tau=TAU, n_init=n_init, random_state=0).fit(x)
        t_ours = time.perf_counter() - start
        start = time.perf_counter()
        exact = KernelKMeans(K, kernel="rbf", gamma=ours.gamma_, n_init=n_init, random_state=0).fit(x)
        t_exact = time.perf_counter() - start
        obj_ours = -ours.score(x)
        print(f"| {n_init} | streamkm MiniBatchKernelKMeans | {t_ours:.2f} | {obj_ours:.5f} | "
              f"{adjusted_rand_score(y, ours.predict(x)):.3f} | {ours.n_steps_} |")
        print(f"| {n_init} | exact full-batch kernel k-means | {t_exact:.2f} | {exact.objective_:.5f} | "
              f"{adjusted_rand_score(y, exact.labels_):.3f} | {exact.n_iter_} |")
        summary.append(f"n_init={n_init}: speed-up {t_exact / t_ours:.1f}x, objective ratio "
                       f"{obj_ours / exact.objective_:.4f}")
    print(f"\ngamma = {ours.gamma_:.4g} (median heuristic on the init sample). " + "; ".join(summary) + ".")


def summary(values: list[float], scale: float = 1e3, fmt: str = "{:.2f}") -> str:
    """median (min-max) of a list of seconds, in ms by default."""
    v = np.asarray(values) * scale
    return f"{fmt.format(np.median(v))} ({fmt.format(v.min())}-{fmt.format(v.max())})"


def ratio_summary(num: list[float], den: list[float]) -> tuple[float, str]:
    """Median of the per-repeat ratios, with their (min-max)."""
    r = np.asarray(num) / np.asarray(den)
    return float(np.median(r)), f"{np.median(r):.2f} ({r.min():.2f}-{r.max():.2f})"


def timed(fn: Callable[[], object]) -> float:
    """Wall-clock seconds of one call."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cpu_timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall-clock, process CPU) seconds of one call. On the shared machine the CPU time of a
    single-threaded call is the steadier measure of its work: it leaves out the time spent
    waiting for a core."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def warm_model(k: int, b: int, d: int, dtype: type, seed: int = 0, **params: Any
               ) -> tuple[MiniBatchKernelKMeans, MixtureStream]:
    """A model in steady state: enough updating steps for the supports to fill up (tau rows
    per center, or as many as the truncation keeps), capped at 30 steps. ``params`` go to
    the model."""
    stream = MixtureStream(d, k, seed=seed)
    model = MiniBatchKernelKMeans(k, batch_size=b, tau=TAU, tol=0.0, n_init=1, random_state=0,
                                  **params)
    model.step(stream.batch(max(b, 2 * k)).astype(dtype))
    for _ in range(min(30, math.ceil(1.5 * k * TAU / b) + 2)):
        model.step(stream.batch(b).astype(dtype))
    return model, stream


def step_and_reference(model: MiniBatchKernelKMeans, stream: MixtureStream, b: int,
                       dtype: type, repeats: int) -> dict[str, list[float]]:
    """Interleaved: one step, then the kernel block of the same shape as the step's own
    (b x (|S| + |N|): support rows before the step plus the batch rows it kept), computed
    by the engine's kernel (one GEMM + the in-place exp) over the same row chunks as the
    step (so both get the same cache behaviour), then the same GEMMs alone."""
    spec = model._kernel_spec
    out: dict[str, list[float]] = {name: [] for name in (
        "step", "block", "gemm", "step_wall", "block_wall", "cols")}
    rng = np.random.default_rng(7)
    for _ in range(repeats):
        x = stream.batch(b).astype(dtype)
        n_support = int(model._centers.support_sizes().sum())
        wall, cpu = cpu_timed(lambda: model.step(x))
        out["step"].append(cpu)
        out["step_wall"].append(wall)
        store = model._centers
        n_new = int((store.tags == store.next_tag - 1).sum())
        y = rng.normal(size=(n_support + n_new, x.shape[1])).astype(dtype)
        y_sq = np.einsum("ij,ij->i", y, y)
        x_sq = np.einsum("ij,ij->i", x, x)
        chunks = row_chunks(b, y.shape[0], 1)

        def block() -> None:
            for lo, hi in chunks:
                spec.block(x[lo:hi], y, x_sq=x_sq[lo:hi], y_sq=y_sq)

        def gemm() -> None:
            for lo, hi in chunks:
                x[lo:hi] @ y.T

        wall, cpu = cpu_timed(block)
        out["block"].append(cpu)
        out["block_wall"].append(wall)
        out["gemm"].append(cpu_timed(gemm)[1])
        out["cols"].append(n_support + n_new)
    return out


def bench_grid(ks: list[int], bs: list[int], ds: list[int], repeats: int) -> None:
    print("\n### 5. Step / (GEMM + exp over the step's own kernel block), rbf, float64, 1 thread, every step updates\n")
    print(f"tau={TAU}. Block: `KernelSpec.block` (GEMM + the in-place vectorised exp) of the batch against "
          "|S| + |N| random rows (the support rows before the step plus the batch rows it kept), over the "
          "same row chunks as the step, timed right after each step; GEMM: the same products alone. "
          f"Process CPU time, {repeats} interleaved repeats after warm-up, median (min-max); the last "
          "column is the same ratio in wall-clock time.\n")
    print("| k | b | d | kernel columns | step (ms) | block (ms) | GEMM (ms) | step / block | step - block (ms) | step / block, wall |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = []
    for k in ks:
        for b in bs:
            for d in ds:
                with num_threads(1), BLAS.limit(limits=1, user_api="blas"):
                    model, stream = warm_model(k, b, d, np.float64)
                    r = step_and_reference(model, stream, b, np.float64, repeats)
                med, text = ratio_summary(r["step"], r["block"])
                _, wall_text = ratio_summary(r["step_wall"], r["block_wall"])
                worst.append((med, k, b, d))
                extra = np.median(np.asarray(r["step"]) - np.asarray(r["block"])) * 1e3
                print(f"| {k} | {b} | {d} | {int(np.median(r['cols'])):,} | {summary(r['step'])} | "
                      f"{summary(r['block'])} | {summary(r['gemm'])} | {text} | {extra:.2f} | "
                      f"{wall_text} |", flush=True)
    worst.sort(reverse=True)
    print(f"\nLargest median step / block: {worst[0][0]:.2f} at k={worst[0][1]}, b={worst[0][2]}, "
          f"d={worst[0][3]}; cells above 1.15: {sum(m > 1.15 for m, *_ in worst)} of {len(worst)}.")


def bench_dtypes(k: int, b: int, d: int, repeats: int) -> None:
    print(f"\n### 6. float32 vs float64 step throughput (rbf, k={k}, b={b}, d={d}, tau={TAU}, 1 thread, every step updates)\n")
    with num_threads(1), BLAS.limit(limits=1, user_api="blas"):
        models = {dt: warm_model(k, b, d, dt) for dt in (np.float32, np.float64)}
        times: dict[type, list[float]] = {np.float32: [], np.float64: []}
        gemms: dict[type, list[float]] = {np.float32: [], np.float64: []}
        for _ in range(repeats):
            for dt, (model, stream) in models.items():
                x = stream.batch(b).astype(dt)
                times[dt].append(cpu_timed(lambda: model.step(x))[1])
                y = np.ones((int(model._centers.support_sizes().sum()), d), dtype=dt)
                gemms[dt].append(cpu_timed(lambda: x @ y.T)[1])
    print("Process CPU time per step, interleaved, median (min-max).\n")
    print("| dtype | step (ms) | rows/s | GEMM over the support (ms) |")
    print("|---|---:|---:|---:|")
    for dt in (np.float32, np.float64):
        print(f"| {dt.__name__} | {summary(times[dt])} | {b / np.median(times[dt]):,.0f} | {summary(gemms[dt])} |")
    _, text = ratio_summary(times[np.float64], times[np.float32])
    _, gtext = ratio_summary(gemms[np.float64], gemms[np.float32])
    print(f"\nfloat32 throughput / float64 throughput (per-repeat ratio of step times): {text}; "
          f"the GEMM alone: {gtext}.")


def bench_threads(k: int, bs: list[int], d: int, repeats: int) -> None:
    print(f"\n### 7. Threads: 1, 2 and the default (rbf with the median width, float64, k={k}, "
          f"d={d}, tau={TAU}, "
          f"every step updates)\n")
    print("Wall-clock per step, interleaved (1, 2, default, in a rotating order, then the GEMMs) "
          "in every repeat; the block "
          "is the step's first kernel block (b x support rows); the GEMM is "
          "(b x d) @ (d x block columns) with BLAS on 1 and 2 threads.\n")
    print(f"1-minute load average at the start: {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs; the default threads column is the count the default "
          f"chose at the end.\n")
    print("| b | block values | default threads | 1 thread (ms) | 2 threads (ms) | default (ms) "
          "| 1 -> 2 step speed-up | 1 -> default | GEMM 1 -> 2 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in bs:
        model, stream = warm_model(k, b, d, np.float64, gamma="median")  # rbf at every b
        n_cols = int(model._centers.rows.shape[0])
        y = np.random.default_rng(3).normal(size=(n_cols, d))
        steps: dict[str, list[float]] = {"1": [], "2": [], "default": []}
        gemms: dict[int, list[float]] = {1: [], 2: []}
        names = list(steps)
        for repeat in range(repeats):
            for name in names[repeat % 3:] + names[:repeat % 3]:  # each goes first in turn
                x = stream.batch(b)
                if name == "default":
                    steps[name].append(timed(lambda: model.step(x)))
                else:
                    with num_threads(int(name)):
                        steps[name].append(timed(lambda: model.step(x)))
            for n in (1, 2):
                with BLAS.limit(limits=n, user_api="blas"):
                    gemms[n].append(timed(lambda: x @ y.T))
        auto = block_threads(b, n_cols)
        two = ratio_summary(steps["1"], steps["2"])[1]
        default = ratio_summary(steps["1"], steps["default"])[1]
        gemm = ratio_summary(gemms[1], gemms[2])[1]
        print(f"| {b} | {b * n_cols:,} | {auto} | {summary(steps['1'])} | {summary(steps['2'])} "
              f"| {summary(steps['default'])} | {two} | {default} | {gemm} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    parser.add_argument("--tables", default="1,2,3,4,5,6,7",
                        help="comma-separated table numbers (2 comes with 1)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    tables = {int(t) for t in args.tables.split(",")}
    with num_threads(1), BLAS.limit(limits=1):  # BLAS and OpenMP (scikit-learn's loops)
        if tables & {1, 2}:
            bench_growth(50_000 if args.quick else 1_000_000)
        if 3 in tables:
            bench_linear_vs_sklearn(30 if args.quick else 300)
        if 4 in tables:
            bench_vs_exact(4_000 if args.quick else 20_000, [1] if args.quick else [3, 10])
    if 5 in tables:
        if args.quick:
            bench_grid([5, 100], [256, 4096], [2, 64], args.repeats)
        else:
            bench_grid([5, 20, 100], [256, 1024, 4096], [2, 64, 784], args.repeats)
    if 6 in tables:
        bench_dtypes(K, B, D, max(args.repeats, 10))
    if 7 in tables:
        bench_threads(K, [256, 1024, 2048, 4096, 8192], D, max(args.repeats, 15))


if __name__ == "__main__":
    main()
