"""Benchmark SketchedKernelKMeans: streaming throughput on CSR vs dense input, re-sketch time.

A TF-IDF-like matrix (planted topics, about ``nnz`` nonzeros per row) is streamed in batches
of 1024 through ``SketchedKernelKMeans(sketcher, MiniBatchKernelKMeans(k, rbf, tau=200))``,
once as a CSR matrix and once densified. Throughput excludes the first (initialising)
batch; then ``resketch()`` (refit on a reservoir of 2048 rows + re-projection of the support
rows) is timed. Best of ``--repeats`` runs.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sketch_pipeline.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score

from streamkm import MiniBatchKernelKMeans
from streamkm.sketch import (
    ApproxSVD,
    LeverageScoreSelector,
    RandomProjection,
    SketchedKernelKMeans,
)

BATCH = 1024


def planted_topics(n: int, dim: int, k: int, nnz: int, seed: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """Rows draw 70% of their terms from their topic's 2 * nnz core terms, 30% from all terms."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(k, size=n)
    width = dim // k
    rows, cols = [], []
    for i, c in enumerate(labels):
        core = np.arange(c * width, c * width + min(width, 2 * nnz))
        own = rng.choice(core, size=int(0.7 * nnz), replace=False)
        other = rng.choice(dim, size=nnz - own.size, replace=False)
        terms = np.unique(np.concatenate([own, other]))
        rows.append(np.full(terms.size, i))
        cols.append(terms)
    r, c = np.concatenate(rows), np.concatenate(cols)
    values = rng.exponential(1.0, size=r.size)
    x = sp.csr_matrix((values, (r, c)), shape=(n, dim))
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    return sp.csr_matrix(sp.diags(1.0 / norms) @ x), labels


def sketchers(k: int) -> dict[str, object]:
    return {
        "gaussian projection": RandomProjection(n_clusters=k, eps=0.5, random_state=0),
        "sparse projection": RandomProjection(n_clusters=k, eps=0.5, kind="sparse",
                                              random_state=0),
        "approx. SVD": ApproxSVD(k, eps=0.5, random_state=0),
        "leverage selection": LeverageScoreSelector(n_clusters=k, eps=0.5, random_state=0),
    }


def run(sketcher: object, x, k: int) -> tuple[float, float, float, int]:
    p = SketchedKernelKMeans(sketcher, MiniBatchKernelKMeans(k, tau=200, n_init=1,
                                                             random_state=0),
                             reservoir_size=2048, random_state=0)
    p.step(x[:BATCH])
    t0 = time.perf_counter()
    for lo in range(BATCH, x.shape[0], BATCH):
        p.step(x[lo:lo + BATCH])
    rate = (x.shape[0] - BATCH) / (time.perf_counter() - t0)
    t1 = time.perf_counter()
    p.resketch()
    resketch = time.perf_counter() - t1
    return rate, resketch, p.predict(x), p.sketcher_.n_components_


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--dim", type=int, default=4000)
    parser.add_argument("--nnz", type=int, default=40)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    csr, labels = planted_topics(args.rows, args.dim, args.k, args.nnz, seed=0)
    dense = csr.toarray()
    print(f"{args.rows} x {args.dim}, {csr.nnz} values ({csr.nnz / csr.shape[0]:.0f} per row), "
          f"k = {args.k}, dense copy {dense.nbytes / 1e6:.0f} MB\n")
    print("| sketcher | r | CSR rec/s | dense rec/s | CSR / dense | re-sketch CSR (s) | "
          "re-sketch dense (s) | ARI vs planted |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, sketcher in sketchers(args.k).items():
        best = {}
        for kind, x in (("csr", csr), ("dense", dense)):
            results = [run(sketcher, x, args.k) for _ in range(args.repeats)]
            best[kind] = (max(r[0] for r in results), min(r[1] for r in results),
                          results[0][2], results[0][3])
        ari = adjusted_rand_score(labels, best["csr"][2])
        print(f"| {name} | {best['csr'][3]} | {best['csr'][0]:,.0f} | {best['dense'][0]:,.0f} | "
              f"{best['csr'][0] / best['dense'][0]:.1f}x | {best['csr'][1]:.3f} | "
              f"{best['dense'][1]:.3f} | {ari:.3f} |")


if __name__ == "__main__":
    main()
