"""Benchmark the seed-000 sketchers: fit+transform time and k-means quality.

For each sketcher, on (1) dense synthetic clusters (1000 x 2000, k = 5) and (2) a sparse
TF-IDF-like matrix (default 20000 x 50000, 0.1% nonzero, k = 20 planted topics):

- time of ``fit_transform`` (seconds);
- time of scikit-learn KMeans on the sketch;
- objective ratio = original-space k-means objective of the partition found on the sketch
  divided by that of the partition found on the unsketched input (1.0 is perfect; the
  theory allows 2 + eps for projections and the SVD, 3 + eps for selection).

Then sparse vs dense timing of ``fit_transform`` on a slice small enough to densify.

Usage::

    .venv/bin/python benchmarks/bench_sketch.py            # full run
    .venv/bin/python benchmarks/bench_sketch.py --quick    # smaller TF-IDF matrix

Timings are the best of 3 fit_transform calls. On a loaded shared machine, multithreaded
BLAS spin-waits make small GEMMs erratic; ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1``
gives stable numbers.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans

from streamkm.sketch import ApproxSVD, LeverageScoreSelector, RandomProjection
from streamkm.sketch._base import BaseSketcher

EPS = 0.5


def sketchers(k: int, seed: int) -> dict[str, Callable[[], BaseSketcher]]:
    return {
        "gaussian projection": lambda: RandomProjection(n_clusters=k, eps=EPS, random_state=seed),
        "sign projection": lambda: RandomProjection(n_clusters=k, eps=EPS, kind="sign", random_state=seed),
        "sparse projection": lambda: RandomProjection(n_clusters=k, eps=EPS, kind="sparse", random_state=seed),
        "approx. SVD": lambda: ApproxSVD(k, eps=EPS, random_state=seed),
        "leverage selection": lambda: LeverageScoreSelector(n_clusters=k, eps=EPS, random_state=seed),
    }


def separated_clusters(seed: int, m: int = 1000, n: int = 2000, k: int = 5, spread: float = 2.0) -> np.ndarray:
    rng = np.random.default_rng(10_000 + seed)
    centers = spread * rng.standard_normal((k, n))
    return centers[rng.integers(0, k, m)] + rng.standard_normal((m, n))


def tfidf_like(seed: int, m: int, n: int, k: int, words_per_doc: int) -> sp.csr_matrix:
    """Documents from k planted topics: 60% topic words (a topic's own 1/k of the
    vocabulary, Zipf-weighted), 40% background words (Zipf over the whole vocabulary);
    then tf-idf weighting and unit-length rows."""
    return tfidf_like_with_topics(seed, m, n, k, words_per_doc)[0]


def tfidf_like_with_topics(
    seed: int, m: int, n: int, k: int, words_per_doc: int
) -> tuple[sp.csr_matrix, np.ndarray]:
    """:func:`tfidf_like` and the planted topic of every document."""
    rng = np.random.default_rng(seed)
    topic = rng.integers(0, k, m)
    doc = np.repeat(np.arange(m), words_per_doc)
    from_topic = rng.random(doc.size) < 0.6
    zipf_all = 1.0 / np.arange(1, n + 1)
    background = rng.choice(n, size=doc.size, p=zipf_all / zipf_all.sum())
    block = n // k
    zipf_block = 1.0 / np.arange(1, block + 1)
    within = rng.choice(block, size=doc.size, p=zipf_block / zipf_block.sum())
    topic_word = rng.permutation(n)[(topic[doc] * block + within)]
    words = np.where(from_topic, topic_word, background)
    counts = sp.coo_matrix((np.ones(doc.size), (doc, words)), shape=(m, n)).tocsr()
    df = np.bincount(counts.indices, minlength=n)
    idf = np.log((1 + m) / (1 + df)) + 1.0
    tfidf = counts @ sp.diags(idf)
    norms = np.sqrt(np.asarray(tfidf.multiply(tfidf).sum(axis=1)).ravel())
    return sp.csr_matrix(sp.diags(1.0 / np.maximum(norms, 1e-12)) @ tfidf), topic


def kmeans_objective(x: Any, labels: np.ndarray, k: int) -> float:
    """sum ||x||^2 - sum_j ||sum of cluster j||^2 / n_j, sparse-friendly."""
    m = x.shape[0]
    indicator = sp.csr_matrix((np.ones(m), (labels, np.arange(m))), shape=(k, m))
    sums = indicator @ x
    sums = sums.toarray() if sp.issparse(sums) else np.asarray(sums)
    if sp.issparse(x):
        total = float(x.multiply(x).sum())
    else:
        total = float(np.sum(x * x))
    sizes = np.maximum(np.bincount(labels, minlength=k), 1)
    return total - float(np.sum(np.sum(sums * sums, axis=1) / sizes))


def timed(fn: Callable[[], Any], repeats: int = 1) -> tuple[Any, float]:
    """``fn()`` and the best wall time of ``repeats`` calls (the machine is shared)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return out, best


