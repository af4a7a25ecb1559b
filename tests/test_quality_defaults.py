"""Quality out of the box: randomized SVD, the SVD sketch vs scikit-learn, the
early-stop rule, and ARI floors of the defaults. Sizes are bounded; longer ones are slow."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from streamkm import MiniBatchKernelKMeans
from streamkm._core.randomized_svd import randomized_svd
from streamkm.cluster._monitor import ConvergenceMonitor
from streamkm.sketch import ApproxSVD

# per test: the ARI floors of the defaults are slow, not unit (``-m unit`` stays fast)

_spec = importlib.util.spec_from_file_location(
    "_quality_data", Path(__file__).resolve().parents[1] / "benchmarks" / "_quality_data.py")
quality_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quality_data)


class _NoDense(sp.csr_matrix):
    """A CSR matrix that refuses to be densified."""

    def toarray(self, *args, **kwargs):  # pragma: no cover - must not be called
        raise AssertionError("sparse input was densified")

    todense = toarray

    def __array__(self, *args, **kwargs):  # pragma: no cover - must not be called
        raise AssertionError("sparse input was densified")


@pytest.mark.unit
def test_randomized_svd_matches_numpy_on_sparse_input_without_densifying():
    rng = np.random.default_rng(0)
    # sparse factors: an exactly rank-8 matrix with about 30% nonzeros
    u = np.where(rng.random((300, 8)) < 0.2, rng.normal(size=(300, 8)), 0.0)
    v = np.where(rng.random((200, 8)) < 0.2, rng.normal(size=(200, 8)), 0.0)
    dense = (u * np.array([50, 40, 30, 20, 10, 5, 3, 2])) @ v.T
    x = _NoDense(sp.csr_matrix(dense))
    s, vt = randomized_svd(x, 4, width=14, n_power_iter=4, rng=np.random.default_rng(1))
    _, s_ref, vt_ref = np.linalg.svd(dense, full_matrices=False)
    np.testing.assert_allclose(s, s_ref[:4], rtol=1e-8)
    np.testing.assert_allclose(np.abs(vt @ vt_ref[:4].T), np.eye(4), atol=1e-6)


@pytest.mark.unit
def test_power_iterations_sharpen_the_subspace():
    x, _ = quality_data.planted_topics(600, 6, 2000, seed=0)
    _, s_ref, _ = np.linalg.svd(x.toarray(), full_matrices=False)
    captured = []
    for n_iter in (0, 4):
        _, vt = randomized_svd(x, 6, width=12, n_power_iter=n_iter, rng=np.random.default_rng(0))
        captured.append(np.linalg.norm(x @ vt.T) ** 2)
    assert captured[1] > captured[0]
    assert captured[1] >= 0.99 * float((s_ref[:6] ** 2).sum())


@pytest.mark.unit
def test_approx_svd_sketch_clusters_sparse_text_like_truncated_svd():
    x, labels = quality_data.planted_topics(2000, 8, 4000, seed=3)
    r = 8
    scores = {}
    for name, reducer in (("ours", ApproxSVD(r, random_state=0)),
                          ("sklearn", TruncatedSVD(r, random_state=0))):
        features = reducer.fit_transform(x)
        model = MiniBatchKernelKMeans(8, kernel="linear", batch_size=500, n_init=3,
                                      random_state=0).fit(features)
        scores[name] = normalized_mutual_info_score(labels, model.predict(features))
    assert scores["ours"] >= 0.95 * scores["sklearn"], scores


@pytest.mark.unit
def test_monitor_converges_on_a_plateau_and_not_while_improving():
    monitor = ConvergenceMonitor(tol=1e-3, patience=10, wake_margin=0.1, smoothing=0.2)
    events = [monitor.observe(1.0 / (1 + 0.05 * i), 0.01) for i in range(40)]
    assert "converged" not in events  # the smoothed objective keeps making new minima
    plateau = [monitor.observe(0.3 + 1e-5 * ((-1) ** i), 0.001) for i in range(60)]
    assert "converged" in plateau


@pytest.mark.unit
def test_monitor_hysteresis_stops_flapping_on_a_drifting_stream():
    monitor = ConvergenceMonitor(tol=1e-3, patience=5, wake_margin=0.1, smoothing=0.5)
    level = 1.0
    flips = 0
    for i in range(2000):
        # drift: every 60 batches the objective jumps 30% above its plateau
        objective = level * (1.3 if monitor.converged and i % 60 < 5 else 1.0)
        flips += monitor.observe(objective, None if monitor.converged else 0.0) is not None
    woke = monitor.n_woke
    assert woke <= 8, woke  # without hysteresis it wakes every 60 batches (~33 times)
    restored = ConvergenceMonitor(1e-3, 5, 0.1, 0.5)
    restored.load_dict(monitor.to_dict())
    assert restored.to_dict() == monitor.to_dict()


@pytest.mark.slow
@pytest.mark.parametrize("make", ["moons", "circles"])
def test_heat_kernel_separates_non_convex_clusters(make):
    """The documented recipe for non-convex clusters: kernel="heat", other parameters default
    (rbf kernel k-means cannot: docs/kernels.md)."""
    from sklearn.datasets import make_circles, make_moons

    hits = 0
    for seed in range(3):
        if make == "moons":
            x, y = make_moons(4000, noise=0.05, random_state=seed)
        else:
            x, y = make_circles(2000, factor=0.5, noise=0.05, random_state=seed)
        model = MiniBatchKernelKMeans(2, kernel="heat", random_state=seed).fit(x)
        hits += adjusted_rand_score(y, model.predict(x)) >= 0.95
    assert hits >= 3


@pytest.mark.slow
def test_eigengap_gamma_is_no_worse_than_the_median_heuristic_on_blobs():
    from sklearn.datasets import make_blobs

    auto, median = [], []
    for seed in range(3):
        x, y = make_blobs(2000, centers=5, random_state=seed)
        for store, gamma in ((auto, "eigengap"), (median, "median")):
            model = MiniBatchKernelKMeans(5, gamma=gamma, random_state=seed).fit(x)
            store.append(adjusted_rand_score(y, model.predict(x)))
    assert np.median(auto) >= np.median(median) - 0.02, (auto, median)


@pytest.mark.unit
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
@pytest.mark.parametrize("rows", [[[1e-45], [0.0]], [[1e-45], [0.0], [3e-45], [0.0]],
                                  [[5e-324, 1.0], [0.0, 1.0]], [[1e-300], [0.0], [2e-300]]])
def test_width_and_distances_are_finite_for_subnormal_input(dtype, kernel, rows):
    """A width rule divides by a typical distance: rows that differ by subnormal amounts
    must still give a gamma that is finite in the data's dtype and finite distances."""
    x = np.array(rows, dtype=dtype)
    for gamma in ("auto", "median", "eigengap"):
        model = MiniBatchKernelKMeans(2, kernel=kernel, gamma=gamma, n_init=1,
                                      random_state=0).fit(x)
        assert np.isfinite(model.gamma_) and model.gamma_ > 0
        assert np.isfinite(np.asarray(model.gamma_, dtype=dtype))
        distances = model.transform(x)
        assert distances.dtype == dtype and np.all(np.isfinite(distances))
        assert np.all(distances >= 0)


