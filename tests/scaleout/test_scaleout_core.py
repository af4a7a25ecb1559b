"""Scale-out building blocks without a broker: the weighted engine step, the update codec,
the per-cluster subsample, the fencing / watermark rules and the leader's replay."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm import MiniBatchKernelKMeans
from streamkm.exceptions import StateError, ValidationError
from streamkm.scaleout import (
    Fence,
    MergeLeader,
    ModelUpdate,
    PartitionLedger,
    UpdateVerdict,
    decode_message,
    encode_message,
    subsample_per_cluster,
)
from streamkm.scaleout.leader import ModelVersion

pytestmark = pytest.mark.unit


def _blobs(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    return centers[np.arange(n) % 3] + rng.normal(0, 0.5, (n, 2))


# ---------------------------------------------------------------- weighted engine step

def test_weighted_linear_step_matches_numpy_reference() -> None:
    x = _blobs(300)
    model = MiniBatchKernelKMeans(3, kernel="linear", n_init=1, random_state=0).partial_fit(x)
    centers = model.cluster_centers_.astype(np.float64).copy()
    counts = model.counts_.copy()
    rng = np.random.default_rng(1)
    batch = _blobs(40, seed=2)
    w = rng.integers(1, 5, size=40)
    report = model.step(batch, sample_weight=w)
    # plain numpy: assign, weighted b_j, alpha = sqrt(b_j / b), weighted means
    d = ((batch[:, None, :] - centers[None]) ** 2).sum(-1)
    labels = d.argmin(1)
    bj = np.bincount(labels, weights=w, minlength=3)
    alpha = np.sqrt(bj / w.sum())
    for j in range(3):
        if bj[j]:
            mean = (w[labels == j, None] * batch[labels == j]).sum(0) / bj[j]
            centers[j] = (1 - alpha[j]) * centers[j] + alpha[j] * mean
    np.testing.assert_array_equal(report.labels, labels)
    np.testing.assert_allclose(model.cluster_centers_, centers, atol=1e-10)
    assert report.objective == pytest.approx(float((w * d.min(1)).sum() / w.sum()), rel=1e-12)
    np.testing.assert_array_equal(model.counts_ - counts, bj.astype(np.int64))


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_integer_multiplicities_equal_repeated_rows(kernel: str) -> None:
    x = _blobs(300)
    rng = np.random.default_rng(3)
    a = MiniBatchKernelKMeans(3, kernel=kernel, tau=2000, n_init=1, random_state=1)
    b = MiniBatchKernelKMeans(3, kernel=kernel, tau=2000, n_init=1, random_state=1)
    a.partial_fit(x)
    b.partial_fit(x)
    for step in range(3):
        batch = _blobs(50, seed=10 + step)
        w = rng.integers(1, 4, size=50)
        ra = a.step(batch, sample_weight=w)
        rb = b.step(np.repeat(batch, w, axis=0))
        assert ra.objective == pytest.approx(rb.objective, rel=1e-9)
    np.testing.assert_array_equal(a.counts_, b.counts_)
    probe = _blobs(60, seed=99) * 1.5
    np.testing.assert_allclose(a.transform(probe), b.transform(probe), atol=1e-9)


def test_default_weights_bit_identical_and_bad_weights_refused() -> None:
    x = _blobs(200)
    a = MiniBatchKernelKMeans(3, n_init=1, random_state=0).partial_fit(x)
    b = MiniBatchKernelKMeans(3, n_init=1, random_state=0).partial_fit(x)
    batch = _blobs(50, seed=5)
    ra, rb = a.step(batch), b.step(batch, sample_weight=np.ones(50, dtype=np.int64))
    assert ra.objective == pytest.approx(rb.objective, rel=1e-12)
    with pytest.raises(ValidationError, match="0.5"):
        a.step(batch, sample_weight=np.full(50, 0.5))
    with pytest.raises(ValidationError, match=r"\(50,\)"):
        a.step(batch, sample_weight=np.ones(3))


# ---------------------------------------------------------------- messages and subsample

def test_subsample_keeps_at_most_cap_rows_and_exact_multiplicities() -> None:
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2, 4], [7, 500, 1, 333])
    rows, mult = subsample_per_cluster(labels, 5, 40, rng)
    assert mult.sum() == labels.shape[0]
    assert mult.min() >= 1
    for j, size in ((0, 7), (1, 500), (2, 1), (4, 333)):
        mine = labels[rows] == j
        assert mine.sum() == min(size, 40)
        assert mult[mine].sum() == size
    assert len(set(rows.tolist())) == rows.shape[0]


def test_update_and_fence_round_trip() -> None:
    update = ModelUpdate(partition="t:3", start=10, end=25, token="abc", worker="w1",
                         model_version=7, rows=np.arange(6.0).reshape(3, 2),
                         multiplicities=np.array([1, 4, 2]), objective_sum=1.5)
    back = decode_message(encode_message(update))
    assert isinstance(back, ModelUpdate)
    assert (back.partition, back.start, back.end, back.token, back.model_version) == (
        "t:3", 10, 25, "abc", 7)
    np.testing.assert_array_equal(back.rows, update.rows)
    assert back.n_records == 7 and back.objective_sum == 1.5
    fence = decode_message(encode_message(Fence("t:1", "tok", "w2")))
    assert fence == Fence("t:1", "tok", "w2")
    data = bytearray(encode_message(update))
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(StateError):
        decode_message(bytes(data))


# ---------------------------------------------------------------- fencing rules

def test_ledger_rules_duplicate_stale_generation_gap() -> None:
    ledger = PartitionLedger()
    assert ledger.judge("p", "a", 0, 5) is UpdateVerdict.STALE_GENERATION  # never fenced
    ledger.fence("p", "a")
    assert ledger.judge("p", "a", 0, 5) is UpdateVerdict.APPLY
    ledger.advance("p", 5)
    assert ledger.judge("p", "a", 0, 5) is UpdateVerdict.DUPLICATE
    assert ledger.judge("p", "a", 6, 9) is UpdateVerdict.GAP
    assert ledger.fence("p", "b") == 2
    assert ledger.judge("p", "a", 5, 9) is UpdateVerdict.STALE_GENERATION
    assert ledger.judge("p", "b", 5, 9) is UpdateVerdict.APPLY
    assert PartitionLedger.from_dict(ledger.to_dict()) == ledger


def _update(part: str, start: int, end: int, token: str, x: np.ndarray) -> ModelUpdate:
    return ModelUpdate(partition=part, start=start, end=end, token=token, worker="w",
                       model_version=-1, rows=x, multiplicities=np.ones(len(x), np.int64))


def test_leader_counts_exactly_and_replays_deterministically() -> None:
    def new_model() -> MiniBatchKernelKMeans:
        return MiniBatchKernelKMeans(3, tau=20, n_init=1, random_state=0)

    x = _blobs(400)
    messages = [Fence("p0", "a", "w"), Fence("p1", "b", "w")]
    messages += [_update("p0", 0, 50, "a", x[:50]), _update("p1", 0, 60, "b", x[50:110])]
    messages += [_update("p0", 0, 50, "a", x[:50])]  # duplicate
    messages += [_update("p1", 70, 80, "b", x[110:120])]  # gap
    messages += [Fence("p0", "c", "w"), _update("p0", 50, 90, "a", x[120:160])]  # stale
    messages += [_update("p0", 50, 100, "c", x[160:210]), _update("p1", 60, 100, "b", x[210:250])]
    leader = MergeLeader(new_model, init_records=50)
    verdicts = [leader.apply(m, i).verdict for i, m in enumerate(messages)]
    assert verdicts == ["fence", "fence", "buffered", "applied", "duplicate", "gap", "fence",
                        "stale_generation", "applied", "applied"]
    assert int(leader.model.counts_.sum()) == 50 + 60 + 50 + 40
    assert leader.ledger.watermarks == {"p0": 100, "p1": 100}
    assert leader.counters["updates_dropped"] == {"stale_generation": 1, "duplicate": 1, "gap": 1,
                                                 "corrupt": 0}

    # a new leader from a published mid-stream version reaches the same state
    replay = MergeLeader(new_model, init_records=50)
    for i, m in enumerate(messages[:5]):
        replay.apply(m, i)
    version = ModelVersion.from_bytes(replay.snapshot().to_bytes())
    successor = MergeLeader(new_model, init_records=50, start=version)
    for i, m in enumerate(messages):  # re-reading from the start: old offsets are skipped
        successor.apply(m, i)
    assert successor.version == leader.version == len(messages)
    probe = _blobs(50, seed=4)
    np.testing.assert_array_equal(successor.model.transform(probe), leader.model.transform(probe))
    np.testing.assert_array_equal(successor.model.counts_, leader.model.counts_)
    assert successor.counters == leader.counters


def _stream(data: str, seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_blobs, make_circles, make_moons

    if data == "moons":
        return make_moons(n, noise=0.08, random_state=seed)
    if data == "rings":
        return make_circles(n, factor=0.4, noise=0.05, random_state=seed)
    return make_blobs(n, centers=5, random_state=seed - 1)


@pytest.mark.parametrize("data, kernel, k, floor, asked", [
    ("moons", "heat", 2, 0.95, "heat"), ("blobs", "anchor", 5, 0.8, "rbf"),
    ("rings", "level_set", 2, 0.95, "level_set")])
def test_a_leader_publishes_the_auto_graph_kernel(data: str, kernel: str, k: int,
                                                  floor: float, asked: str) -> None:
    """The first model's "auto" decision runs on the rows buffered from every partition: on
    these blobs it resolves to the anchor-graph kernel; the fitted kernel (its anchors and
    feature map, or the heat kernel's graph and spectrum and the level set's pieces, asked
    for by name) travels in the version, so members predict with it and a successor
    leader goes on from it identically."""
    from sklearn.metrics import adjusted_rand_score

    def new_model() -> MiniBatchKernelKMeans:
        return MiniBatchKernelKMeans(k, kernel=asked, random_state=0)

    x, y = _stream(data, 1, 4000)
    messages = [Fence("p0", "a", "w"), Fence("p1", "b", "w")]
    messages += [_update(p, s, s + 400, t, x[o + s:o + s + 400])
                 for s in range(0, 2000, 400) for p, t, o in (("p0", "a", 0), ("p1", "b", 2000))]
    leader = MergeLeader(new_model, init_records=600)
    for i, m in enumerate(messages):
        leader.apply(m, i)
    version = ModelVersion.from_bytes(leader.snapshot().to_bytes())
    member = version.build_model()
    assert member.kernel_.name == kernel
    assert adjusted_rand_score(y, member.predict(x)) >= floor
    np.testing.assert_array_equal(member.transform(x[:100]), leader.model.transform(x[:100]))
    successor = MergeLeader(new_model, init_records=600, start=version)
    more = _stream(data, 2, 800)[0]
    extra = [_update("p0", 2000, 2400, "a", more[:400]), _update("p1", 2000, 2400, "b", more[400:])]
    for i, m in enumerate(extra, start=len(messages)):
        leader.apply(m, i)
        successor.apply(m, i)
    np.testing.assert_array_equal(successor.model.transform(x[:100]),
                                  leader.model.transform(x[:100]))
