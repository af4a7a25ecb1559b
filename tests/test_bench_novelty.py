"""The novelty benchmark (benchmarks/bench_novelty.py): its data sets return what they say,
its metrics agree with scikit-learn's, its competitors rank plain outliers first, its table
writer keeps the prose around the tables, and its quick run works end to end."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    # the benchmark imports its helpers (_novelty_*) by name from its own folder
    if str(_BENCH) not in sys.path:
        sys.path.insert(0, str(_BENCH))
    return importlib.import_module(name)


@pytest.mark.unit
def test_every_file_of_the_seven_families_is_listed_and_nothing_else():
    data = _load("_novelty_data")
    names = data.imbalanced_names()
    assert len(names) == 66
    families = {f: [n for n in names if n.startswith(f)] for f in data.FAMILIES}
    assert {f: len(v) for f, v in families.items()} == {
        "ecoli": 19, "yeast": 14, "glass": 13, "abalone": 7, "page-blocks": 2,
        "vehicle": 4, "winequality": 7}
    assert sum(len(v) for v in families.values()) == len(names)


@pytest.mark.unit
def test_the_minority_class_is_the_anomaly_even_when_it_is_named_negative():
    data = _load("_novelty_data")
    # ecoli-0_vs_1: 143 "positive" and 77 "negative" rows
    s = data.keel_imbalanced("ecoli-0_vs_1")
    # 7 features, one of them constant in this file (dropped)
    assert s.X.shape == (220, 6) and int(s.anomaly.sum()) == 77
    assert set(s.classes[s.anomaly].tolist()) == {0}  # "negative" sorts first
    yeast = data.keel_imbalanced("yeast6")
    assert int(yeast.anomaly.sum()) == 35 and yeast.n_clusters == 4
    np.testing.assert_allclose(yeast.X.mean(axis=0), 0.0, atol=1e-9)
    np.testing.assert_allclose(yeast.X.std(axis=0), 1.0)
    with pytest.raises(ValueError, match="'ecoli9'"):
        data.keel_imbalanced("ecoli9")


@pytest.mark.unit
def test_abalone_sex_becomes_three_indicator_columns():
    data = _load("_novelty_data")
    s = data.keel_imbalanced("abalone19")
    # 7 measurements + M/F/I indicators
    assert s.X.shape == (4174, 10) and int(s.anomaly.sum()) == 32
    raw, _ = data.read_keel_table(data._keel_root() / "imbalanced" / "raw" / "abalone19.dat")
    # one indicator per value (F, I, M in sorted order), exactly one set per row
    assert set(np.unique(raw[:, :3]).tolist()) == {0.0, 1.0}
    assert np.array_equal(raw[:, :3].sum(axis=1), np.ones(4174))
    assert raw[0, :3].tolist() == [0.0, 0.0, 1.0]  # the first row is "M"


@pytest.mark.unit
def test_thinned_set_keeps_every_other_class_and_one_percent_of_the_drawn_one():
    data = _load("_novelty_data")
    s = data.keel_thinned("satimage", seed=0)
    n_rare = int(s.anomaly.sum())
    assert n_rare == int(np.ceil((s.X.shape[0] - n_rare) * 0.01 / 0.99))
    assert abs(s.anomaly.mean() - 0.01) < 0.001
    rare = set(s.classes[s.anomaly].tolist())
    assert len(rare) == 1
    # every row of the other five classes is kept (satimage: 6,435 rows)
    _, labels = data.read_keel_table(data._keel_root() / "balanced" / "raw" / "satimage.dat")
    values = np.unique(labels)
    kept_classes = values[np.unique(s.classes[~s.anomaly])]
    assert sum(int((labels == v).sum()) for v in kept_classes) == int((~s.anomaly).sum())
    assert s.n_clusters == 5 and s.name.endswith("-1%")
    assert data.keel_thinned("satimage", seed=0).name == s.name  # seeded


@pytest.mark.unit
def test_generated_streams_have_five_percent_uniform_noise_and_a_late_new_mode():
    data = _load("_novelty_data")
    blobs = data.blobs_with_noise(2000, seed=1)
    assert blobs.X.shape == (2000, 4) and int(blobs.anomaly.sum()) == 100
    assert np.array_equal(blobs.anomaly, blobs.classes == -1)
    assert set(blobs.classes[~blobs.anomaly].tolist()) == set(range(5))
    moons = data.moons_with_noise(2000, seed=1)
    assert moons.X.shape == (2000, 2) and int(moons.anomaly.sum()) == 100
    new = data.new_mode_stream(4000, seed=1)
    assert new.appears_at == 2000 and not new.anomaly[:2000].any()
    assert int(new.anomaly[2000:].sum()) == 400
    assert new.shuffled(5) is new  # arrival order is the point of this stream


@pytest.mark.unit
def test_quick_sets_are_one_file_per_family_and_small():
    data = _load("_novelty_data")
    sets = data.scored_sets(quick=True)
    assert all(s.name.startswith(f) for s, f in zip(sets[:7], data.FAMILIES))
    assert [s.kind for s in sets[7:]] == ["keel-thinned", "generated", "generated"]
    assert max(s.X.shape[0] for s in sets) == 2000
    assert all(s.anomaly.any() for s in sets)


@pytest.mark.unit
def test_roc_auc_matches_scikit_learn_with_and_without_ties():
    metrics = _load("_novelty_metrics")
    rng = np.random.default_rng(0)
    for ties in (False, True):
        truth = rng.random(300) < 0.1
        scores = rng.normal(size=300) + 1.5 * truth
        if ties:
            scores = np.round(scores)
        assert metrics.roc_auc(truth, scores) == pytest.approx(roc_auc_score(truth, scores))
    assert np.isnan(metrics.roc_auc(np.zeros(5, bool), np.arange(5.0)))


@pytest.mark.unit
def test_precision_at_counts_the_top_scores_and_shares_ties():
    metrics = _load("_novelty_metrics")
    truth = np.array([1, 0, 1, 0, 0, 1], dtype=bool)
    scores = np.array([0.9, 0.8, 0.7, 0.1, 0.2, 0.3])
    assert metrics.precision_at(truth, scores, 1) == 1.0
    assert metrics.precision_at(truth, scores, 3) == pytest.approx(2 / 3)
    assert metrics.precision_at(truth, scores, 6) == pytest.approx(0.5)
    # three rows tied at the top, one of them an anomaly: the top two hold 2/3 of one
    tied = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    assert metrics.precision_at(np.array([0, 1, 0, 1, 1, 1], bool), tied, 2) == \
        pytest.approx((2 * 1 / 3) / 2)
    assert np.isnan(metrics.precision_at(truth, scores, 0))
    assert metrics.count_for_rate(0.01, 250) == 3 and metrics.count_for_rate(0.0, 250) == 0
    assert metrics.count_for_rate(0.02, 100) == 2


@pytest.mark.unit
def test_sets_below_reference_use_the_best_reference_per_set():
    metrics = _load("_novelty_metrics")
    ours = [0.80, 0.90, 0.70]
    refs = [[0.86, 0.80, 0.74], [0.70, 0.96, 0.60]]
    assert metrics.sets_below_reference(ours, refs) == [0, 1]
    assert metrics.median_over_sets([0.5, float("nan"), 0.7, None]) == pytest.approx(0.6)
    assert np.isnan(metrics.median_over_sets([None, float("nan")]))


@pytest.mark.unit
def test_competitors_score_a_far_record_above_the_cloud_they_learnt():
    detectors = _load("_novelty_detectors")
    rng = np.random.default_rng(3)
    first = rng.normal(size=(200, 3))
    window = np.vstack([rng.normal(size=(49, 3)), [[8.0, -8.0, 8.0]]])
    for det in (detectors.IsolationForestDetector(400, seed=0),
                detectors.LOFDetector(400, seed=0),
                detectors.HalfSpaceTreesDetector(200, seed=0)):
        det.start(first)
        scores = det.score_then_learn(window)
        assert scores.shape == (50,)
        assert scores[-1] > np.max(scores[:-1]), det.name
    refit = detectors.IsolationForestDetector(120, seed=0)
    refit.start(first)
    refit.score_then_learn(window)
    # the sliding window keeps the newest 120 records, the window just scored included
    assert refit.seen.shape == (120, 3) and np.array_equal(refit.seen[-50:], window)


@pytest.mark.unit
def test_half_space_trees_see_the_first_window_in_the_unit_cube():
    detectors = _load("_novelty_detectors")
    det = detectors.HalfSpaceTreesDetector(50, seed=0)
    first = np.array([[2.0, -1.0], [4.0, 1.0], [3.0, 0.0]])
    det.start(first)
    rows = det._rows(first)
    assert rows == [{0: 0.0, 1: 0.0}, {0: 1.0, 1: 1.0}, {0: 0.5, 1: 0.5}]
    assert det._rows(np.array([[6.0, 0.0]])) == [{0: 2.0, 1: 0.5}]


def _results() -> dict:
    """A small results dict of the shape bench_novelty.run_all writes."""
    tables = _load("_novelty_tables")
    systems = {name: {"auc": 0.8 + 0.01 * i, "p_at_flagged": 0.5, "p_at_anomaly_rate": 0.4,
                      "us_per_record": 10.0 * (i + 1)} for i, name in enumerate(tables.SYSTEMS)}
    one = {"name": "glass2", "kind": "keel-imbalanced", "n": 214, "d": 9, "anomalies": 17,
           "scored": 182, "scored_anomalies": 15, "window": 32, "memory": 128,
           "n_clusters": 4, "flag_rate": 0.02, "inliers_flagged": 0.01,
           "flag_precision": 0.5, "novelty_one": 0.25, "systems": systems,
           "settings": {"LOF": "novelty=True"}}
    contenders = [{"name": n, "params": {}, "us_per_record": [1.0, 1.1, 1.0, 1.2, 1.0],
                   "ratio": [r, r, r], "ratio_to_off": [q, q, q]}
                  for n, r, q in (("before", 1.0, 0.97), ("off", 1.03, 1.0),
                                  ("unset", 1.05, 1.02), ("alpha", 1.07, 1.04))]
    return {
        "meta": {"date": "2026-01-01 00:00 UTC", "load_start": "1.0", "load_end": "2.0",
                 "wall_s": 10.0, "cpu_s": 9.0, "streamkm": "0", "quick": True, "alpha": 0.01},
        "sets": [one],
        "cost": {"baseline_rev": "0" * 40, "repeats": 5, "steps": 3, "mode": "updating",
                 "configs": [{"k": 10, "b": 256, "d": 2, "contenders": contenders}]},
        "new_mode": {"n": 1000, "window": 100, "appears_at": 500, "reach": 64,
                     "reached_at_window": 5, "births_before_appearance": 0,
                     "first_birth_after_window": 6, "windows_to_birth": 1, "setting": "s",
                     "first_change_after_window": 7,
                     "windows": [{"start": 100 * (i + 1), "new_rows": 20 * (i >= 4),
                                  "new_flagged": 15 * (i >= 4), "old_flagged": 1,
                                  "old_rows": 100 - 20 * (i >= 4),
                                  "born": [{"event": "born", "cluster_id": 3}] if i == 6 else [],
                                  "changes": ([{"event": "split", "cluster": 1, "into": [1, 4]}]
                                              if i == 7 else []),
                                  "clusters": 3 + (i >= 6)} for i in range(9)]},
        "ari": [{"name": "blobs", "n": 1000, "window": 100, "n_clusters": 5,
                 "exclude": {"prequential": 0.9, "final": 0.95},
                 "learn": {"prequential": 0.8, "final": 0.85}}],
        "calibration": [{"name": "blobs", "n": 1000, "window": 100, "fixed": 0.011,
                         "drift": 0.03, "births": 0}],
    }


@pytest.mark.unit
def test_tables_state_the_floors_from_the_results():
    tables = _load("_novelty_tables")
    text = tables.render(_results())
    floors = text.split("### Floors")[1].split("###")[0]
    # streamkm 0.80 against IsolationForest 0.82 and HalfSpaceTrees 0.84 (not > 0.05 below)
    assert "**not met**: 0.800 against 0.840 (HalfSpaceTrees)" in floors
    assert "**met**: 0 of 1 sets" in floors
    # the cost floor compares the step with the step of the same engine without the score
    assert "**met**: 1.040x (1.040-1.040) at k=10, b=256, d=2" in floors
    assert "| 10 | 256 | 2 | alpha | 1.00 (1.00-1.20) | 1.070 (1.070-1.070) " \
           "| 1.040 (1.040-1.040) |" in text
    assert "**not met**: 1 of 2 runs" in floors  # drift run flagged 3% > 2 alpha
    assert "**met**: 1 windows after the flagged rows reached 64" in floors
    assert "| 6 | 700 | 20 | 15 | 1 of 80 | 4 | born (id 3) |" in text
    assert "| 7 | 800 | 20 | 15 | 1 of 80 | 4 | split 1 into [1, 4] |" in text
    assert "first split, merge or retirement after it: window 7." in text
    assert "| glass2 | 214 | 9 | 17 (7.9%) | 32 | 2.0% | 1.0% | 25% |" in text
    assert "| fewer than 500 rows | 1 | 25% | 0.800 | 0.810 |" in text


@pytest.mark.unit
def test_write_docs_replaces_only_the_block_between_the_markers(tmp_path):
    tables = _load("_novelty_tables")
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# B\n\nreading before\n\n<!-- novelty-tables -->\nold\n"
                   "<!-- /novelty-tables -->\n\nreading after\n")
    tables.write_docs(doc, "| new |")
    assert doc.read_text() == ("# B\n\nreading before\n\n<!-- novelty-tables -->\n| new |\n"
                               "<!-- /novelty-tables -->\n\nreading after\n")
    tables.write_docs(doc, "| newer |")
    assert doc.read_text().count("novelty-tables") == 2 and "| new |" not in doc.read_text()
    (tmp_path / "plain.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="novelty-tables"):
        tables.write_docs(tmp_path / "plain.md", "| x |")


@pytest.mark.integration
def test_the_engine_before_the_novelty_score_is_exported_from_git(tmp_path):
    cost = _load("_novelty_cost")
    rev = cost.baseline_revision()
    assert rev is not None and len(rev) == 40
    root = cost.export_package(rev, tmp_path)
    assert (root / "streamkm" / "__init__.py").is_file()
    assert not (root / "streamkm" / "cluster" / "_novelty.py").exists()
    assert not (root / "streamkm.tar").exists()


@pytest.mark.slow
def test_quick_run_scores_every_detector_and_writes_the_docs_tables(tmp_path, capsys):
    bench = _load("bench_novelty")
    out = tmp_path / "novelty.json"
    doc = tmp_path / "benchmarks.md"
    doc.write_text("reading\n\n<!-- novelty-tables -->\n<!-- /novelty-tables -->\n")
    assert bench.main(["--quick", "--json", str(out), "--docs", str(doc)]) == 0
    printed = capsys.readouterr().out
    # strict JSON: an undefined precision is null, not NaN
    results = json.loads(out.read_text(), parse_constant=lambda name: pytest.fail(name))
    assert len(results["sets"]) == 10
    for s in results["sets"]:
        assert s["scored"] == s["n"] - s["window"]
        assert set(s["systems"]) == {"streamkm", "streamkm distance", "IsolationForest",
                                     "LOF", "HalfSpaceTrees"}
        for r in s["systems"].values():
            assert 0.0 <= r["auc"] <= 1.0 and r["us_per_record"] > 0
        assert 0.0 <= s["flag_rate"] <= 1.0
    by_name = {s["name"]: s for s in results["sets"]}
    # uniform noise around well separated blobs: every detector ranks it first
    assert by_name["blobs+5%noise"]["systems"]["streamkm"]["auc"] > 0.9
    cost = results["cost"]
    assert [c["name"] for c in cost["configs"][0]["contenders"]] == [
        "before the novelty score", "novelty score switched off", "outlier_alpha unset",
        "outlier_alpha=0.01"]
    off = cost["configs"][0]["contenders"][1]
    assert off["ratio_to_off"] == [1.0, 1.0, 1.0]
    assert all(len(c["us_per_record"]) == 5 for c in cost["configs"][0]["contenders"])
    nm = results["new_mode"]
    assert sum(w["new_rows"] for w in nm["windows"]) == 400
    assert all(w["new_rows"] == 0 for w in nm["windows"] if w["start"] < nm["appears_at"])
    assert [r["name"] for r in results["ari"]] == ["blobs+5%noise", "moons+5%noise"]
    assert len(results["calibration"]) == 3
    assert printed.startswith("Run of ") and "### Floors" in printed
    assert doc.read_text().startswith("reading\n\n<!-- novelty-tables -->\nRun of ")
    # the saved run renders the same tables again
    assert bench.main(["--from-json", str(out)]) == 0
    assert capsys.readouterr().out == printed
