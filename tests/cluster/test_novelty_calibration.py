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
#: the one measured miss, documented in docs/novelty.md: the anchor-graph kernel that
#: gamma="auto" picks on moons flags 2.2% (its distances pile up at a ceiling that moves
#: with the center from one step to the next)
KNOWN_MISS = {("moons", "auto")}
CASES = [pytest.param(name, kernel, marks=pytest.mark.xfail(
    strict=True, reason="anchor-graph kernel on moons flags above 2 alpha"))
    if (name, kernel) in KNOWN_MISS else (name, kernel)
    for name in calibration.STREAMS for kernel in calibration.KERNELS]


@pytest.mark.parametrize("name, kernel", CASES)
def test_share_flagged_on_an_inlier_stream_is_within_half_and_twice_alpha(name, kernel):
    share, _ = calibration.flagged_share(name, kernel, ALPHA)
    assert ALPHA / 2 <= share <= 2 * ALPHA, f"{name} / {kernel}: {share:.4f} flagged"
