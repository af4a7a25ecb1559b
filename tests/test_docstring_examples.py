"""The numpydoc Examples of the public estimators run as written (doctest)."""

from __future__ import annotations

import doctest
import importlib

import pytest

pytestmark = pytest.mark.unit

MODULES = [
    "streamkm.cluster._minibatch_kernel_kmeans",
    "streamkm.batch.kmeans",
    "streamkm.batch.kernel_kmeans",
    "streamkm.batch.spectral",
    "streamkm.batch.ward",
    "streamkm.sketch.projection",
    "streamkm.sketch.svd",
    "streamkm.sketch.leverage",
    "streamkm.sketch.pipeline",
    "streamkm.river",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    if name == "streamkm.river":
        pytest.importorskip("river")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0, f"{result.failed} example(s) of {name} failed (output above)"