@pytest.mark.unit
def test_auto_width_picks_a_graph_kernel_on_rings_and_keeps_it_in_the_state(tmp_path):
    """gamma="auto" (the default) decides once, on the initialisation sample: rings get a
    graph kernel (the median-width rbf cuts across them), and the choice survives save/load."""
    from sklearn.datasets import make_circles

    x, y = make_circles(1000, factor=0.5, noise=0.05, random_state=0)
    model = MiniBatchKernelKMeans(2, random_state=0).fit(x)
    assert model.kernel_.name in ("anchor", "level_set") and model.gamma_ is None
    assert adjusted_rand_score(y, model.labels_) >= 0.95
    model.save(tmp_path / "m.npz")
    loaded = MiniBatchKernelKMeans.load(tmp_path / "m.npz")
    assert loaded.kernel_.name == model.kernel_.name
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    rows = np.random.default_rng(1).normal(size=(64, 2)).astype(np.float32)
    assert MiniBatchKernelKMeans(2, random_state=0).fit(x.astype(np.float32)).transform(
        rows).dtype == np.float32


@pytest.mark.unit
@pytest.mark.filterwarnings("error")
def test_defaults_on_moons_survive_outliers_and_repeated_rows():
    """Far-away rows (in the data, in predict, in partial_fit) and rows repeated more often
    than the graph has neighbours must leave every graph kernel's features finite (the
    density-weighted heat kernel had a degree of 0, so 0 / 0 features)."""
    from sklearn.datasets import make_moons

    x, y = make_moons(1500, noise=0.06, random_state=0)
    far = np.array([[1e3, 1e3], [-1e6, 1e6], [30.0, 0.0]])
    model = MiniBatchKernelKMeans(2, random_state=0).fit(np.vstack([x, far]))
    assert model.kernel_.name != "rbf"
    assert adjusted_rand_score(y, model.labels_[:1500]) >= 0.95
    assert np.all(np.isfinite(model.transform(far * 7)))
    before = model.predict(x)
    for _ in range(3):
        model.partial_fit(np.vstack([x[:100], far * 7]))
    assert np.mean(model.predict(x) == before) >= 0.99
    repeated = np.vstack([np.repeat(x[:40], 60, axis=0), x])
    model = MiniBatchKernelKMeans(2, random_state=0).fit(repeated)
    assert np.all(np.isfinite(model.transform(repeated)))
    assert adjusted_rand_score(y, model.predict(x)) >= 0.9


