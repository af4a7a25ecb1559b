"""Write the example inputs of ``examples/streamkm.toml`` and ``examples/sketch.toml``.

    python examples/data/make_data.py

``features.jsonl``: 2,000 two-dimensional records from four Gaussian blobs, one record
per line (``{"id": "p00017", "x": [1.23, -0.45]}``). ``tfidf.jsonl``: 1,200 sparse
records of 50,000 features from 20 topics, each record listing a dozen nonzero features
of its topic's vocabulary plus a few random ones (``{"id", "indices", "values"}``).
The files are deterministic (fixed seeds) and committed next to this script.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def features(n: int = 2000, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    centers = np.array([[-4.0, -4.0], [4.0, -4.0], [-4.0, 4.0], [4.0, 4.0]])
    lines = []
    for i in range(n):
        x = centers[i % 4] + rng.normal(0.0, 1.0, 2)
        lines.append(json.dumps({"id": f"p{i:05d}", "x": [round(float(v), 3) for v in x]}))
    return lines


def tfidf(n: int = 1200, dim: int = 50000, topics: int = 20, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = rng.choice(dim, size=(topics, 100), replace=False)
    lines = []
    for i in range(n):
        words = rng.choice(vocab[i % topics], size=12, replace=False)
        noise = rng.integers(0, dim, size=3)
        indices = np.unique(np.concatenate([words, noise]))
        values = rng.uniform(0.05, 1.0, size=indices.size)
        lines.append(json.dumps({"id": f"doc-{i:05d}", "indices": indices.tolist(),
                                 "values": [round(float(v), 3) for v in values]}))
    return lines


if __name__ == "__main__":
    (HERE / "features.jsonl").write_text("\n".join(features()) + "\n")
    (HERE / "tfidf.jsonl").write_text("\n".join(tfidf()) + "\n")
