"""streamkm.river.KernelKMeans as River users use it: River's estimator checks, buffering,
learn_many / predict_many, pipelines, bad input."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest

river = pytest.importorskip("river")
pd = pytest.importorskip("pandas")

from river import checks, compose, preprocessing  # noqa: E402
from river.checks import common  # noqa: E402

from streamkm import MiniBatchKernelKMeans, ParameterError, ValidationError  # noqa: E402
from streamkm.river import KernelKMeans  # noqa: E402

pytestmark = pytest.mark.unit


def _stream(n=400, seed=0, d=4):
    rng = np.random.default_rng(seed)
    groups = rng.integers(3, size=n)
    centers = np.zeros((3, d))
    centers[1, 0] = centers[2, 1] = 8.0
    rows = centers[groups] + rng.normal(size=(n, d))
    return [({f"f{j}": float(v) for j, v in enumerate(row)}, int(g))
            for row, g in zip(rows, groups)]


UNIT_TEST_MODELS = [KernelKMeans(**params) for params in KernelKMeans._unit_test_params()]


@pytest.mark.parametrize("model", UNIT_TEST_MODELS, ids=repr)
def test_rivers_estimator_checks(model):
    checks.check_estimator(model)


#: River's dataset-driven checks; River yields no dataset for clusterers, so we give one.
DATASET_CHECKS = [
    common.check_learn_one, common.check_pickling, common.check_shuffle_features_no_impact,
    common.check_emerging_features, common.check_disappearing_features,
    common.check_radically_disappearing_features, common.check_predict_one_pure,
    common.check_predict_one_before_any_learn, common.check_no_state_aliasing_with_input,
    common.check_clone_is_independent, common.check_bounded_memory_growth,
]


@pytest.mark.parametrize("check", DATASET_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("model", UNIT_TEST_MODELS, ids=repr)
def test_rivers_dataset_checks_on_a_numeric_stream(model, check):
    check(model.clone(), dataset=_stream(200))


def test_rows_are_buffered_to_batch_size_and_predict_one_is_0_before_the_first_step():
    model = KernelKMeans(n_clusters=3, batch_size=50, seed=0)
    stream = _stream(120)
    for i, (x, _) in enumerate(stream[:49]):
        model.learn_one(x)
        assert model.predict_one(x) == 0 and model.n_steps == 0 and model.engine is None
    model.learn_one(stream[49][0])
    assert model.n_steps == 1 and model.features == ["f0", "f1", "f2", "f3"]
    for x, _ in stream[50:120]:
        model.learn_one(x)
    assert model.n_steps == 2
    assert model.engine.counts_.sum() == 100  # 20 rows still buffered


def test_clusters_are_recovered_in_a_river_pipeline():
    from sklearn.metrics import adjusted_rand_score

    stream = _stream(1200)
    pipe = preprocessing.StandardScaler() | KernelKMeans(n_clusters=3, batch_size=100, seed=0)
    for x, _ in stream:
        pipe.learn_one(x)
    predicted = [pipe.predict_one(x) for x, _ in stream]
    assert adjusted_rand_score([g for _, g in stream], predicted) > 0.95
    assert isinstance(pipe, compose.Pipeline)


def test_learn_many_is_learn_one_on_every_row_and_predict_many_is_predict_one():
    stream = _stream(300)
    one, many = KernelKMeans(n_clusters=3, batch_size=64, seed=2), None
    many = one.clone()
    for x, _ in stream:
        one.learn_one(x)
    frame = pd.DataFrame([x for x, _ in stream])
    for chunk in np.array_split(np.arange(len(frame)), 7):
        many.learn_many(frame.iloc[chunk])
    assert one.n_steps == many.n_steps == 4
    test = pd.DataFrame([x for x, _ in _stream(50, seed=9)], index=np.arange(100, 150))
    predicted = many.predict_many(test)
    assert list(predicted.index) == list(test.index)
    assert predicted.tolist() == [one.predict_one(x) for x in test.to_dict(orient="records")]
    assert KernelKMeans(n_clusters=3).predict_many(test).tolist() == [0] * 50


def test_missing_features_count_as_zero_and_new_ones_are_ignored():
    model = KernelKMeans(n_clusters=2, batch_size=4, kernel="linear", seed=0)
    for x in [{"a": 0.0, "b": 0.0}, {"a": 0.1}, {"a": 9.0, "b": 0.0}, {"a": 9.2, "b": 0.1}]:
        model.learn_one(x)
    assert model.features == ["a", "b"]
    assert model.predict_one({"a": 0.0}) == model.predict_one({"a": 0.0, "b": 0.0})
    assert model.predict_one({"a": 9.0, "zzz": 1e6}) == model.predict_one({"a": 9.0})
    assert model.predict_one({"a": 0.0}) != model.predict_one({"a": 9.0})


def test_bad_values_and_parameters_are_named():
    model = KernelKMeans(n_clusters=2, batch_size=4)
    with pytest.raises(ValidationError, match=r"feature 'a' must be a finite number, got 'x'"):
        model.learn_one({"a": "x"})
    with pytest.raises(ValidationError, match=r"feature 'b' must be a finite number, got nan"):
        model.learn_one({"a": 1.0, "b": float("nan")})
    with pytest.raises(ParameterError, match=r"'tau' parameter .* Got 0 instead"):
        KernelKMeans(tau=0)
    with pytest.raises(ParameterError, match=r"batch_size=4 must be >= n_clusters=8"):
        KernelKMeans(batch_size=4)


def test_the_engine_checkpoints_without_pickle(tmp_path):
    model = KernelKMeans(n_clusters=3, batch_size=50, seed=0)
    for x, _ in _stream(200):
        model.learn_one(x)
    model.engine.save(tmp_path / "engine.npz")
    restored = MiniBatchKernelKMeans.load(tmp_path / "engine.npz")
    rows = np.array([[x[f] for f in model.features] for x, _ in _stream(30, seed=5)])
    np.testing.assert_array_equal(restored.predict(rows), model.engine.predict(rows))


def test_clone_resets_the_learnt_state():
    model = KernelKMeans(n_clusters=2, batch_size=8, seed=0)
    for x, _ in itertools.islice(_stream(), 16):
        model.learn_one(copy.deepcopy(x))
    fresh = model.clone()
    assert fresh.n_steps == 0 and fresh.engine is None and model.n_steps == 2
    assert repr(fresh) == repr(model)


def test_score_one_is_high_for_an_unusual_row_and_follows_the_engines_novelty():
    model = KernelKMeans(n_clusters=2, batch_size=200, seed=0, outlier_alpha=0.01)
    assert model.score_one({"a": 0.0, "b": 0.0}) == 0.0  # no step yet
    rng = np.random.default_rng(0)
    for _ in range(4):
        for row in np.vstack([rng.normal(0, 1, (100, 2)), rng.normal(8, 1, (100, 2))]):
            model.learn_one({"a": float(row[0]), "b": float(row[1])})
    far, near = {"a": 40.0, "b": -40.0}, {"a": 0.1, "b": 0.0}
    assert model.score_one(far) > 0.99 and model.score_one(near) < 0.9
    engine = model.engine.score_samples(np.array([[0.1, 0.0]]))[0]
    assert model.score_one(near) == pytest.approx(1.0 - engine)
    assert model.n_steps == 4  # scoring learns nothing
