"""Scores of ``bench_novelty.py``: ROC-AUC, precision of the top-ranked records, and the
summaries over data sets. Scores are anomaly scores: higher = more unusual."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import rankdata


def roc_auc(truth: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve: the chance that a random anomaly scores above a random
    normal record, ties counting one half (the Mann-Whitney statistic). NaN when one of the
    two groups is empty."""
    truth = np.asarray(truth, dtype=bool)
    n_pos = int(truth.sum())
    n_neg = truth.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(np.asarray(scores, dtype=np.float64))
    return float((ranks[truth].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def precision_at(truth: np.ndarray, scores: np.ndarray, m: int) -> float:
    """Share of anomalies among the ``m`` highest scores. Records tied with the ``m``-th
    score count in proportion (the expected precision when ties are broken at random).
    NaN for ``m`` = 0."""
    truth = np.asarray(truth, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    if m <= 0:
        return float("nan")
    m = min(m, scores.size)
    cut = np.sort(scores)[::-1][m - 1]
    above = scores > cut
    tied = scores == cut
    left = m - int(above.sum())
    hits = truth[above].sum() + left * truth[tied].sum() / tied.sum()
    return float(hits / m)


def count_for_rate(rate: float, n: int) -> int:
    """Records flagged at ``rate`` among ``n`` (rounded up, at least one for a rate > 0)."""
    return int(math.ceil(rate * n - 1e-9)) if rate > 0 else 0


def set_scores(truth: np.ndarray, scores: np.ndarray, flag_rate: float) -> dict[str, float]:
    """ROC-AUC, precision at ``flag_rate`` (streamkm's share of flagged records on this
    set) and precision at the anomaly rate (the top as many records as there are
    anomalies)."""
    n = truth.size
    return {"auc": roc_auc(truth, scores),
            "p_at_flagged": precision_at(truth, scores, count_for_rate(flag_rate, n)),
            "p_at_anomaly_rate": precision_at(truth, scores, int(np.sum(truth)))}


def median_over_sets(values: list[float | None]) -> float:
    """Median of the defined values (None and NaN are undefined; NaN when none is)."""
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.median(kept)) if kept else float("nan")


def sets_below_reference(ours: list[float], references: list[list[float]],
                         margin: float = 0.05) -> list[int]:
    """Positions of the sets where ``ours`` is more than ``margin`` below the best of the
    reference systems on that set."""
    out = []
    for i, value in enumerate(ours):
        best = max(ref[i] for ref in references)
        if value < best - margin:
            out.append(i)
    return out
