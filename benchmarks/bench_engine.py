"""Benchmarks of the engine (MiniBatchKernelKMeans), side by side in one run.

Run from the repository root (single-threaded BLAS so the ratios compare like with like on
the shared 2-core machine):

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_engine.py [--quick]

Prints the four markdown tables of docs/benchmarks.md, section "engine":
1. per-step time and RSS as the stream grows from 10^3 to 10^6 rows (d=64, k=10, b=1024, tau=200);
2. per-step time / one GEMM of the same shapes (b x d times d x (k*tau + b));
3. linear kernel vs scikit-learn MiniBatchKMeans.partial_fit on the same batches;
4. rbf mini-batch vs exact full-batch kernel k-means at n = 20,000, d = 64.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import psutil

from streamkm import MiniBatchKernelKMeans
from streamkm.batch import KernelKMeans

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = parser.parse_args()
    bench_growth(50_000 if args.quick else 1_000_000)
    bench_linear_vs_sklearn(30 if args.quick else 300)
    bench_vs_exact(4_000 if args.quick else 20_000, [1] if args.quick else [3, 10])


if __name__ == "__main__":
    main()
