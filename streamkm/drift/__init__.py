"""Drift handling: RTMM / RSCD / FRUS initial starts, kernel bisection, drift monitors and Ward merges (seeds 001, 003).

The names below are imported on first use (module ``__getattr__``): the drift policy
(:mod:`streamkm.drift.policy`) is read without loading the numba kernels of the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamkm._core.lazy_names import lazy_names

if TYPE_CHECKING:  # for type checkers and IDEs; at run time see __getattr__
    from streamkm.drift.bisect import BisectResult, kernel_bisect
    from streamkm.drift.controller import DriftController, SplitProposal
    from streamkm.drift.frus import feature_range, frus_centers, uniform_in_box
    from streamkm.drift.merge import (MergeChoice, most_redundant_pair, redundancy_matrix,
                                      smallest_ward_pair, ward_cost_matrix)
    from streamkm.drift.monitor import SpreadMonitor
    from streamkm.drift.policy import SEEDINGS, DriftPolicy
    from streamkm.drift.reservoir import RecentRows
    from streamkm.drift.rscd import rscd_pairs
    from streamkm.drift.rtmm import (pair_count, pair_to_serial, pairs_to_serials, rtmm_pairs,
                                     serial_to_pair, serials_to_pairs)
    from streamkm.drift.two_means import (TwoMeansRuns, kernel_2means_from_labels,
                                          kernel_2means_from_pairs)

#: Where each public name lives (imported by :func:`__getattr__` on first access).
_PUBLIC: dict[str, str] = {
    "BisectResult": "streamkm.drift.bisect",
    "DriftController": "streamkm.drift.controller",
    "DriftPolicy": "streamkm.drift.policy",
    "MergeChoice": "streamkm.drift.merge",
    "RecentRows": "streamkm.drift.reservoir",
    "SEEDINGS": "streamkm.drift.policy",
    "SplitProposal": "streamkm.drift.controller",
    "SpreadMonitor": "streamkm.drift.monitor",
    "TwoMeansRuns": "streamkm.drift.two_means",
    "feature_range": "streamkm.drift.frus",
    "frus_centers": "streamkm.drift.frus",
    "kernel_2means_from_labels": "streamkm.drift.two_means",
    "kernel_2means_from_pairs": "streamkm.drift.two_means",
    "kernel_bisect": "streamkm.drift.bisect",
    "most_redundant_pair": "streamkm.drift.merge",
    "pair_count": "streamkm.drift.rtmm",
    "pair_to_serial": "streamkm.drift.rtmm",
    "pairs_to_serials": "streamkm.drift.rtmm",
    "redundancy_matrix": "streamkm.drift.merge",
    "rscd_pairs": "streamkm.drift.rscd",
    "rtmm_pairs": "streamkm.drift.rtmm",
    "serial_to_pair": "streamkm.drift.rtmm",
    "serials_to_pairs": "streamkm.drift.rtmm",
    "smallest_ward_pair": "streamkm.drift.merge",
    "uniform_in_box": "streamkm.drift.frus",
    "ward_cost_matrix": "streamkm.drift.merge",
}

__all__ = ["BisectResult", "DriftController", "DriftPolicy", "MergeChoice", "RecentRows",
    "SEEDINGS", "SplitProposal", "SpreadMonitor", "TwoMeansRuns", "feature_range",
    "frus_centers", "kernel_2means_from_labels", "kernel_2means_from_pairs",
    "kernel_bisect", "most_redundant_pair", "pair_count", "pair_to_serial",
    "pairs_to_serials", "redundancy_matrix", "rscd_pairs",
    "rtmm_pairs", "serial_to_pair", "serials_to_pairs", "smallest_ward_pair",
    "uniform_in_box", "ward_cost_matrix"]


__getattr__, __dir__ = lazy_names(__name__, globals(), _PUBLIC)