def quality_rows(x: Any, k: int, seed: int, n_init: int) -> list[str]:
    labels, t_full = timed(lambda: KMeans(k, n_init=n_init, random_state=seed).fit(x).labels_)
    best = kmeans_objective(x, labels, k)
    rows = [f"| none (k-means on the input) | {x.shape[1]} | - | {t_full:.2f} | 1.000 |"]
    for name, make in sketchers(k, seed).items():
        sketcher = make()
        sketch, t_sketch = timed(lambda: sketcher.fit_transform(x), repeats=3)
        sk_labels, t_km = timed(lambda: KMeans(k, n_init=n_init, random_state=seed).fit(sketch).labels_)
        ratio = kmeans_objective(x, sk_labels, k) / best
        rows.append(f"| {name} | {sketcher.n_components_} | {t_sketch:.3f} | {t_km:.2f} | {ratio:.3f} |")
    return rows


def sparse_vs_dense_rows(x: sp.csr_matrix, k: int, seed: int) -> list[str]:
    dense = x.toarray()
    rows = []
    for name, make in sketchers(k, seed).items():
        _, t_sparse = timed(lambda: make().fit_transform(x), repeats=3)
        _, t_dense = timed(lambda: make().fit_transform(dense), repeats=3)
        rows.append(f"| {name} | {t_sparse:.3f} | {t_dense:.3f} | {t_dense / t_sparse:.1f}x |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5000 x 20000 TF-IDF matrix")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    m, n = (5000, 20_000) if args.quick else (20_000, 50_000)
    header = ["| sketcher | r | fit+transform (s) | KMeans on it (s) | objective ratio |",
              "|---|---:|---:|---:|---:|"]

    print("### Dense synthetic clusters: 1000 x 2000, k = 5, eps = 0.5, KMeans n_init=3\n")
    print("\n".join(header + quality_rows(separated_clusters(args.seed), 5, args.seed, 3)))

    k_text = 20
    x, t_gen = timed(lambda: tfidf_like(args.seed, m, n, k_text, words_per_doc=60))
    print(f"\n### Sparse TF-IDF-like: {m} x {n}, {x.nnz / (m * n):.3%} nonzero, k = {k_text}, "
          f"eps = 0.5, KMeans n_init=1 (generated in {t_gen:.1f} s)\n")
    print("\n".join(header + quality_rows(x, k_text, args.seed, 1)))

    sub = x[:4000, :12_500]
    print(f"\n### Sparse vs dense input: fit_transform on the first 4000 x 12500 of it "
          f"(CSR {sub.nnz} values vs dense float64 {sub.shape[0] * sub.shape[1] * 8 / 1e6:.0f} MB)\n")
    print("| sketcher | CSR (s) | dense (s) | dense / CSR |\n|---|---:|---:|---:|")
    print("\n".join(sparse_vs_dense_rows(sp.csr_matrix(sub), k_text, args.seed)))


if __name__ == "__main__":
    main()
