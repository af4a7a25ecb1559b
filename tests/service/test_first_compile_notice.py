"""The first run of an install says, in one line, that it compiles the numba kernels; a run
that finds them in numba's cache says nothing (``NUMBA_CACHE_DIR`` gives each test run an
empty cache of its own, as a fresh install has)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.service_process import blob_rows, run_until_assigned, service_config, write_jsonl

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NOTICE = "streamkm: first run of this install: compiling the numba kernels"


def test_first_run_says_it_compiles_and_the_next_one_does_not(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(300))
    config = service_config(tmp_path, data)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    first = run_until_assigned(config, 300, env=env)
    assert first.stderr().count(NOTICE) == 1
    assert any((tmp_path / "numba-cache").rglob("*.nbi"))  # the cache was filled

    write_jsonl(data, blob_rows(100, seed=1, start=300), append=True)
    second = run_until_assigned(config, 400, env=env)
    assert NOTICE not in second.stderr()
