"""Every compiled kernel of ``streamkm._numba`` releases the GIL while it runs, so that the
service's step thread computes while its loop reads and decodes the next batch."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from numba.core.registry import CPUDispatcher

import streamkm._numba

pytestmark = pytest.mark.unit


def _kernels() -> list[tuple[str, CPUDispatcher]]:
    found = []
    for info in pkgutil.iter_modules(streamkm._numba.__path__):
        module = importlib.import_module(f"streamkm._numba.{info.name}")
        for name, value in vars(module).items():
            if (isinstance(value, CPUDispatcher) and value.__module__ == module.__name__
                    and value.targetoptions.get("inline") != "always"):  # not inlined only
                found.append((f"{info.name}.{name}", value))
    return found


def test_the_step_kernels_are_found() -> None:
    names = {name for name, _kernel in _kernels()}
    assert {"kernels.rbf_segment_sums", "centers.assemble_grams",
            "anchor_graph.nearest_anchors_by_differences", "knn_graph.join_rows",
            "lloyd.cluster_sums"} <= names


@pytest.mark.parametrize("name,kernel", _kernels(), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_the_kernel_releases_the_gil(name: str, kernel: CPUDispatcher) -> None:
    assert kernel.targetoptions.get("nogil") is True, f"{name} holds the GIL: add nogil=True"
