"""Births and retirements with drift handling on and ``outlier_alpha = 0.01``.

Run from the repository root:

    .venv/bin/python benchmarks/novelty_births.py

Prints the tables of docs/novelty.md ("Births and retirements"). The streams are seeded and
the figures are counts, not timings: tests/drift/test_birth.py checks the same streams.

- Inlier-only streams (blobs, moons, digits of benchmarks/novelty_calibration.py, batches
  of 1,024): the share of rows flagged after warm-up and the number of births; with the
  rbf, the linear and the default (``gamma="auto"``) kernel.
- A new mode: three Gaussian blobs in 3-D (sd 1, 300 rows a batch); from batch
  ``MODE_AT`` on, 30 rows of each batch come from a fourth blob. Reported: the batches from
  the first batch whose pool reaches ``birth_rows`` to the birth, and the purity of the new
  cluster (share of the rows it is assigned that come from the new mode) and the share of
  the new mode's rows it gets over the last 10 batches.
- Uniform noise: the same three blobs with 5% of each batch drawn uniformly in a box of
  side 40 around them: births.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from streamkm import MiniBatchKernelKMeans

_spec = importlib.util.spec_from_file_location(
    "novelty_calibration", Path(__file__).resolve().parent / "novelty_calibration.py")
calibration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(calibration)

ALPHA = 0.01
MEANS = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 0.0], [0.0, 6.0, 0.0]])
NEW_MODE = np.array([6.0, 6.0, 6.0])
MODE_AT = 15
N_BATCHES = 40
BATCH = 300
MODE_ROWS = 30
#: "auto" is the default ``gamma="auto"``, which chooses the anchor-graph kernel on moons
#: and digits and the rbf kernel on the blobs.
KERNELS = {"rbf": {"gamma": "median"}, "linear": {"kernel": "linear"}, "auto": {}}


def inlier_run(name: str, kernel: str, alpha: float = ALPHA) -> tuple[float, int]:
    """Share flagged after warm-up and births on the inlier-only stream ``name``."""
    x, k = calibration.stream(name)
    model = MiniBatchKernelKMeans(k, random_state=0, outlier_alpha=alpha, drift=True,
                                  **KERNELS[kernel])
    flags, births = [], 0
    for i, batch in enumerate(np.array_split(x, len(x) // calibration.BATCH)):
        report = model.step(batch)
        births += sum(e["event"] == "born" for e in report.events)
        if i >= calibration.WARMUP:
            flags.append(report.outliers)
    return float(np.concatenate(flags).mean()), births


def blob_batch(rng: np.random.Generator, *, mode: bool, noise: float = 0.0
               ) -> tuple[np.ndarray, np.ndarray]:
    """One batch of the three blobs (truth 0-2), with the new mode's rows (truth 3) first
    when ``mode``, and a share ``noise`` of uniform rows (truth -1) last."""
    truth = rng.integers(3, size=BATCH)
    x = MEANS[truth] + rng.normal(size=(BATCH, 3))
    if mode:
        x[:MODE_ROWS] = NEW_MODE + rng.normal(size=(MODE_ROWS, 3))
        truth[:MODE_ROWS] = 3
    n_noise = int(round(noise * BATCH))
    if n_noise:
        x[BATCH - n_noise:] = rng.uniform(-17.0, 23.0, size=(n_noise, 3))
        truth[BATCH - n_noise:] = -1
    return x, truth


def new_mode_run(kernel: str, seed: int = 0, **policy) -> dict:
    """Births on the new-mode stream: their events, the batch the pool first held
    ``birth_rows`` rows, and the new cluster's purity and recall over the last 10 batches."""
    rng = np.random.default_rng(seed)
    model = MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=ALPHA,
                                  drift={"birth_rows": 64, **policy}, **KERNELS[kernel])
    born, full_at, tail = [], None, []
    for b in range(N_BATCHES):
        x, truth = blob_batch(rng, mode=b >= MODE_AT)
        report = model.step(x)
        born += [{**e, "batch": b} for e in report.events if e["event"] == "born"]
        if full_at is None and (model._drift.pool.size >= 64 or born):
            full_at = b
        if b >= N_BATCHES - 10:
            tail.append((report.cluster_ids, truth))
    ids = np.concatenate([t[0] for t in tail])
    truth = np.concatenate([t[1] for t in tail])
    new = born[0]["cluster_id"] if born else -1
    in_new = ids == new
    return {"born": born, "full_at": full_at,
            "purity": float((truth[in_new] == 3).mean()) if in_new.any() else 0.0,
            "recall": float(in_new[truth == 3].mean())}


def noise_run(kernel: str, seed: int = 0, noise: float = 0.05) -> int:
    """Births on the three blobs with a share ``noise`` of uniform rows in every batch."""
    rng = np.random.default_rng(seed)
    model = MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=ALPHA, drift=True,
                                  **KERNELS[kernel])
    births = 0
    for _ in range(N_BATCHES):
        report = model.step(blob_batch(rng, mode=False, noise=noise)[0])
        births += sum(e["event"] == "born" for e in report.events)
    return births


def main() -> None:
    print(f"| stream | kernel | flagged at alpha = {ALPHA} (drift on) | births |")
    print("|---|---|---|---|")
    for name in ("blobs", "moons", "digits"):
        for kernel in KERNELS:
            share, births = inlier_run(name, kernel)
            print(f"| {name} | {kernel} | {share:.4f} | {births} |", flush=True)
    print()
    print("| stream | kernel | births | batches from pool full to birth | purity | recall |")
    print("|---|---|---|---|---|---|")
    for kernel in KERNELS:
        run = new_mode_run(kernel)
        delay = run["born"][0]["batch"] - run["full_at"] if run["born"] else "-"
        print(f"| new mode | {kernel} | {len(run['born'])} | {delay} | {run['purity']:.3f} "
              f"| {run['recall']:.3f} |", flush=True)
    for kernel in KERNELS:
        print(f"| 5% uniform noise | {kernel} | {noise_run(kernel)} | - | - | - |", flush=True)


if __name__ == "__main__":
    main()
