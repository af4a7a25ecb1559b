"""Heat (graph) kernel costs of two checkouts side by side, interleaved.

Each repeat runs one worker process per checkout, in turn (baseline, then candidate), so
both see the same machine load. A worker imports ``streamkm`` from its checkout (PYTHONPATH)
and times, with one thread (OMP/OPENBLAS/MKL/NUMBA_NUM_THREADS=1):

- ``heat fit PenDigits``: ``MiniBatchKernelKMeans(10, kernel="heat").fit(X)`` on all of
  PenDigits (10,992 x 16, float64): the paper's setting, every row a landmark;
- ``defaults fit moons 20k``: ``MiniBatchKernelKMeans(2).fit(X)`` on 20,000 noisy moons
  (noise 0.08); ``gamma="auto"`` resolves to the heat kernel on its 1,000 landmarks;
- ``heat partial_fit 1024``: per-batch time of ``partial_fit`` on new 1,024-row moons
  batches, the model above (median of 30 batches; every batch updates, tol=0);
- ``heat predict 10k``: ``predict`` of 10,000 new rows;
- ``rbf partial_fit 1024``: the same stream with ``gamma="median"`` (rbf), for reference.

    .venv/bin/python benchmarks/bench_graph_kernel.py \\
        --baseline /path/to/main/checkout --candidate . [--repeats 5]

Prints a markdown table: median (min-max) seconds per checkout and the ratio baseline /
candidate per repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

WORKER = r'''
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from _quality_data import pendigits
from sklearn.datasets import make_moons
from streamkm import MiniBatchKernelKMeans

def timed(fn):
    t0 = time.perf_counter(); out = fn(); return time.perf_counter() - t0, out

out = {}
x, _ = pendigits()
out["heat fit PenDigits"], _ = timed(lambda: MiniBatchKernelKMeans(10, kernel="heat", random_state=0).fit(x))
moons, _ = make_moons(20000, noise=0.08, random_state=0)
out["defaults fit moons 20k"], model = timed(lambda: MiniBatchKernelKMeans(2, random_state=0, tol=0.0).fit(moons))
assert model.kernel_.name == "heat", model.kernel_.name
stream, _ = make_moons(30 * 1024, noise=0.08, random_state=1)
rbf = MiniBatchKernelKMeans(2, gamma="median", random_state=0, tol=0.0).fit(moons)
for name, m in (("heat partial_fit 1024", model), ("rbf partial_fit 1024", rbf)):
    times = [timed(lambda b=b: m.partial_fit(stream[b * 1024:(b + 1) * 1024]))[0] for b in range(30)]
    out[name] = float(np.median(times))
new, _ = make_moons(10000, noise=0.08, random_state=2)
out["heat predict 10k"], _ = timed(lambda: model.predict(new))
import streamkm
out["module"] = streamkm.__file__
print(json.dumps(out))
'''


def run_worker(checkout: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(checkout), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", NUMBA_NUM_THREADS="1", STREAMKM_NUM_THREADS="1")
    # run from the checkout: ``python -c`` puts the working directory first on sys.path
    done = subprocess.run([sys.executable, "-c", WORKER, str(HERE)], env=env, check=True,
                          capture_output=True, text=True, cwd=checkout)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    module = Path(out.pop("module")).resolve()
    if not module.is_relative_to(checkout):
        raise RuntimeError(f"the worker for {checkout} imported streamkm from {module}")
    return out


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.4g} ({min(values):.4g}-{max(values):.4g})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"baseline": [], "candidate": []}
    for _ in range(args.repeats + 1):  # the first round warms numba's caches; not counted
        for which in ("baseline", "candidate"):
            runs[which].append(run_worker(getattr(args, which).resolve()))
    base, cand = runs["baseline"][1:], runs["candidate"][1:]
    print(f"\n{args.repeats} repeats, seconds, median (min-max), one thread\n")
    print("| measure | baseline | candidate | ratio baseline / candidate |")
    print("|---|---|---|---|")
    for key in base[0]:
        b, c = [r[key] for r in base], [r[key] for r in cand]
        print(f"| {key} | {summary(b)} | {summary(c)} | {summary([x / y for x, y in zip(b, c)])} |")


if __name__ == "__main__":
    main()
