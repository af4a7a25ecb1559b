"""What the novelty score and the outlier flag cost a step of the engine, side by side in
one run.

Run from the repository root:

    .venv/bin/python benchmarks/bench_novelty_cost.py [--repeats 15] [--shape 10,1024,64]

Prints the table of docs/benchmarks.md, section "Novelty cost": k = 10, b = 1024, d = 64,
tau = 200, rbf at the median width, float64, one thread (``streamkm.num_threads(1)``, BLAS
held to one thread), every step updates (``tol=0``, ``patience`` past the run; checked). Three models of the same warm state step the same batch in
turn (interleaved, the order rotating each repeat):

- ``off``: the novelty score switched off inside the step (no support scores, no p-values,
  no buffer update;
  the second-nearest center is still tracked, it is part of the assignment pass);
- ``default``: the engine as shipped (``outlier_alpha=None``: novelty computed, nothing
  flagged);
- ``alpha=0.01``: flagged rows excluded from the update (``outliers="exclude"``).

It also times, on the same (b x k) inner products, the assignment kernel that tracks the
second-nearest center against the one that does not. Figures are process CPU time per step
(the steadier measure of a single-threaded call on a shared machine), median (min-max);
ratios are medians of the per-repeat ratios.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path

import numpy as np

from streamkm import MiniBatchKernelKMeans, num_threads
from streamkm._numba import centers as nc
from streamkm.cluster._novelty import NoveltyScreen

_spec = importlib.util.spec_from_file_location(
    "bench_engine", Path(__file__).resolve().parent / "bench_engine.py")
bench_engine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_engine)

K, B, D = 10, 1024, 64


class _NoNovelty(NoveltyScreen):
    """A screen that scores nothing (no support scores, no p-values) and buffer updates
    that keep nothing: the step without the novelty score."""

    neighbours = 0

    def __call__(self, labels: np.ndarray, sq_distances: np.ndarray,
                 support: np.ndarray | None = None) -> None:
        self.novelty = self.outliers = None
        return None


class _OffModel(MiniBatchKernelKMeans):
    def _novelty_screen(self) -> NoveltyScreen:
        screen = _NoNovelty(self._novelty_buffers(), self._novelty_score_buffers(), None,
                            False)
        screen.buffers = screen.score_buffers = _KeepNothing()  # type: ignore[assignment]
        return screen


class _KeepNothing:
    def push(self, labels: np.ndarray, sq_distances: np.ndarray) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--shape", default=f"{K},{B},{D}",
                        help="clusters, batch rows and features, as K,B,D (default "
                             f"{K},{B},{D})")
    args = parser.parse_args()
    k, b, d = (int(v) for v in args.shape.split(","))
    with num_threads(1), bench_engine.BLAS.limit(limits=1, user_api="blas"):
        # patience past the run: every step updates (tol=0 alone lets the model converge)
        model, stream = bench_engine.warm_model(k, b, d, np.float64, gamma="median",
                                                patience=10**6)
        arrays, meta = model.get_state()
        models = {"off": _OffModel.from_state(arrays, meta),
                  "default": MiniBatchKernelKMeans.from_state(arrays, meta),
                  "alpha=0.01": MiniBatchKernelKMeans.from_state(arrays, meta).set_params(
                      outlier_alpha=0.01)}
        names = list(models)
        times: dict[str, list[float]] = {name: [] for name in names}
        one, two = [], []
        rng = np.random.default_rng(0)
        inner = rng.random((b, k))
        diag, cc = np.ones(b), rng.random(k)
        labels, mind = np.empty(b, np.int64), np.empty(b)
        second, second_d = np.empty(b, np.int64), np.empty(b)
        reports: dict[str, object] = {}
        flagged: list[float] = []
        for name in names:  # compile before timing
            models[name].step(stream.batch(b))
        nc.nearest_two_centers(diag, inner, cc, labels, mind, second, second_d)
        for r in range(args.repeats):
            x = stream.batch(b)
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                times[name].append(bench_engine.cpu_timed(lambda: reports.__setitem__(
                    name, models[name].step(x)))[1])
                assert reports[name].updated, f"{name}: the step did not update"
            flagged.append(float(np.mean(reports["alpha=0.01"].outliers)))
            one.append(bench_engine.cpu_timed(
                lambda: [nc.nearest_center(diag, inner, cc, labels, mind) for _ in range(100)])[1]
                / 100)
            two.append(bench_engine.cpu_timed(
                lambda: [nc.nearest_two_centers(diag, inner, cc, labels, mind, second, second_d)
                         for _ in range(100)])[1] / 100)
    print(f"\n### Novelty cost (rbf at the median width, k={k}, b={b}, d={d}, tau={bench_engine.TAU}, float64, "
          f"1 thread, every step updates; load {os.getloadavg()[0]:.2f})\n")
    print("Process CPU time per step, interleaved, median (min-max) over "
          f"{args.repeats} repeats.\n")
    print("| step | ms | / off |")
    print("|---|---:|---:|")
    for name in names:
        ratio = bench_engine.ratio_summary(times[name], times["off"])[1]
        print(f"| {name} | {bench_engine.summary(times[name])} | {ratio} |")
    extra = np.asarray(two) - np.asarray(one)
    share = extra / np.asarray(times["off"])
    print(f"\nAssignment kernel over the (b x k) inner products: nearest center "
          f"{bench_engine.summary(one, 1e6)} us, nearest and second-nearest "
          f"{bench_engine.summary(two, 1e6)} us; the difference is "
          f"{100 * np.median(share):.2f}% of a step (median). Share flagged by the "
          f"alpha=0.01 model over the timed steps: {np.mean(flagged):.4f}.")


if __name__ == "__main__":
    main()
