"""The novelty score is calibrated: on streams without outliers the share of records flagged
at alpha = 0.01 after warm-up stays within [alpha / 2, 2 alpha], on several data sets and
kernels (the streams of benchmarks/novelty_calibration.py; the table is in docs/novelty.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "novelty_calibration",
    Path(__file__).resolve().parents[2] / "benchmarks" / "novelty_calibration.py")
calibration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(calibration)

pytestmark = pytest.mark.unit

ALPHA = 0.01
CALIBRATED = [(name, kernel) for name in calibration.STREAMS for kernel in calibration.KERNELS]


@pytest.mark.parametrize("name, kernel", CALIBRATED)
def test_share_flagged_on_an_inlier_stream_is_within_half_and_twice_alpha(name, kernel):
    share, _ = calibration.flagged_share(name, kernel, ALPHA)
    assert ALPHA / 2 <= share <= 2 * ALPHA, f"{name} / {kernel}: {share:.4f} flagged"
