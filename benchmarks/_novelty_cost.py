"""The cost of the novelty score per record, for ``bench_novelty.py``.

The engine scores every record on every step, so "a step without it" is the engine as it
was before the novelty score: its package is taken from git (the newest first-parent
ancestor of HEAD without ``streamkm/cluster/_novelty.py``, or ``--baseline-rev``) into a
temporary folder and imported from there by one worker process; more workers import
this checkout's engine, one with ``outlier_alpha`` unset and one with
``outlier_alpha=0.01``, and a fourth imports it with the novelty score switched off inside
the step (no p-values, no buffer update: ``bench_novelty_cost.py``'s ``off``), the step
without it in the engine as it is. All four run the same seeded batches; the parent asks them in turn
(the first rotating), step after step, and each answers with the process CPU time of its
``steps`` steps. One thread everywhere; rbf with a fixed gamma and ``tol=0``, so every step
updates the centers (the mode is updating, never converged).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import streamkm

REPO = Path(__file__).resolve().parents[1]
#: the folder holding the ``streamkm`` package this process imports (the workers of the
#: current engine import the same one)
CURRENT = Path(streamkm.__file__).resolve().parents[1]
NOVELTY_MODULE = "streamkm/cluster/_novelty.py"
#: the contender that is this engine with the novelty score switched off
OFF = "novelty score switched off"

WORKER = r'''
import json, sys, time
import numpy as np
from streamkm import MiniBatchKernelKMeans
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["cmd"] == "setup":
        k, b, d = cmd["k"], cmd["b"], cmd["d"]
        rng = np.random.default_rng(cmd["seed"])
        means = rng.normal(scale=4.0, size=(k, d))
        def batch():
            return means[rng.integers(k, size=b)] + rng.normal(size=(b, d))
        params = dict(cmd["params"])
        estimator = MiniBatchKernelKMeans
        if params.pop("novelty_off", False):
            from streamkm.cluster._novelty import NoveltyScreen

            class _Unscored(NoveltyScreen):  # scores nothing, keeps no distance
                neighbours = 0

                def __call__(self, labels, sq_distances, support=None):
                    self.novelty = self.outliers = None
                    return None

            class _KeepNothing:
                def push(self, labels, sq_distances):
                    return None

            class _Off(MiniBatchKernelKMeans):
                def _novelty_screen(self):
                    screen = _Unscored(self._novelty_buffers(),
                                       self._novelty_score_buffers(), None, False)
                    screen.buffers = screen.score_buffers = _KeepNothing()
                    return screen

            estimator = _Off
        model = estimator(k, kernel="rbf", gamma=1.0 / (2 * d), tol=0.0, n_init=1,
                          random_state=cmd["seed"], **params)
        for _ in range(cmd["warmup"]):
            model.step(batch())
        out = {"ok": True}
    else:
        rows = [batch() for _ in range(cmd["steps"])]
        cpu = time.process_time()
        for x in rows:
            model.step(x)
        out = {"cpu": time.process_time() - cpu}
    print(json.dumps(out), flush=True)
'''


class Worker:
    """One interpreter stepping one model, answering JSON commands on stdin."""

    def __init__(self, path: Path) -> None:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", NUMBA_NUM_THREADS="1", STREAMKM_NUM_THREADS="1",
                   PYTHONPATH=str(path))
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=path)

    def ask(self, **cmd: Any) -> dict[str, Any]:
        """Send one command, return its answer."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"cost worker ({cmd['cmd']}) exited with {self.proc.wait()}")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def baseline_revision() -> str | None:
    """The newest first-parent ancestor of HEAD without the novelty module (None if HEAD
    has none, or the checkout is not a git repository)."""
    try:
        history = _git("rev-list", "--first-parent", "HEAD").split()
    except (OSError, subprocess.CalledProcessError):
        return None
    for rev in history:
        listed = _git("ls-tree", "--name-only", rev, NOVELTY_MODULE)
        if not listed:
            return rev
    return None


def export_package(rev: str, into: Path) -> Path:
    """The ``streamkm`` package of ``rev`` unpacked into ``into``; returns ``into``."""
    archive = into / "streamkm.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), rev, "streamkm"],
                   check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return into


def _ratios(values: list[float], reference: list[float]) -> list[float]:
    """Median, min and max of the per-repeat ratios ``values / reference``."""
    ratios = [a / z for a, z in zip(values, reference)]
    return [statistics.median(ratios), min(ratios), max(ratios)]


def measure(configs: list[tuple[int, int, int]], repeats: int, steps: int,
            baseline_rev: str | None = None, seed: int = 0) -> dict[str, Any]:
    """CPU per record of every contender on every ``(k, b, d)`` of ``configs``; ``ratio``:
    medians of the per-repeat ratios to the first contender (the engine before the novelty
    score, or without a baseline revision this engine with it switched off);
    ``ratio_to_off``: the same to this engine with the novelty score switched off."""
    rev = baseline_rev or baseline_revision()
    rows = []
    with tempfile.TemporaryDirectory(prefix="streamkm-baseline-") as tmp:
        contenders: list[tuple[str, Path, dict[str, Any]]] = []
        if rev is not None:
            contenders.append(("before the novelty score", export_package(rev, Path(tmp)), {}))
        contenders += [(OFF, CURRENT, {"novelty_off": True}),
                       ("outlier_alpha unset", CURRENT, {}),
                       ("outlier_alpha=0.01", CURRENT, {"outlier_alpha": 0.01})]
        for k, b, d in configs:
            workers = [Worker(path) for _, path, _ in contenders]
            try:
                for worker, (_, _, params) in zip(workers, contenders):
                    worker.ask(cmd="setup", k=k, b=b, d=d, params=params, seed=seed, warmup=10)
                cpu: list[list[float]] = [[] for _ in contenders]
                for r in range(repeats):
                    for j in range(len(workers)):
                        i = (r + j) % len(workers)
                        cpu[i].append(workers[i].ask(cmd="run", steps=steps)["cpu"])
            finally:
                for worker in workers:
                    worker.close()
            per_record = [[1e6 * c / (steps * b) for c in times] for times in cpu]
            off = per_record[[name for name, _, _ in contenders].index(OFF)]
            out = []
            for (name, _, params), us in zip(contenders, per_record):
                out.append({"name": name, "params": params, "us_per_record": us,
                            "ratio": _ratios(us, per_record[0]),
                            "ratio_to_off": _ratios(us, off)})
            rows.append({"k": k, "b": b, "d": d, "contenders": out})
    return {"baseline_rev": rev, "repeats": repeats, "steps": steps,
            "mode": "updating (tol=0)", "configs": rows}
