"""The live cluster view of a running ``streamkm demo``, opened in a real browser (Debian's
headless chromium): the rendered page shows one point per sampled record, one colour per
cluster and the demo's split in its event list; ``/api/clusters`` matches the model, and its
sampled records are clustered as the generator's shapes (moons, ring, blob, and the blob's
two halves once it has split)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.spatial import cKDTree
from sklearn.metrics import adjusted_rand_score

from streamkm.app.demo import DriftingStream
from tests.helpers.processes import free_port, kill, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("chromium") is None,
                                 reason="Debian's chromium is not installed")]

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")
#: Set to a path to keep the screenshot (README's picture is made this way).
SCREENSHOT_ENV = "STREAMKM_VIEW_SCREENSHOT"


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = resp.read()
        return json.loads(body) if resp.headers.get_content_type() == "application/json" \
            else body.decode()


def _chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                           "--virtual-time-budget=4000", *extra, url],
                          capture_output=True, text=True, timeout=120)


#: records after which the demo's model counts as warmed up (three refits of its kernel)
WARM_RECORDS = 12288
#: the sampled records are clustered like the generator's shapes at least this well
MIN_ARI = 0.95


def _sample_shapes(doc: dict[str, Any], stream_file: Path) -> tuple[np.ndarray, np.ndarray]:
    """Record index and generator shape of each point of the page's sample (-1 where the
    point matches no recent record: the written stream is re-generated and looked up)."""
    written = stream_file.read_bytes().count(b"\n")
    start = max(0, written - 100_000)
    stream = DriftingStream(seed=0)
    points = stream.points(start, written - start)
    written_points = np.round(points.astype(np.float32).astype(np.float64), 5)
    page = np.c_[doc["points"]["x"], doc["points"]["y"]]
    dist, index = cKDTree(written_points).query(page)
    found = dist < 2e-5
    records = np.where(found, index + start, -1)
    shapes = np.where(found, stream.shapes(start, written - start)[index], -1)
    return records, shapes


def test_demo_page_shows_points_clusters_and_the_split(tmp_path: Path) -> None:
    port = free_port()
    out = tmp_path / "demo.out"
    stream_file = tmp_path / "state" / "stream.jsonl"
    with open(out, "wb") as stdout:
        demo = subprocess.Popen(
            [sys.executable, "-m", "streamkm", "demo", "--state-dir", str(tmp_path / "state"),
             "--rate", "4000", "--metrics-port", str(port), "--duration", "600"],
            stdout=stdout, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    stream = DriftingStream(seed=0)
    scores: dict[str, float] = {}

    def sample_scored(name: str, first: int, last: float) -> bool:
        """The page's sample holds only records in [first, last): score it."""
        try:  # the first batch's kernel choice can hold the listener up for a while
            doc = _get(base + "/api/clusters")
        except (TimeoutError, urllib.error.URLError):
            return False
        if not doc["points"]["x"]:
            return False
        records, shapes = _sample_shapes(doc, stream_file)
        if (records < 0).mean() > 0.01:
            return False
        known = records >= 0
        if records[known].min() >= last:
            pytest.fail(f"the sample passed records {first}..{last} before it was scored")
        if records[known].min() < first or records[known].max() >= last:
            return False
        scores[name] = adjusted_rand_score(shapes[known],
                                           np.asarray(doc["points"]["cluster"])[known])
        return True

    try:
        wait_until(lambda: out.read_text().startswith("streamkm demo: watch the clusters at"),
                   60, "the demo printing the page's URL", procs=(demo,))
        assert out.read_text().splitlines()[0].endswith(f"{base}/")
        doc: dict[str, Any] = {}

        def retired_after(split: dict[str, Any]) -> set[int]:
            return {c for e in doc["events"] if e["event"] == "merge"
                    and e["step"] >= split["step"] for c in e["clusters"] if c != e["into"]}

        def split_shown() -> bool:
            """The split is announced with the batch assigned just before it, so its new id
            reaches the view's sampled points with the next batch (or a later merge
            retires it)."""
            try:
                doc.update(_get(base + "/api/clusters"))
            except (TimeoutError, urllib.error.URLError):
                return False
            split = next((e for e in doc["events"] if e["event"] == "split"), None)
            return split is not None and split["into"][1] in (
                {c["id"] for c in doc["clusters"]} | retired_after(split))

        # generous waits: the service may lag the writer on a loaded machine
        wait_until(lambda: sample_scored("before", WARM_RECORDS, stream.split_after), 300,
                   "a sample of warmed-up records from before the blob splits",
                   procs=(demo,), interval=0.2)
        wait_until(split_shown, 300, "the demo's split and its new cluster in /api/clusters",
                   procs=(demo,), interval=0.5)
        apart = stream.split_after + stream.period // 4  # the blob's halves are fully apart
        wait_until(lambda: sample_scored("after", apart, float("inf")), 300,
                   "a sample of records from after the blob's split", procs=(demo,),
                   interval=0.5)
        assert scores["before"] >= MIN_ARI and scores["after"] >= MIN_ARI, scores
        doc.update(_get(base + "/api/clusters"))
        # the JSON matches the model: sizes sum to the sample, ids are stable cluster ids
        n_points = len(doc["points"]["x"])
        assert sum(c["sample_size"] for c in doc["clusters"]) == n_points > 0
        assert set(doc["points"]["cluster"]) == {c["id"] for c in doc["clusters"]}
        split = next(e for e in doc["events"] if e["event"] == "split")
        assert doc["projection"] == "raw" and doc["axes"] == ["x0", "x1"]
        exported = set(re.findall(r'streamkm_cluster_records\{cluster="(-?\d+)"\}',
                                  _get(base + "/metrics")))
        assert {int(c) for c in exported} >= {c["id"] for c in doc["clusters"]} - {split["cluster"]}

        result = _chromium(base + "/", tmp_path / "profile", "--dump-dom")
        dom = result.stdout
        rendered = re.search(r'data-rendered="(\d+)"', dom)
        assert rendered, f"the page did not render: {result.stderr[-2000:]}"
        shown = int(re.search(r'id="n-points">(\d+)<', dom).group(1))
        points = re.findall(r'<circle[^>]*class="pt"[^>]*data-cluster="(-?\d+)"', dom)
        assert len(points) == shown >= min(n_points, 500)
        bars = set(re.findall(r'<rect[^>]*class="bar"[^>]*data-cluster="(-?\d+)"', dom))
        assert set(points) == bars and len(bars) >= 4
        fills = set(re.findall(r'<circle[^>]*fill="(#[0-9a-f]{6})"[^>]*class="pt"', dom))
        assert len(fills) == len(bars)  # one colour per cluster
        assert 'data-event="split"' in dom
        assert "split into" in dom

        screenshot = Path(os.environ.get(SCREENSHOT_ENV, tmp_path / "view.png"))
        _chromium(base + "/", tmp_path / "profile2", "--window-size=1200,760",
                  f"--screenshot={screenshot}")
        assert screenshot.stat().st_size > 10_000
    finally:
        kill(demo)


