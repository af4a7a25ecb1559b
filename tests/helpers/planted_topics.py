"""Planted-topics documents: sparse, TF-IDF-like rows of a high-dimensional vocabulary.

Document ``i`` belongs to topic ``i % n_topics``; it draws most of its words from that
topic's own words and the rest from the whole vocabulary, with positive weights, and is
L2-normalised. Deterministic in ``i`` (and the seed).
"""

from __future__ import annotations

import json

import numpy as np
import scipy.sparse as sp

__all__ = ["PlantedTopics"]


class PlantedTopics:
    """Documents of ``n_topics`` planted topics over ``dim`` words.

    Parameters
    ----------
    dim : int
        Vocabulary size.
    n_topics : int
        Number of topics (the ground-truth clusters).
    topic_words : int
        Words owned by each topic.
    words_per_doc : int
        Distinct words of one document.
    topic_share : float
        Fraction of a document's words drawn from its topic's words.
    seed : int
        Seed of the topics' words.
    """

    def __init__(self, dim: int = 2000, n_topics: int = 4, topic_words: int = 40,
                 words_per_doc: int = 30, topic_share: float = 0.7, seed: int = 0) -> None:
        self.dim, self.n_topics = dim, n_topics
        self.words_per_doc, self.topic_share, self.seed = words_per_doc, topic_share, seed
        rng = np.random.default_rng(seed)
        self.words = rng.permutation(dim)[:n_topics * topic_words].reshape(n_topics, -1)

    def doc(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Sorted word indices and their weights of document ``i``."""
        rng = np.random.default_rng([self.seed, i])
        own = int(round(self.words_per_doc * self.topic_share))
        words = set(rng.choice(self.words[i % self.n_topics], own, replace=False).tolist())
        while len(words) < self.words_per_doc:
            words.add(int(rng.integers(self.dim)))
        idx = np.array(sorted(words), dtype=np.int64)
        val = rng.uniform(0.5, 1.5, idx.shape[0])
        return idx, val / np.linalg.norm(val)

    def label(self, i: int) -> int:
        return i % self.n_topics

    def json(self, i: int) -> bytes:
        """Document ``i`` as a ``json_sparse`` record with id ``d<i>``."""
        idx, val = self.doc(i)
        return json.dumps({"id": f"d{i}", "indices": idx.tolist(),
                           "values": val.round(6).tolist()}).encode()

    def matrix(self, ids: range | list[int]) -> sp.csr_matrix:
        """The documents ``ids`` as a CSR matrix (values rounded as in :meth:`json`)."""
        rows, cols, vals = [], [], []
        for r, i in enumerate(ids):
            idx, val = self.doc(i)
            rows += [r] * idx.shape[0]
            cols += idx.tolist()
            vals += val.round(6).tolist()
        return sp.csr_matrix((vals, (rows, cols)), shape=(len(ids), self.dim))
