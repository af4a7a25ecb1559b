"""What becoming a scikit-learn estimator costs: ``import streamkm`` and one engine step.

Compares two source trees of streamkm side by side in one run, interleaved, each
measurement in a fresh subprocess: the cold ``python -c "import streamkm"`` wall time, and
the median time of ``MiniBatchKernelKMeans.step`` on a (batch, d) float32 batch once the
model is warm (numba compiled; the model learns, it is not converged: ``tol=0``).

Usage::

    python benchmarks/bench_sklearn_overhead.py --before /path/to/old/tree \\
        --after /path/to/new/tree --repeats 7

Each tree is a directory holding the ``streamkm`` package (e.g. ``git archive`` of a commit).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

STEP_SCRIPT = r"""
import json, time, numpy as np
from streamkm import MiniBatchKernelKMeans
rng = np.random.default_rng(0)
batch, d = {batch}, {dim}
model = MiniBatchKernelKMeans(8, batch_size=batch, tau=200, tol=0.0, random_state=0)
model.step(rng.normal(size=(batch, d)).astype(np.float32))
for _ in range(5):
    model.step(rng.normal(size=(batch, d)).astype(np.float32))
times = []
for _ in range({steps}):
    x = rng.normal(size=(batch, d)).astype(np.float32)
    t0 = time.perf_counter(); model.step(x); times.append(time.perf_counter() - t0)
print(json.dumps(sorted(times)[len(times) // 2]))
"""


def _env(tree: str) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = tree
    return env


def import_seconds(tree: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import streamkm"], env=_env(tree), check=True,
                   cwd="/")
    return time.perf_counter() - t0


def step_seconds(tree: str, batch: int, dim: int, steps: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", STEP_SCRIPT.format(batch=batch, dim=dim, steps=steps)],
        env=_env(tree), check=True, capture_output=True, text=True, cwd="/")
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def _summary(values: list[float], unit: float, name: str) -> str:
    return (f"{statistics.median(values) * unit:.2f} {name} "
            f"({min(values) * unit:.2f}-{max(values) * unit:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    trees = {"before": args.before, "after": args.after}
    imports: dict[str, list[float]] = {k: [] for k in trees}
    steps: dict[str, list[float]] = {k: [] for k in trees}
    for _ in range(args.repeats):
        for key, tree in trees.items():  # interleaved
            imports[key].append(import_seconds(tree))
            steps[key].append(step_seconds(tree, args.batch, args.dim, args.steps))
    for key in trees:
        print(f"{key:6s} import streamkm: {_summary(imports[key], 1.0, 's')}; "
              f"step ({args.batch}x{args.dim} float32, k=8, tau=200, learning): "
              f"{_summary(steps[key], 1e3, 'ms')}")
    ratio_import = statistics.median(imports["after"]) / statistics.median(imports["before"])
    ratio_step = statistics.median(steps["after"]) / statistics.median(steps["before"])
    print(f"after/before: import {ratio_import:.2f}x, step {ratio_step:.2f}x "
          f"(median of {args.repeats} interleaved repeats)")


if __name__ == "__main__":
    main()
