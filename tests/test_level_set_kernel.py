"""The density level-set kernel (``kernel="level_set"``, and ``gamma="auto"``'s step 5):
the pieces it finds, its features for new rows, state, validation, and where auto takes it
(noisy rings no kernel width separates) and where it does not (convex clusters)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_circles
from sklearn.metrics import adjusted_rand_score

from streamkm import MiniBatchKernelKMeans
from streamkm._core.state_io import read_npz, write_npz_atomic
from streamkm.batch import KernelKMeans
from streamkm.exceptions import NoLevelSetError, ParameterError, StateError, StreamkmError
from streamkm.kernels import KernelSpec
from streamkm.kernels.level_set import density_radii, density_scores


def _noisy_rings(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    return make_circles(n, factor=0.6, noise=0.08, random_state=seed)


@pytest.mark.unit
def test_density_radii_scores_and_neighbours_match_numpy():
    rows = np.random.default_rng(0).normal(size=(300, 3))
    r2, neighbors = density_radii(rows, 7, 4)
    d2 = ((rows[:, None, :] - rows[None, :, :]) ** 2).sum(axis=2)
    order = np.argsort(d2, axis=1, kind="stable")
    expected_r2 = np.take_along_axis(d2, order[:, 7:8], axis=1)[:, 0]
    np.testing.assert_allclose(r2, expected_r2)
    np.testing.assert_array_equal(neighbors, order[:, 1:8])
    around = expected_r2[order[:, 1:8]].mean(axis=1)
    for relative in (0.0, 0.5, 1.0):
        np.testing.assert_allclose(density_scores(r2, neighbors, 7, relative),
                                   expected_r2 / around**relative)


@pytest.mark.unit
def test_level_set_kernel_finds_the_rings_no_width_separates():
    x, y = _noisy_rings(3000, 0)
    spec = KernelSpec("level_set").fit(x, 2)
    features = spec.prepare(x)
    # each row's weight on each piece: in [0, 1], summing to 1
    assert features.shape == (3000, 2)
    assert features.min() >= 0.0 and features.max() <= 1.0 + 1e-12
    np.testing.assert_allclose(features.sum(axis=1), 1.0)
    assert adjusted_rand_score(y, features.argmax(axis=1)) >= 0.95
    # the pieces leave out the least dense rows only (the valley between the rings)
    assert 0.75 <= spec.fitted.keep <= 0.95
    model = MiniBatchKernelKMeans(2, kernel="level_set", random_state=0).fit(x)
    assert adjusted_rand_score(y, model.labels_) >= 0.95
    # new rows from the same rings go to their ring
    x_new, y_new = _noisy_rings(2000, 7)
    assert adjusted_rand_score(y_new, model.predict(x_new)) >= 0.95
    # exact kernel k-means with the same kernel agrees
    exact = KernelKMeans(2, kernel="level_set", random_state=0).fit(x)
    assert adjusted_rand_score(model.labels_, exact.labels_) >= 0.99


@pytest.mark.unit
def test_a_sparse_ring_is_kept_whole_beside_a_dense_one():
    # the inner ring is 3x denser: ranked by density alone, the outer one falls apart into
    # arcs before the gap empties; scored relative to its neighbourhood it stays whole
    for seed in (2, 3):
        x, y = make_circles(4800, factor=0.3, noise=0.03, random_state=seed)
        x, y = x[:1600], y[:1600]
        spec = KernelSpec("level_set").fit(x, 2)
        assert adjusted_rand_score(y, spec.prepare(x).argmax(axis=1)) == 1.0
        with pytest.raises(NoLevelSetError):
            KernelSpec("level_set", options={"relative": 0.0}).fit(x, 2)


@pytest.mark.unit
def test_one_cluster_and_repeated_rows():
    x, _ = make_circles(2000, factor=0.4, noise=0.05, random_state=0)
    # one cluster is every row, though the rows have a level set of two pieces
    one = MiniBatchKernelKMeans(1, kernel="level_set", random_state=0).fit(x)
    assert set(one.labels_) == {0}
    # many copies of a few rows count once; far new rows get finite features
    repeated = np.vstack([np.repeat(x[:3], 500, axis=0), x])
    model = MiniBatchKernelKMeans(2, kernel="level_set", random_state=0).fit(repeated)
    assert np.all(np.isfinite(model.transform(np.array([[1e6, 1e6], [0.0, 0.0]]))))


@pytest.mark.unit
def test_rows_without_a_k_piece_level_set_are_refused_by_name():
    x = np.random.default_rng(1).normal(size=(2000, 2))  # one Gaussian: one piece
    with pytest.raises(NoLevelSetError, match="n_clusters=2") as info:
        MiniBatchKernelKMeans(2, kernel="level_set", random_state=0).fit(x)
    assert isinstance(info.value, StreamkmError) and isinstance(info.value, ValueError)
    with pytest.raises(NoLevelSetError, match="too few"):
        KernelSpec("level_set").fit(x[:3], 2)


@pytest.mark.unit
@pytest.mark.parametrize("option, value", [("n_neighbors", 0), ("graph_neighbors", 1.5),
                                           ("min_keep", 0.99), ("min_size", -0.1),
                                           ("n_rows", True), ("min_keep", "high"),
                                           ("relative", 1.5)])
def test_level_set_options_are_checked(option, value):
    with pytest.raises(ParameterError, match=repr(value).replace(".", r"\.")):
        MiniBatchKernelKMeans(2, kernel="level_set", kernel_params={option: value}).fit(
            _noisy_rings(600, 0)[0])


@pytest.mark.unit
@pytest.mark.filterwarnings("error")
def test_level_set_state_scale_and_float32(tmp_path):
    x, y = _noisy_rings(2500, 3)
    model = MiniBatchKernelKMeans(2, kernel="level_set", random_state=0).fit(x)
    model.save(tmp_path / "m.npz")
    loaded = MiniBatchKernelKMeans.load(tmp_path / "m.npz")
    assert loaded.kernel_.name == "level_set"
    np.testing.assert_array_equal(loaded.transform(x), model.transform(x))
    # radii are only ranked and weights are relative: the same pieces at any scale
    for scale in (1e-6, 1e6):
        scaled = MiniBatchKernelKMeans(2, kernel="level_set", random_state=0).fit(
            (x * scale).astype(np.float32))
        assert scaled.transform(x[:3].astype(np.float32) * scale).dtype == np.float32
        assert adjusted_rand_score(model.labels_, scaled.labels_) >= 0.99
    # a state whose anchor labels name a piece that does not exist is refused
    arrays, meta = read_npz(tmp_path / "m.npz")
    arrays["kernel_anchor_labels"] = arrays["kernel_anchor_labels"] + 5
    write_npz_atomic(tmp_path / "bad.npz", arrays, meta)
    with pytest.raises(StateError, match="anchor labels"):
        MiniBatchKernelKMeans.load(tmp_path / "bad.npz")


@pytest.mark.unit
def test_auto_takes_the_level_set_on_noisy_rings_and_not_on_blobs():
    x, y = _noisy_rings(2000, 0)
    model = MiniBatchKernelKMeans(2, random_state=0).fit(x)
    assert model.kernel_.name == "level_set"
    assert adjusted_rand_score(y, model.labels_) >= 0.95
    # the median width cuts across both rings
    width = MiniBatchKernelKMeans(2, gamma="median", random_state=0).fit(x)
    assert adjusted_rand_score(y, width.labels_) < 0.2
    # blobs split by density too, but no more cleanly than the other kernels split them
    for seed in range(3):
        xb, yb = make_blobs(3000, centers=5, random_state=seed)
        assert MiniBatchKernelKMeans(5, random_state=seed).fit(xb).kernel_.name != "level_set"


def _spirals(seed: int, n: int = 3000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=n)
    turn = np.sqrt(rng.uniform(0.05, 1, n)) * 3 * np.pi
    x = np.c_[turn * np.cos(turn + np.pi * y), turn * np.sin(turn + np.pi * y)] / (3 * np.pi)
    return x + rng.normal(scale=0.05, size=x.shape), y


@pytest.mark.unit
@pytest.mark.parametrize("seed", [0, 1])
def test_auto_prefers_the_level_set_on_spirals(seed):
    """On two noisy spirals the anchor kernel's partitions cut across the arms and the
    level set follows them: its pieces cut the least of the common graph."""
    x, y = _spirals(seed)
    width = MiniBatchKernelKMeans(2, gamma="median", random_state=seed).fit(x)
    assert adjusted_rand_score(y, width.labels_) < 0.5
    model = MiniBatchKernelKMeans(2, random_state=seed).fit(x)
    assert model.kernel_.name == "level_set"
    assert adjusted_rand_score(y, model.labels_) >= 0.95


@pytest.mark.slow
@pytest.mark.parametrize(("n", "found"), [(2000, 9), (5000, 8), (20000, 9)])
def test_defaults_separate_the_noisiest_rings(n, found):
    """The hardest ring cell of the grid (factor 0.6, noise 0.08) at each size: >= 0.95 in
    at least 9 of 10 seeds, 8 at n 5,000, where two seeds' level set cuts no less of the
    decision graph than the median width (a stated limit of the criterion, docs/kernels.md;
    the full grid is in docs/benchmarks.md)."""
    scores = []
    for seed in range(10):
        x, y = _noisy_rings(n, seed)
        scores.append(adjusted_rand_score(y, MiniBatchKernelKMeans(2, random_state=seed)
                                          .fit(x).labels_))
    assert sum(s >= 0.95 for s in scores) >= found, scores
