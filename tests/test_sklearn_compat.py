"""streamkm's estimators as scikit-learn users use them: the estimator checks, pipelines,
grid search, clone, DataFrames, set_params between partial_fit calls, pickling."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from streamkm import MiniBatchKernelKMeans, NotFittedError, ParameterError, StreamkmError
from streamkm.batch import KernelKMeans, KMeans, SpectralClustering, WardAgglomerative
from streamkm.sketch import (
    ApproxSVD,
    LeverageScoreSelector,
    RandomProjection,
    SketchedKernelKMeans,
)

pytestmark = pytest.mark.unit


def _fast_engine(**params):
    base = dict(batch_size=32, n_init=1, max_iter=20, n_warmup=10, random_state=0)
    return MiniBatchKernelKMeans(3, **{**base, **params})


#: Every public clusterer, with parameters that keep the checks fast.
CLUSTERERS = [
    _fast_engine(),
    _fast_engine(kernel="linear", n_init=3),  # one linear start can end in a local optimum
    KMeans(3, random_state=0),
    KernelKMeans(3, n_init=3, random_state=0),
    SpectralClustering(3, random_state=0),
    SpectralClustering(3, mode="laplacian", random_state=0),
    WardAgglomerative(3),
    SketchedKernelKMeans(RandomProjection(n_components=2, random_state=0), _fast_engine(),
                         random_state=0),
]
#: The sketchers (transformers; dense or sparse input).
SKETCHERS = [
    RandomProjection(n_components=2, random_state=0),
    RandomProjection(kind="sparse", n_clusters=2, random_state=0),
    ApproxSVD(1, random_state=0),
    LeverageScoreSelector(n_components=2, n_clusters=1, random_state=0),
]
PUBLIC_ESTIMATORS = CLUSTERERS + SKETCHERS


def _expected_failed_checks(estimator):
    return getattr(estimator, "_expected_failed_checks", lambda: {})()


@parametrize_with_checks(PUBLIC_ESTIMATORS, expected_failed_checks=_expected_failed_checks)
def test_scikit_learn_estimator_checks(estimator, check):
    name = getattr(check, "func", check).__name__
    if name == "check_array_api_input" and not os.environ.get("SCIPY_ARRAY_API"):
        # scikit-learn runs this check only under SCIPY_ARRAY_API=1 (set before scipy is
        # imported); streamkm computes in numpy and claims no other array namespace, and
        # numpy input is what every other check here feeds the estimator
        assert not estimator.__sklearn_tags__().array_api_support
        return
    check(estimator)


def _labelled_blobs(n=300, seed=0, spread=0.5):
    rng = np.random.default_rng(seed)
    means = np.array([[0.0, 0.0, 0.0], [5.0, 0.0, 0.0], [0.0, 5.0, 0.0]])
    y = rng.integers(3, size=n)
    x = means[y] + rng.normal(scale=spread, size=(n, 3))
    # features on very different scales: a scaler in front matters
    return x * np.array([1.0, 100.0, 0.01]), y


def test_pipeline_with_a_scaler_predicts_transforms_and_scores():
    x, y = _labelled_blobs()
    pipe = make_pipeline(StandardScaler(), MiniBatchKernelKMeans(3, random_state=0))
    labels = pipe.fit_predict(x)
    assert adjusted_rand_score(y, labels) > 0.95
    np.testing.assert_array_equal(pipe.predict(x), labels)
    distances = pipe.transform(x)
    assert distances.shape == (len(x), 3)
    np.testing.assert_array_equal(np.argmin(distances, axis=1), labels)
    score = pipe.score(x)
    assert np.isfinite(score) and score < 0
    assert score == pytest.approx(-distances.min(axis=1).mean())


def test_grid_search_finds_the_true_number_of_clusters_and_a_working_gamma():
    x, y = _labelled_blobs(n=360, spread=0.3)
    search = GridSearchCV(
        make_pipeline(StandardScaler(), MiniBatchKernelKMeans(random_state=0, n_init=2)),
        {"minibatchkernelkmeans__n_clusters": [2, 3, 4],
         "minibatchkernelkmeans__gamma": [0.5, 1000.0]},
        scoring="adjusted_rand_score", cv=KFold(3, shuffle=True, random_state=0),
    )
    search.fit(x, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.isfinite(scores).all()
    # gamma=1000 on standardised data makes the rbf kernel matrix nearly the identity
    # (every point alone, labels arbitrary): k=3 with the sensible gamma is the right
    # answer on three separated blobs
    assert max(scores[np.asarray(search.cv_results_["param_minibatchkernelkmeans__gamma"])
                      == 1000.0]) < 0.2
    assert search.best_params_ == {"minibatchkernelkmeans__n_clusters": 3,
                                   "minibatchkernelkmeans__gamma": 0.5}
    assert search.best_score_ > 0.95


def test_grid_search_on_the_models_own_score_is_finite():
    x, _ = _labelled_blobs()
    search = GridSearchCV(MiniBatchKernelKMeans(3, kernel="linear", random_state=0),
                          {"tau": [50, 200]}, cv=3).fit(StandardScaler().fit_transform(x))
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def _fitted_output(estimator, x):
    return estimator.labels_ if hasattr(estimator, "labels_") else estimator.transform(x)


@pytest.mark.parametrize("estimator", PUBLIC_ESTIMATORS, ids=lambda e: type(e).__name__)
def test_clone_gives_an_unfitted_copy_with_the_same_parameters(estimator):
    x, _ = _labelled_blobs(n=90)
    fitted = clone(estimator).fit(x)
    copy = clone(fitted)
    assert repr(copy.get_params()) == repr(fitted.get_params())
    assert not hasattr(copy, "labels_") and not hasattr(copy, "n_features_in_")
    np.testing.assert_array_equal(_fitted_output(copy.fit(x), x), _fitted_output(fitted, x))


@pytest.mark.parametrize("estimator", PUBLIC_ESTIMATORS, ids=lambda e: type(e).__name__)
def test_pickle_of_a_fitted_estimator_round_trips(estimator):
    x, _ = _labelled_blobs(n=90)
    fitted = clone(estimator).fit(x)
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(_fitted_output(restored, x), _fitted_output(fitted, x))
    if hasattr(fitted, "predict"):
        np.testing.assert_array_equal(restored.predict(x), fitted.predict(x))


def test_fit_predict_is_labels_of_fit_for_every_clusterer():
    x, y = _labelled_blobs(n=120)
    x = StandardScaler().fit_transform(x)
    # standardised, the noise feature varies as much as the two that carry the clusters:
    # the sketched pipeline keeps all three dimensions here (a 2-D sketch loses a cluster)
    sketched = SketchedKernelKMeans(ApproxSVD(3, random_state=0),
                                    MiniBatchKernelKMeans(3, random_state=0), random_state=0)
    for estimator in CLUSTERERS[:-1] + [sketched]:
        labels = clone(estimator).fit_predict(x)
        assert labels.shape == (len(x),) and labels.dtype == np.int64
        assert adjusted_rand_score(y, labels) > 0.9, type(estimator).__name__


def test_dataframe_feature_names_are_recorded_and_checked():
    pd = pytest.importorskip("pandas")
    x, _ = _labelled_blobs(n=120)
    frame = pd.DataFrame(x, columns=["a", "b", "c"])
    model = MiniBatchKernelKMeans(3, random_state=0).fit(frame)
    assert list(model.feature_names_in_) == ["a", "b", "c"]
    np.testing.assert_array_equal(model.predict(frame), model.labels_)
    renamed = frame.rename(columns={"c": "z"})
    with pytest.raises(ValueError, match="feature names should match") as info:
        model.predict(renamed)
    assert isinstance(info.value, StreamkmError)
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        model.predict(x)
    out = model.set_output(transform="pandas").transform(frame)
    assert list(out.columns) == [f"minibatchkernelkmeans{j}" for j in range(3)]
    assert list(out.index) == list(frame.index)


def test_feature_names_survive_save_and_load(tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(_labelled_blobs(n=120)[0], columns=["a", "b", "c"])
    model = MiniBatchKernelKMeans(3, random_state=0).partial_fit(frame)
    model.save(tmp_path / "m.npz")
    restored = MiniBatchKernelKMeans.load(tmp_path / "m.npz")
    assert list(restored.feature_names_in_) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="feature names should match"):
        restored.predict(frame.rename(columns={"a": "x"}))


def test_transform_inside_a_column_transformer():
    pd = pytest.importorskip("pandas")
    x, _ = _labelled_blobs(n=150)
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(tag=np.arange(150) % 2)
    ct = ColumnTransformer([
        ("clusters", make_pipeline(StandardScaler(), MiniBatchKernelKMeans(3, random_state=0)),
         ["a", "b", "c"]),
        ("keep", "passthrough", ["tag"]),
    ])
    out = ct.fit_transform(frame)
    assert out.shape == (150, 4)
    assert list(ct.get_feature_names_out()) == [
        "clusters__minibatchkernelkmeans0", "clusters__minibatchkernelkmeans1",
        "clusters__minibatchkernelkmeans2", "keep__tag"]
    assert np.all(out[:, :3] >= 0)


def test_set_params_between_partial_fit_calls():
    x, _ = _labelled_blobs(n=400)
    x = StandardScaler().fit_transform(x)
    model = MiniBatchKernelKMeans(3, random_state=0)
    model.partial_fit(x[:100])
    # allowed: takes effect at the next step, or only matters at the next start
    model.set_params(learning_rate="count", batch_size=64, n_init=5, random_state=9)
    model.partial_fit(x[100:200])
    assert model.n_steps_ == 2 and model.labels_.shape == (100,)
    for name, value in [("n_clusters", 4), ("kernel", "laplacian"), ("gamma", 3.0),
                        ("tau", 10), ("drift", True)]:
        old = getattr(model, name)
        model.set_params(**{name: value})
        with pytest.raises(ParameterError, match=rf"{name} was changed from {old!r} to "
                                                 rf"{value!r} after fitting"):
            model.partial_fit(x[200:300])
        model.set_params(**{name: old})
    assert model.n_steps_ == 2
    model.partial_fit(x[200:300])
    assert model.n_steps_ == 3
    # fit starts over, with the new value
    model.set_params(n_clusters=4).fit(x)
    assert model.n_clusters_ == 4


def test_labels_and_inertia_describe_the_latest_batch_or_fit():
    x, _ = _labelled_blobs(n=300)
    x = StandardScaler().fit_transform(x)
    model = MiniBatchKernelKMeans(3, random_state=0).fit(x)
    assert model.n_iter_ >= 1
    np.testing.assert_array_equal(model.labels_, model.predict(x))
    assert model.inertia_ == pytest.approx(-model.score(x) * len(x), rel=1e-9)
    stream = MiniBatchKernelKMeans(3, random_state=0).partial_fit(x[:150])
    report_labels = stream.labels_
    assert report_labels.shape == (150,)
    stream.partial_fit(x[150:200], sample_weight=np.full(50, 2))
    assert stream.labels_.shape == (50,)
    assert stream.inertia_ > 0


def test_not_fitted_error_is_scikit_learns_and_ours():
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError
    from sklearn.utils.validation import check_is_fitted

    for estimator in PUBLIC_ESTIMATORS:
        with pytest.raises(SklearnNotFittedError):
            check_is_fitted(estimator)
    with pytest.raises(NotFittedError) as info:
        MiniBatchKernelKMeans(3).predict([[0.0, 1.0]])
    assert isinstance(info.value, SklearnNotFittedError)


def test_bad_parameters_are_named_by_every_estimator():
    x, _ = _labelled_blobs(n=60)
    for estimator in CLUSTERERS[:-1]:
        bad = clone(estimator).set_params(n_clusters=0)
        with pytest.raises(ParameterError, match=r"'n_clusters' parameter .* Got 0 instead"):
            bad.fit(x)
    with pytest.raises(ParameterError, match=r"'gamma' parameter .* Got 'widest' instead"):
        MiniBatchKernelKMeans(3, gamma="widest").fit(x)
    with pytest.raises(ParameterError, match="'taux'"):
        KMeans().set_params(taux=1)


def test_gamma_auto_is_the_median_heuristic():
    x, _ = _labelled_blobs(n=120)
    auto = MiniBatchKernelKMeans(3, gamma="auto", random_state=0).fit(x)
    default = MiniBatchKernelKMeans(3, random_state=0).fit(x)
    assert auto.gamma_ == default.gamma_ > 0
    assert KernelKMeans(3, gamma="auto", random_state=0).fit(x).gamma_ > 0


def test_from_params_validates_a_configuration_dict():
    model = MiniBatchKernelKMeans.from_params({"n_clusters": 4, "kernel": "laplacian"})
    assert model.n_clusters == 4 and model.kernel == "laplacian"
    with pytest.raises(ParameterError, match=r"unknown parameter\(s\) \['taux'\]"):
        MiniBatchKernelKMeans.from_params({"n_clusters": 4, "taux": 3})
    with pytest.raises(ParameterError, match=r"'tau' parameter .* Got -1 instead"):
        MiniBatchKernelKMeans.from_params({"tau": -1})
    with pytest.raises(ParameterError, match="k_min"):
        MiniBatchKernelKMeans.from_params({"n_clusters": 2, "drift": {"k_min": 5}})
