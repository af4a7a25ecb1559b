"""The streams head-to-head benchmark (benchmarks/bench_streams.py): its scoring, its streams
and its smallest end-to-end run, so the documented command keeps working."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    # the benchmark imports its helpers (_streams_*) by name from its own folder
    if str(_BENCH) not in sys.path:
        sys.path.insert(0, str(_BENCH))
    return importlib.import_module(name)


@pytest.mark.unit
def test_purity_counts_each_predicted_clusters_majority_class():
    bench = _load("bench_streams")
    y = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    pred = np.array([5, 5, 7, 7, 7, 9, 9, 5])
    # cluster 5 holds classes {0, 0, 2}: 2; cluster 7 {0, 1, 1}: 2; cluster 9 {2, 2}: 2
    assert bench.purity(y, pred) == pytest.approx(6 / 8)
    assert bench.purity(y, y + 10) == 1.0
    assert bench.purity(y, np.zeros_like(y)) == pytest.approx(3 / 8)


@pytest.mark.unit
def test_keel_stream_by_class_delivers_classes_one_after_another():
    data = _load("_streams_data")
    shuffled = data.keel_stream("texture", "shuffled", seed=1)
    ordered = data.keel_stream("texture", "by-class", seed=1)
    n_classes = ordered.n_classes
    assert n_classes == 11 and ordered.X.shape == shuffled.X.shape == (5500, 40)
    assert np.count_nonzero(np.diff(ordered.y)) == n_classes - 1
    assert np.count_nonzero(np.diff(shuffled.y)) > 1000
    # the same rows, standardised, in another order
    assert np.allclose(np.sort(ordered.X, axis=0), np.sort(shuffled.X, axis=0))
    assert np.allclose(ordered.X.mean(axis=0), 0.0, atol=1e-9)
    with pytest.raises(ValueError, match="'sorted'"):
        data.keel_stream("texture", "sorted")


@pytest.mark.unit
def test_demo_groups_match_the_demo_points_and_split_the_blob_at_its_midpoint():
    from streamkm.app.demo import DriftingStream

    stream = DriftingStream(seed=3, period=8000, split_after=2000)
    x, groups = stream.points_and_groups(0, 6000)
    assert np.array_equal(x, stream.points(0, 6000))
    ring = groups == 2
    assert np.all(np.abs(np.hypot(x[ring, 0], x[ring, 1]) - 3.0) < 0.7)
    blob = np.isin(groups, (3, 4))
    assert np.all(x[blob, 0] > 4.0)
    midpoint = 2000 + 8000 // 8
    assert set(groups[:midpoint][blob[:midpoint]].tolist()) == {3}
    late = groups[midpoint:]
    assert {3, 4} <= set(late.tolist())
    # after the midpoint the halves are told apart by the side they drift to
    assert np.all(x[midpoint:][late == 4, 1] > x[midpoint:][late == 3, 1].mean())


@pytest.mark.slow
def test_smallest_run_scores_every_system_and_writes_figures(tmp_path, capsys):
    bench = _load("bench_streams")
    out = tmp_path / "results.json"
    code = bench.main(["--streams", "drifting", "texture-by-class", "--rows", "1500",
                       "--window", "250", "--budget", "0.5", "--figures", str(tmp_path),
                       "--json", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "### Floors" in printed and "| drifting | 2 |" in printed
    runs = json.loads(out.read_text())
    assert [r["info"]["name"] for r in runs] == ["texture-by-class", "drifting"]
    for run in runs:
        names = [r["system"] for r in run["results"]]
        assert names[:4] == ["streamkm", "streamkm drift", "streamkm linear",
                             "sklearn MiniBatchKMeans"]
        assert sum(n.startswith("River ") for n in names) == 10
        for r in run["results"]:
            # the first window is learnt only; every later window is predicted, then learnt
            assert r["windows"] == r["rows"] // 250 - 1
            assert -1.0 <= r["ari_worst"] <= r["ari_mean"] <= 1.0
            assert 0.0 <= r["purity_worst"] <= r["purity_mean"] <= 1.0
            assert r["records_per_s"] > 0 and r["state_bytes"] > 0
            assert r["prefix"] == (r["rows"] < 1500)
            if not r["system"].startswith("River"):
                assert not r["prefix"]
    png = (tmp_path / "streams-drifting.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "streams-texture-by-class.png").stat().st_size > 10_000
