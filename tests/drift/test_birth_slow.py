"""Births on the longest inlier-only stream of benchmarks/novelty_births.py: digits with the
default kernel (``gamma="auto"`` chooses the anchor-graph kernel) gives no birth and stays
calibrated with drift handling on."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "novelty_births", Path(__file__).resolve().parents[2] / "benchmarks" / "novelty_births.py")
births = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(births)

pytestmark = pytest.mark.slow


def test_digits_with_the_default_kernel_gives_no_birth_and_stays_calibrated():
    share, n_births = births.inlier_run("digits", "auto")
    assert n_births == 0
    assert births.ALPHA / 2 <= share <= 2 * births.ALPHA, f"{share:.4f} flagged"
