"""gamma="auto"'s decision: the pure rule on score tables, branch by branch, and the
decision as the fitted model keeps and reports it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_moons

from streamkm import MiniBatchKernelKMeans
from streamkm.exceptions import StateError
from streamkm.kernels._auto import decision_rows, normalized_cut
from streamkm.kernels._decision import AutoDecision, decide, not_considered

pytestmark = pytest.mark.unit


def test_lowest_score_wins_when_it_beats_the_reference_by_more_than_the_tolerance():
    d = decide({"rbf": 0.30, "heat": 0.01, "anchor": 0.05, "level_set": None}, "rbf", 1e-4)
    assert d.chosen == "heat"
    assert d.candidates == ("rbf", "heat", "anchor", "level_set")
    assert d.scores == {"rbf": 0.30, "heat": 0.01, "anchor": 0.05, "level_set": None}
    assert "heat scores lowest" in d.reason


def test_reference_kept_when_it_scores_lowest():
    d = decide({"rbf": 0.10, "heat": 0.20, "anchor": 0.15}, "rbf", 1e-4)
    assert d.chosen == "rbf" and "no candidate scores below rbf" in d.reason


def test_reference_kept_within_the_tolerance():
    assert decide({"rbf": 0.1000, "anchor": 0.09995}, "rbf", 1e-4).chosen == "rbf"
    assert decide({"rbf": 0.1000, "anchor": 0.0998}, "rbf", 1e-4).chosen == "anchor"


def test_equal_scores_among_others_go_to_the_first_listed():
    d = decide({"rbf": 0.5, "heat": 0.0, "anchor": 0.0, "level_set": 0.0}, "rbf", 1e-4)
    assert d.chosen == "heat"


def test_unscored_candidates_are_never_chosen():
    d = decide({"rbf": 0.5, "heat": float("nan"), "anchor": None, "level_set": 0.4}, "rbf")
    assert d.chosen == "level_set"
    assert d.scores["heat"] is None and d.scores["anchor"] is None


def test_nothing_scored_keeps_the_reference():
    d = decide({"rbf": None, "heat": None}, "rbf")
    assert d.chosen == "rbf" and "no candidate could be scored" in d.reason


def test_unscored_reference_loses_to_any_scored_candidate():
    d = decide({"rbf": None, "anchor": 0.7, "heat": 0.9}, "rbf")
    assert d.chosen == "anchor" and "could not be scored" in d.reason


def test_reference_is_listed_first_whatever_the_table_order():
    assert decide({"heat": 0.2, "rbf": 0.1}, "rbf").candidates == ("rbf", "heat")


@pytest.mark.parametrize("bad", [-1e-3, math.inf, math.nan])
def test_bad_tolerance_is_refused(bad):
    with pytest.raises(ValueError, match="tolerance"):
        decide({"rbf": 0.1}, "rbf", bad)


def test_reference_must_be_a_candidate():
    with pytest.raises(ValueError, match="'laplacian' is not a candidate"):
        decide({"rbf": 0.1}, "laplacian")


def test_decision_round_trips_through_json_unchanged():
    d = decide({"rbf": 0.1 + 0.2, "heat": 1 / 3, "anchor": None}, "rbf", 1 / 7919)
    back = AutoDecision.from_dict(json.loads(json.dumps(d.to_dict())))
    assert back == d and back.to_dict() == d.to_dict()
    assert not_considered("rbf", "why").to_dict()["scores"] == {"rbf": None}


def test_malformed_decision_is_a_state_error():
    with pytest.raises(StateError, match="auto_decision"):
        AutoDecision.from_dict({"candidates": ["rbf"], "scores": {}, "chosen": "heat",
                                "reason": "x"})
    with pytest.raises(StateError, match="malformed"):
        AutoDecision.from_dict({"candidates": ["rbf"]})


def test_normalized_cut_of_a_two_piece_graph():
    import scipy.sparse as sp

    a = sp.csr_matrix(np.kron(np.eye(2), np.ones((3, 3))))
    assert normalized_cut(a, np.array([0, 0, 0, 1, 1, 1]), 2) == 0.0
    # row 2 moved: its 2 edges to rows 0 and 1 are cut, of volumes 6 and 12 (self loops)
    assert normalized_cut(a, np.array([0, 0, 1, 1, 1, 1]), 2) == pytest.approx(
        2 / 6 + 2 / 12)


def test_decision_rows_do_not_depend_on_the_order_of_the_sample():
    x = np.random.default_rng(0).normal(size=(3000, 3))
    perm = np.random.default_rng(1).permutation(3000)
    np.testing.assert_array_equal(decision_rows(x), decision_rows(x[perm]))
    assert decision_rows(x).shape == (1000, 3)


def test_the_choice_does_not_depend_on_the_order_rows_arrive_in():
    x, _ = make_moons(1500, noise=0.06, random_state=0)
    chosen = set()
    for order in range(3):
        perm = np.random.default_rng(order).permutation(x.shape[0])
        model = MiniBatchKernelKMeans(2, n_init=1, random_state=0)
        model.partial_fit(x[perm])
        chosen.add(json.dumps(model.auto_decision_, sort_keys=True))
    assert len(chosen) == 1


def test_fitted_model_keeps_the_decision_reports_it_and_restores_it(tmp_path):
    x, y = make_moons(1500, noise=0.06, random_state=0)
    model = MiniBatchKernelKMeans(2, n_init=1, random_state=0)
    report = model.step(x)
    decision = model.auto_decision_
    assert decision["chosen"] == model.kernel_.name != "rbf"
    assert decision["candidates"][0] == "rbf"
    assert set(decision["scores"]) == set(decision["candidates"])
    assert decision["scores"][decision["chosen"]] < decision["scores"]["rbf"]
    # 2 k / n: one of the 1000 decision rows moved, on each of the two graphs
    assert decision["tolerance"] == 2 * 2 / 1000
    events = [e for e in report.events if e["event"] == "kernel_chosen"]
    assert len(events) == 1 and events[0]["step"] == 1
    assert events[0]["kernel"] == decision["chosen"]
    assert {k: events[0][k] for k in decision} == decision
    json.dumps(events[0])  # the event is plain JSON
    later = model.step(x[:200])
    assert not any(e["event"] == "kernel_chosen" for e in later.events)
    model.save(tmp_path / "m.npz")
    loaded = MiniBatchKernelKMeans.load(tmp_path / "m.npz")
    assert json.dumps(loaded.auto_decision_) == json.dumps(decision)
    assert loaded.get_state()[1]["auto_decision"] == model.get_state()[1]["auto_decision"]


def test_without_a_decision_the_state_says_none_and_drift_handling_decides_as_well():
    x, _ = make_blobs(800, centers=3, random_state=0)
    fixed = MiniBatchKernelKMeans(3, gamma="median", n_init=1, random_state=0).fit(x)
    assert fixed.auto_decision_ is None
    drifting = MiniBatchKernelKMeans(3, drift=True, n_init=1, random_state=0).fit(x)
    # graph kernels follow a drifting stream by refits, so every candidate is scored
    assert drifting.auto_decision_["chosen"] == drifting.kernel_.name
    assert set(drifting.auto_decision_["scores"]) == set(drifting.auto_decision_["candidates"])
    assert len(drifting.auto_decision_["candidates"]) > 1


def test_knn_graphs_against_numpy():
    from streamkm.kernels._auto import knn_graphs, mutual_knn_graph

    x = np.random.default_rng(3).normal(size=(60, 2)) * np.where(
        np.arange(60) < 30, 1.0, 5.0)[:, None]  # a dense and a sparse half
    dist = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    r2 = np.sort(dist, axis=1)[:, 5]  # the 5th other row (index 0 is the row itself)
    within = dist <= r2[:, None]
    off = ~np.eye(60, dtype=bool)
    expected_mutual = (within & within.T) & off
    expected_symmetric = (within | within.T) & off
    mutual, symmetric = knn_graphs(x, 5)
    np.testing.assert_array_equal(mutual.toarray(), expected_mutual.astype(float))
    np.testing.assert_array_equal(symmetric.toarray(), expected_symmetric.astype(float))
    np.testing.assert_array_equal(mutual_knn_graph(x, 5).toarray(), mutual.toarray())
    # the symmetric graph joins more sparse rows to the dense half than the mutual one
    assert expected_symmetric[30:, :30].sum() > expected_mutual[30:, :30].sum()


def test_graph_cut_sums_the_normalized_cut_of_each_graph():
    import scipy.sparse as sp

    from streamkm.kernels._auto import graph_cut

    blocks = sp.csr_matrix(np.kron(np.eye(2), np.ones((3, 3))) - np.eye(6))
    chain = sp.csr_matrix(np.eye(6, k=1) + np.eye(6, k=-1))
    labels = np.array([0, 0, 0, 1, 1, 1])
    # blocks: no edge cut; chain: the edge 2-3 cut, each side of volume 5
    assert graph_cut((blocks, chain), labels, 2) == pytest.approx(0.0 + 1 / 5 + 1 / 5)
    assert graph_cut((blocks,), labels, 2) == normalized_cut(blocks, labels, 2) == 0.0


def test_cutting_off_isolated_rows_costs_nothing_on_the_mutual_graph_only():
    """Why the score adds the symmetric graph's cut: a far, sparse handful of rows has no
    mutual edge, so a partition that only cuts them off is free on the mutual graph."""
    from streamkm.kernels._auto import knn_graphs

    rng = np.random.default_rng(0)
    core = rng.normal(size=(300, 2))
    outliers = rng.normal(size=(5, 2)) * 30 + 60  # sparser than any 20-nn radius of the core
    x = np.vstack([core, outliers])
    mutual, symmetric = knn_graphs(x, 20)
    labels = np.r_[np.zeros(300, int), np.ones(5, int)]
    assert normalized_cut(mutual, labels, 2) == 0.0
    assert normalized_cut(symmetric, labels, 2) > 0.5


def test_the_heat_kernel_can_be_compared_on_request_and_unknown_candidates_are_refused():
    from streamkm.kernels import get_kernel_type
    from streamkm.kernels._auto import auto_kernel_decision

    x, _ = make_moons(1200, noise=0.06, random_state=0)
    rbf = get_kernel_type("rbf")
    spec, decision = auto_kernel_decision(rbf, 1.0, x, 2, allow_graph=True,
                                          candidates=("heat", "anchor", "level_set"))
    assert decision.candidates == ("rbf", "heat", "anchor", "level_set")
    assert decision.scores["heat"] is not None and spec.name == decision.chosen != "rbf"
    default_spec, default = auto_kernel_decision(rbf, 1.0, x, 2, allow_graph=True)
    assert default.candidates == ("rbf", "linear", "anchor", "level_set")
    assert default.scores["rbf"] == decision.scores["rbf"]  # the same starts for every set
    with pytest.raises(ValueError, match="'cosine'"):
        auto_kernel_decision(rbf, 1.0, x, 2, allow_graph=True, candidates=("cosine",))
    few, why = auto_kernel_decision(rbf, 1.0, x[:300], 2, allow_graph=True)
    assert few.name == "rbf" and why.scores == {"rbf": None} and "300 distinct rows" in why.reason


def test_the_linear_kernel_competes_and_wins_ties_among_the_others():
    """Two far blobs with an rbf width far too narrow for them: the narrow rbf cuts both
    graphs at random, plain k-means, the anchor and the level-set kernels find the blobs
    (no edge cut); the linear kernel is listed first among the others and wins the tie."""
    from streamkm.kernels import get_kernel_type
    from streamkm.kernels._auto import auto_kernel_decision

    x, y = make_blobs(800, centers=[[-5.0, 0.0], [5.0, 0.0]], random_state=0)
    spec, decision = auto_kernel_decision(get_kernel_type("rbf"), 1e4, x, 2,
                                          allow_graph=True)
    assert decision.candidates == ("rbf", "linear", "anchor", "level_set")
    assert decision.scores["linear"] == 0.0 < decision.scores["rbf"] - decision.tolerance
    assert spec.name == decision.chosen == "linear"
    labels = np.argmin(((x[:, None, :] - np.array([[-5.0, 0.0], [5.0, 0.0]])) ** 2).sum(-1), 1)
    assert (labels == y).all()  # the blobs are apart: a partition that cuts nothing exists
