"""Drift handling: RTMM / RSCD / FRUS initial starts, kernel bisection, drift monitors and Ward merges (seeds 001, 003)."""

from __future__ import annotations

from streamkm.drift.bisect import SEEDINGS, BisectResult, kernel_bisect
from streamkm.drift.controller import DriftController, SplitProposal
from streamkm.drift.frus import feature_range, frus_centers, uniform_in_box
from streamkm.drift.merge import MergeChoice, smallest_ward_pair, ward_cost_matrix
from streamkm.drift.monitor import SpreadMonitor
from streamkm.drift.policy import DriftPolicy
from streamkm.drift.reservoir import RecentRows
from streamkm.drift.rscd import rscd_pairs
from streamkm.drift.rtmm import (
    pair_count,
    pair_to_serial,
    pairs_to_serials,
    rtmm_pairs,
    serial_to_pair,
    serials_to_pairs,
)
from streamkm.drift.two_means import (
    TwoMeansRuns,
    kernel_2means_from_labels,
    kernel_2means_from_pairs,
)

__all__ = [
    "SEEDINGS",
    "BisectResult",
    "DriftController",
    "DriftPolicy",
    "MergeChoice",
    "RecentRows",
    "SplitProposal",
    "SpreadMonitor",
    "TwoMeansRuns",
    "feature_range",
    "frus_centers",
    "kernel_2means_from_labels",
    "kernel_2means_from_pairs",
    "kernel_bisect",
    "pair_count",
    "pair_to_serial",
    "pairs_to_serials",
    "rscd_pairs",
    "rtmm_pairs",
    "serial_to_pair",
    "serials_to_pairs",
    "smallest_ward_pair",
    "uniform_in_box",
    "ward_cost_matrix",
]
