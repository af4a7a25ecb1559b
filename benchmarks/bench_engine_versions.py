"""Engine step time of two checkouts side by side (e.g. main vs a branch), interleaved.

Each checkout runs in its own worker process (its own interpreter and installed streamkm);
the parent sends "step" to them in turn, so both see the same machine load, and collects the
process CPU time and wall time of each step. One thread everywhere (OPENBLAS_NUM_THREADS=1,
STREAMKM_NUM_THREADS=1). Every step updates the model (tol=0).

    .venv/bin/python benchmarks/bench_engine_versions.py \
        --baseline ../baseline/.venv/bin/python --candidate .venv/bin/python [--repeats 7]

Prints the markdown table of docs/benchmarks.md, engine section, "before / after".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

TAU = 200
# (k, b, d, dtype): the base shape and one change of k, b, d or dtype each.
CONFIGS = [(10, 1024, 64, "float64"), (100, 1024, 64, "float64"), (10, 4096, 64, "float64"),
           (10, 256, 64, "float64"), (10, 1024, 64, "float32"), (10, 1024, 2, "float64"),
           (10, 1024, 784, "float64")]

WORKER = r'''
import json, math, sys, time
import numpy as np
from streamkm import MiniBatchKernelKMeans
TAU = %d
model = stream = None
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["cmd"] == "setup":
        k, b, d, dtype = cmd["k"], cmd["b"], cmd["d"], np.dtype(cmd["dtype"])
        rng = np.random.default_rng(0)
        means = rng.normal(scale=2.0, size=(k, d))
        def batch(n):
            return (means[rng.integers(k, size=n)] + rng.normal(size=(n, d))).astype(dtype)
        model = MiniBatchKernelKMeans(k, batch_size=b, tau=TAU, tol=0.0, n_init=1, random_state=0)
        model.step(batch(max(b, 2 * k)))
        for _ in range(min(30, math.ceil(1.5 * k * TAU / b) + 2)):
            model.step(batch(b))
        out = {"ok": True}
    else:
        x = batch(b)
        wall, cpu = time.perf_counter(), time.process_time()
        model.step(x)
        out = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}
    print(json.dumps(out), flush=True)
''' % TAU


class Worker:
    def __init__(self, python: str) -> None:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", STREAMKM_NUM_THREADS="1")
        self.proc = subprocess.Popen([python, "-c", WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd="/")

    def ask(self, **cmd: object) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.proc.args[0]} died")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def fmt(v: np.ndarray) -> str:
    v = v * 1e3
    return f"{np.median(v):.2f} ({v.min():.2f}-{v.max():.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="python of the baseline checkout")
    parser.add_argument("--candidate", default=sys.executable, help="python of the candidate")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"\n### Before / after: step time of two checkouts, interleaved (rbf, tau={TAU}, 1 thread, every step updates)\n")
    print(f"Process CPU time per step, {args.repeats} interleaved repeats after warm-up, median (min-max). "
          "Work = b (k tau + b), relative to the first row.\n")
    print("| k | b | d | dtype | work | baseline step (ms) | candidate step (ms) | baseline / candidate | baseline vs first row | candidate vs first row |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    base_work = base = None
    for k, b, d, dtype in CONFIGS:
        workers = [Worker(args.baseline), Worker(args.candidate)]
        try:
            for w in workers:
                w.ask(cmd="setup", k=k, b=b, d=d, dtype=dtype)
            times: list[list[float]] = [[], []]
            for _ in range(args.repeats):
                for i, w in enumerate(workers):
                    times[i].append(w.ask(cmd="step")["cpu"])
        finally:
            for w in workers:
                w.close()
        old, new = np.asarray(times[0]), np.asarray(times[1])
        work = b * (k * TAU + b)
        if base is None:
            base_work, base = work, (np.median(old), np.median(new))
        speed = old / new
        print(f"| {k} | {b} | {d} | {dtype} | {work / base_work:.2f} | {fmt(old)} | {fmt(new)} | "
              f"{np.median(speed):.2f} ({speed.min():.2f}-{speed.max():.2f}) | "
              f"{np.median(old) / base[0]:.2f} | {np.median(new) / base[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