def test_page_and_api_are_off_with_ui_disabled_and_unknown_paths_are_404(
        tmp_path: Path) -> None:
    from streamkm.app.demo import demo_config
    from streamkm.app.service import Service

    config = demo_config(tmp_path, metrics_port=0, env={"STREAMKM_UI__ENABLED": "false"})
    service = Service(config)
    service.start()
    try:
        base = service.metrics_server.base_url
        for path in ("/", "/api/clusters", "/nope"):
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(base + path, timeout=10)
            assert info.value.code == 404
        assert "streamkm_records_read_total" in _get(base + "/metrics")
    finally:
        service.close(final_checkpoint=False)


def test_plot_draws_a_checkpoint_with_and_without_data(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from streamkm.app.demo import DriftingStream, demo_config
    from streamkm.app.service import Service
    from tests.service.test_drift_service import _run_until

    stream = DriftingStream(seed=0, bad_fraction=0.0)
    (tmp_path / "stream.jsonl").write_bytes(stream.lines(0, 6000))
    _run_until(Service(demo_config(tmp_path, metrics_port=0, env={}), serve_metrics=False),
               6000)
    # without data the picture shows the rows the model keeps: support rows, or the rows a
    # graph kernel was fitted on (the demo's first batch decides which kernel)
    for extra, what in (((), " rows "), (("--data", str(tmp_path / "stream.jsonl")),
                                         "6000 records")):
        png = tmp_path / f"plot{len(extra)}.png"
        done = subprocess.run([sys.executable, "-m", "streamkm", "plot",
                               str(tmp_path / "checkpoints"), *extra, "-o", str(png)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert what in done.stdout and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    missing = subprocess.run([sys.executable, "-m", "streamkm", "plot", str(tmp_path / "no"),
                              "-o", str(tmp_path / "x.png")], capture_output=True, text=True)
    assert missing.returncode != 0 and "no" in missing.stderr
