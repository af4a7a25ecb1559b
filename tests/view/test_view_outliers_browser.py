"""The live page of a service with ``model.outlier_alpha`` set, in headless chromium: records
flagged as outliers are drawn as crosses (the others as dots) and counted in the header,
``/api/clusters`` carries each sampled record's flag, and ``born`` / ``retired`` events are
listed with their cluster and reason."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamkm.app.service import Service
from streamkm.config.schema import config_from_mapping
from streamkm.view.hook import ClusterViewHook
from tests.view.test_view_browser import _chromium

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("chromium") is None,
                                 reason="Debian's chromium is not installed")]

BATCH = 500
N_ROWS = 4072          # the first batch (3072 records) and two of 500
CENTERS = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
#: scattered far from every center, all in the last batch (which the sample covers)
FAR = range(3900, 3960)


def _write_stream(path: Path) -> None:
    rng = np.random.default_rng(5)
    x = CENTERS[rng.integers(0, 3, N_ROWS)] + rng.normal(0.0, 0.5, (N_ROWS, 2))
    for i in FAR:
        x[i] = rng.uniform(20.0, 60.0, 2) * rng.choice([-1.0, 1.0], 2)
    path.write_text("".join(json.dumps({"id": i, "x": row}) + "\n"
                            for i, row in enumerate(x.tolist())))


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def test_page_draws_flagged_records_as_crosses_and_lists_births(tmp_path: Path) -> None:
    _write_stream(tmp_path / "in.jsonl")
    config = config_from_mapping({
        "source": {"paths": ["in.jsonl"], "poll_interval_ms": 5},
        "decoding": {"dim": 2},
        # a low level, so that the far records are nearly all of the flagged ones
        "model": {"n_clusters": 3, "random_state": 0, "outlier_alpha": 0.002,
                  "novelty_window": 512},
        # batches close by size only (the whole file is there), whatever the machine's load
        "batching": {"batch_size": BATCH, "max_wait_ms": 60_000,
                     "first_batch_wait_ms": 60_000},
        "checkpoint": {"dir": "ckpt", "every_batches": 5},
        "sinks": {"assignments": "out/assignments.jsonl", "events": "out/events.jsonl",
                  "dead_letter": "out/dead.jsonl"},
        "metrics": {"address": "127.0.0.1", "port": 0},
        "ui": {"sample_size": 4000},
    }, base_dir=tmp_path)
    service = Service(config)
    thread = threading.Thread(target=service.run)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while service.status.records_accepted < N_ROWS and time.monotonic() < deadline:
            time.sleep(0.02)
        assert service.status.records_accepted == N_ROWS
        # events reach the view as the runtime hands every lifecycle event to its hooks
        view = next(h for h in service.hooks if isinstance(h, ClusterViewHook))
        view.on_event(service, {"event": "born", "step": 3, "cluster_id": 3, "rows": 40,
                                "reason": "compact group of flagged records"})
        view.on_event(service, {"event": "retired", "step": 3, "cluster_id": 1,
                                "rows": 0, "reason": "no records for 50 batches"})
        assert service.metrics_server is not None
        base = service.metrics_server.base_url
        doc = _get(base + "/api/clusters")
        flagged = sum(doc["points"]["outlier"])
        assert len(doc["points"]["outlier"]) == len(doc["points"]["x"])
        assert flagged >= 5                                  # the far records sampled
        far_x = [x for x, o in zip(doc["points"]["x"], doc["points"]["outlier"]) if o]
        assert sum(abs(x) > 15 for x in far_x) >= 0.8 * flagged

        result = _chromium(base + "/", tmp_path / "profile", "--dump-dom")
        dom = result.stdout
        assert re.search(r'data-rendered="(\d+)"', dom), result.stderr[-2000:]
        crosses = re.findall(r'<path[^>]*class="outlier"[^>]*data-cluster="(-?\d+)"', dom)
        dots = re.findall(r'<circle[^>]*class="pt"[^>]*data-cluster="(-?\d+)"', dom)
        assert len(crosses) == flagged and len(dots) == len(doc["points"]["x"]) - flagged
        assert int(re.search(r'id="n-outliers">(\d+)<', dom).group(1)) == flagged
        assert 'data-event="born"' in dom and 'data-event="retired"' in dom
        assert "cluster 3 born from 40 flagged records (compact group of flagged records)" in dom
        assert "cluster 1 retired (no records for 50 batches)" in dom
    finally:
        service.request_stop()
        thread.join(timeout=30)