@pytest.mark.unit
@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_heat_kernel_on_float32_rows_of_extreme_scale(scale):
    """Squared distances of float32 values overflow above ~1e19 and vanish below ~1e-23: a
    float32 heat model's graph (built in float32) had every radius infinite or 0, every row
    joined to every landmark, and clustered nothing (ARI 0). The graph is built in float64;
    the model stays float32."""
    from sklearn.datasets import make_moons

    x, y = make_moons(1500, noise=0.06, random_state=0)
    rows = (x * scale).astype(np.float32)
    model = MiniBatchKernelKMeans(2, kernel="heat", random_state=0).fit(rows)
    assert adjusted_rand_score(y, model.labels_) >= 0.95
    new = (make_moons(300, noise=0.06, random_state=1)[0] * scale).astype(np.float32)
    assert model.transform(new).dtype == np.float32
    assert np.all(np.isfinite(model.transform(new)))
    # a model of the same rows in float64 places new rows the same way
    wide = MiniBatchKernelKMeans(2, kernel="heat", random_state=0).fit(rows.astype(np.float64))
    assert adjusted_rand_score(wide.predict(new.astype(np.float64)), model.predict(new)) >= 0.95


@pytest.mark.unit
def test_density_bandwidth_ignores_zero_radii():
    from streamkm.kernels.heat import density_bandwidth

    assert density_bandwidth(np.array([0.0, 0.0, 0.0, 1.0, 3.0])) == 2.0
    assert density_bandwidth(np.zeros(4)) == 1.0


@pytest.mark.unit
def test_auto_on_blobs_is_as_good_as_the_median_width_with_or_without_drift_handling():
    """Convex clusters: whatever kernel "auto" takes there is as good as the median-width
    rbf. Drift handling and raw rows for re-sketching do not change the choice (a graph
    kernel follows the stream by refits)."""
    from sklearn.datasets import make_blobs

    x, y = make_blobs(1000, centers=4, random_state=0)
    model = MiniBatchKernelKMeans(4, random_state=0).fit(x)
    median = MiniBatchKernelKMeans(4, gamma="median", random_state=0).fit(x)
    assert model.kernel_.name == model.auto_decision_["chosen"]
    assert median.kernel_.name == "rbf"
    assert adjusted_rand_score(y, model.labels_) >= adjusted_rand_score(y, median.labels_) - 0.01
    streamed = MiniBatchKernelKMeans(4, random_state=0).partial_fit(x)
    drifting = MiniBatchKernelKMeans(4, drift=True, random_state=0).partial_fit(x)
    sketched = MiniBatchKernelKMeans(4, random_state=0)
    sketched.step(x, raw=x)
    assert streamed.kernel_.name == drifting.kernel_.name == sketched.kernel_.name
    before = sketched.predict(x)
    sketched.resketch(lambda raw: np.asarray(raw) * 2.0)  # refits the graph in the new space
    assert adjusted_rand_score(before, sketched.predict(x * 2.0)) >= 0.99


@pytest.mark.unit
def test_checkpoint_with_a_numeric_gamma_still_loads(tmp_path):
    """States written before gamma="auto" could choose a kernel hold gamma as a number."""
    from streamkm._core.state_io import read_npz, write_npz_atomic

    x = np.random.default_rng(0).normal(size=(300, 3))
    model = MiniBatchKernelKMeans(3, gamma=0.7, random_state=0).fit(x)
    arrays, meta = model.get_state()
    meta["params"]["gamma"] = 0.7
    write_npz_atomic(tmp_path / "old.npz", arrays, meta)
    loaded = MiniBatchKernelKMeans.load(tmp_path / "old.npz")
    assert loaded.kernel_.name == "rbf" and loaded.gamma_ == 0.7
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    assert read_npz(tmp_path / "old.npz")[1]["kernel_spec"]["gamma"] == 0.7


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_defaults_separate_moons_and_rings(seed):
    """Defaults only (gamma="auto", default n_init) on moons and rings from clean to noisy
    (the 10-seed grid is in docs/benchmarks.md; the noisiest rings, factor 0.6 with noise
    0.08, take the level-set kernel: tests/test_level_set_kernel.py)."""
    from sklearn.datasets import make_circles, make_moons

    for x, y in (make_moons(2000, noise=0.05, random_state=seed),
                 make_moons(3000, noise=0.1, random_state=seed),
                 make_circles(3000, factor=0.5, noise=0.08, random_state=seed),
                 make_circles(2000, factor=0.6, noise=0.05, random_state=seed)):
        model = MiniBatchKernelKMeans(2, random_state=seed).fit(x)
        assert model.kernel_.name != "rbf"
        assert adjusted_rand_score(y, model.labels_) >= 0.95
