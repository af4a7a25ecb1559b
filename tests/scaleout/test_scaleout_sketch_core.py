"""Scale-out with sketching, sparse records and drift, without a broker: the weighted engine
step with raw rows, updates of CSR rows and of one sketch epoch, the leader's global sketch
(versioned with the model, re-sketched from its reservoir, stale epochs re-projected), its
deterministic replay, and the split events a version announces."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from prometheus_client import CollectorRegistry

from streamkm import MiniBatchKernelKMeans
from streamkm.config.schema import config_from_mapping
from streamkm.exceptions import StateError
from streamkm.runtime.metrics import ServiceMetrics
from streamkm.runtime.sketching import ServiceSketching
from streamkm.runtime.wiring import build_model
from streamkm.scaleout import Fence, MergeLeader, ModelUpdate, decode_message, encode_message
from streamkm.scaleout.compress import subsample_per_cluster
from streamkm.scaleout.leader import ModelVersion
from streamkm.sketch import SketchedKernelKMeans
from tests.helpers.planted_topics import PlantedTopics

pytestmark = pytest.mark.unit

TOPICS = PlantedTopics(dim=1000, n_topics=4)


def _blobs(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    return centers[np.arange(n) % 3] + rng.normal(0, 0.5, (n, 2))


# ---------------------------------------------------------------- weighted step with raw rows

@pytest.mark.parametrize("kernel", ["rbf", "linear"])
@pytest.mark.parametrize("sparse_raw", [False, True])
def test_weighted_step_with_raw_rows_equals_repeated_rows(kernel: str, sparse_raw: bool) -> None:
    """A row with multiplicity m and its raw version act as m copies, raw supports (or raw
    centroids) included: after a re-sketch from the raw rows both models still agree."""
    rng = np.random.default_rng(0)
    lift = rng.normal(size=(2, 12))  # raw rows live in 12-d, features are their 2-d sketch
    back = np.linalg.pinv(lift)

    def raw_of(x: np.ndarray):
        r = x @ lift
        return sp.csr_matrix(r) if sparse_raw else r

    x = _blobs(300)
    a = MiniBatchKernelKMeans(3, kernel=kernel, tau=2000, n_init=1, random_state=1)
    b = MiniBatchKernelKMeans(3, kernel=kernel, tau=2000, n_init=1, random_state=1)
    a.step(x, raw=raw_of(x))
    b.step(x, raw=raw_of(x))
    for step in range(3):
        batch = _blobs(50, seed=10 + step)
        w = rng.integers(1, 4, size=50)
        a.step(batch, raw=raw_of(batch), sample_weight=w)
        rep = np.repeat(batch, w, axis=0)
        b.step(rep, raw=raw_of(rep))
    np.testing.assert_array_equal(a.counts_, b.counts_)
    rotate = np.array([[0.0, -1.0], [1.0, 0.0]]) * 1.5

    def new_sketch(raw):
        dense = raw.toarray() if sp.issparse(raw) else raw
        return dense @ back @ rotate

    a.resketch(new_sketch)
    b.resketch(new_sketch)
    probe = _blobs(60, seed=99) @ rotate
    np.testing.assert_allclose(a.transform(probe), b.transform(probe), atol=1e-8)


# ---------------------------------------------------------------- update codec

def test_update_with_csr_rows_and_raw_rows_round_trips() -> None:
    csr = TOPICS.matrix(range(5))
    plain = ModelUpdate("t:0", 0, 9, "tok", "w", -1, csr, np.array([1, 2, 1, 3, 2]))
    back = decode_message(encode_message(plain))
    assert sp.issparse(back.rows) and back.raw is None
    assert (back.rows != csr).nnz == 0 and back.n_records == 9

    feats = np.arange(10.0).reshape(5, 2)
    sketched = ModelUpdate("t:0", 9, 20, "tok", "w", 4, feats, np.ones(5, np.int64),
                           sketch_epoch=3, raw=csr)
    back = decode_message(encode_message(sketched))
    np.testing.assert_array_equal(back.rows, feats)
    assert back.sketch_epoch == 3 and (back.raw != csr).nnz == 0

    with pytest.raises(StateError, match=r"\(4, 1000\)"):
        encode_message(ModelUpdate("t:0", 0, 5, "tok", "w", 4, feats, np.ones(5, np.int64),
                                   raw=csr[:4]))


# ---------------------------------------------------------------- the leader's global sketch

def _sketching(kind: str = "svd", **sketch: object) -> tuple[ServiceSketching, object]:
    config = config_from_mapping({
        "source": {"kind": "kafka", "topics": ["t"], "group_id": "g"},
        "decoding": {"dim": TOPICS.dim, "format": "json_sparse"},
        "model": {"n_clusters": 4, "tau": 40, "n_init": 1, "random_state": 3},
        "batching": {"batch_size": 100},
        "sketch": {"kind": kind, "reservoir_size": 300, **sketch},
        "scaleout": {"enabled": True}})
    return ServiceSketching(config, ServiceMetrics(CollectorRegistry())), config


def _sketched_leader(start: ModelVersion | None = None) -> MergeLeader:
    sketching, config = _sketching(resketch_every=6)
    return MergeLeader(lambda: sketching.wrap(build_model(config.model, 100, None)),
                       init_records=100, start=start,
                       stepper=lambda m, x, w, f: sketching.step(m, x, sample_weight=w,
                                                                 features=f))


def _worker_update(model: SketchedKernelKMeans | None, version: int, lo: int,
                   rng: np.random.Generator) -> ModelUpdate:
    """What a worker sends for documents [lo, lo + 100) assigned with ``model``."""
    x = TOPICS.matrix(range(lo, lo + 100))
    if model is None:
        rows, mult = subsample_per_cluster(np.zeros(100, np.int64), 1, 160, rng)
        return ModelUpdate("p0", lo, lo + 100, "a", "w", -1, x[rows], mult)
    features = model.sketch(x)
    labels = model.model_.predict(features)
    rows, mult = subsample_per_cluster(labels, model.n_clusters_, 40, rng)
    return ModelUpdate("p0", lo, lo + 100, "a", "w", version, features[rows], mult,
                       sketch_epoch=model.sketch_epoch_, raw=x[rows])


def _messages(n_docs: int, adopt_every: int) -> tuple[MergeLeader, list[object]]:
    """Run a leader and one simulated worker that adopts a version every ``adopt_every``
    updates (so some of its updates carry an older sketch epoch); returns the leader and
    every message in order."""
    leader = _sketched_leader()
    messages: list[object] = [Fence("p0", "a", "w")]
    leader.apply(messages[0], 0)
    rng = np.random.default_rng(0)
    adopted: tuple[SketchedKernelKMeans | None, int] = (None, -1)
    for i, lo in enumerate(range(0, n_docs, 100)):
        update = decode_message(encode_message(_worker_update(*adopted, lo, rng)))
        messages.append(update)
        leader.apply(update, len(messages) - 1)
        if i % adopt_every == 0 and leader.model is not None:
            version = ModelVersion.from_bytes(leader.snapshot().to_bytes())
            adopted = (version.build_model(), version.version)
    return leader, messages


def test_leader_owns_one_sketch_versioned_with_the_model() -> None:
    leader, messages = _messages(3000, adopt_every=4)
    model = leader.model
    assert isinstance(model, SketchedKernelKMeans)
    assert leader.counters["records_applied"] == 3000 == int(model.counts_.sum())
    assert model.sketch_epoch_ == 30 // 6  # re-sketched every 6 applied updates
    # updates projected with an epoch the leader had left behind were re-projected, the
    # others stepped with the worker's projection
    projected = sum(1 for m in messages if isinstance(m, ModelUpdate) and m.raw is not None)
    assert 0 < leader.counters["updates_reprojected"] < projected
    version = ModelVersion.from_bytes(leader.snapshot().to_bytes())
    assert version.sketch_epoch == model.sketch_epoch_
    adopted = version.build_model()
    probe = TOPICS.matrix(range(10**6, 10**6 + 200))
    np.testing.assert_array_equal(adopted.transform(probe), model.transform(probe))
    truth = [TOPICS.label(i) for i in range(10**6, 10**6 + 200)]
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(truth, adopted.predict(probe)) > 0.95


def test_sketched_leader_replays_deterministically_from_a_version() -> None:
    leader, messages = _messages(1500, adopt_every=3)
    mid = _sketched_leader()
    for offset, message in enumerate(messages[:8]):
        mid.apply(message, offset)
    successor = _sketched_leader(ModelVersion.from_bytes(mid.snapshot().to_bytes()))
    for offset, message in enumerate(messages):
        successor.apply(message, offset)
    assert successor.model.sketch_epoch_ == leader.model.sketch_epoch_ > 0
    probe = TOPICS.matrix(range(10**6, 10**6 + 50))
    np.testing.assert_allclose(successor.model.transform(probe), leader.model.transform(probe),
                               atol=1e-9)
    assert successor.counters == leader.counters


def test_resketches_are_reported_as_side_events() -> None:
    leader = _sketched_leader()
    leader.apply(Fence("p0", "a", "w"), 0)
    rng = np.random.default_rng(1)
    epochs = []
    for i, lo in enumerate(range(0, 1500, 100)):
        model = leader.model
        outcome = leader.apply(_worker_update(model, i, lo, rng), i + 1)
        epochs += [e["sketch_epoch"] for e in outcome.side_events
                   if e["event"] == "resketched"]
    assert epochs == [1, 2]


def test_unsketched_leader_steps_csr_updates_like_dense_ones() -> None:
    """Sparse records without a sketch: CSR update rows give the same model as their dense
    version (the leader densifies one update's rows)."""
    def run(sparse: bool) -> MergeLeader:
        leader = MergeLeader(lambda: MiniBatchKernelKMeans(4, tau=40, n_init=1, random_state=3),
                             init_records=100)
        leader.apply(Fence("p0", "a", "w"), 0)
        rng = np.random.default_rng(2)
        for i, lo in enumerate(range(0, 800, 100)):
            x = TOPICS.matrix(range(lo, lo + 100))
            rows, mult = subsample_per_cluster(np.arange(100) % 4, 4, 10, rng)
            chosen = x[rows] if sparse else x[rows].toarray()
            update = decode_message(encode_message(
                ModelUpdate("p0", lo, lo + 100, "a", "w", i, chosen, mult)))
            assert sp.issparse(update.rows) == sparse
            leader.apply(update, i + 1)
        return leader

    dense, sparse = run(False), run(True)
    probe = TOPICS.matrix(range(10**6, 10**6 + 50)).toarray()
    np.testing.assert_array_equal(sparse.model.transform(probe), dense.model.transform(probe))
    assert sparse.counters["records_applied"] == 800


# ---------------------------------------------------------------- drift announced by versions

def test_split_is_announced_in_the_versions_with_its_version() -> None:
    drift = {"k_max": 5, "reservoir_size": 128, "min_reservoir": 48}
    leader = MergeLeader(lambda: MiniBatchKernelKMeans(3, tau=40, n_init=1, random_state=3,
                                                       drift=drift), init_records=100)
    leader.apply(Fence("p0", "a", "w"), 0)
    rng = np.random.default_rng(0)
    x = _blobs(9000, seed=7)
    moved = (np.arange(9000) % 3 == 2) & (np.arange(9000) >= 3000)
    x[moved, 0] += np.where(rng.random(int(moved.sum())) < 0.5, -3.0, 3.0)
    for i, lo in enumerate(range(0, 9000, 50)):
        model = leader.model
        labels = (np.zeros(50, np.int64) if model is None else model.predict(x[lo:lo + 50]))
        k = 1 if model is None else model.n_clusters_
        rows, mult = subsample_per_cluster(labels, k, 40, rng)
        leader.apply(ModelUpdate("p0", lo, lo + 50, "a", "w", i, x[lo:lo + 50][rows], mult),
                     i + 1)
    version = ModelVersion.from_bytes(leader.snapshot().to_bytes())
    splits = [e for e in version.cluster_events if e["event"] == "split"]
    assert len(splits) == 1 and splits[0]["into"][1] == 3
    assert 3000 // 50 < splits[0]["version"] <= version.version
    assert version.build_model().cluster_ids_.tolist() == [0, 1, 2, 3]
    assert int(version.build_model().counts_.sum()) == 9000


def test_scaleout_accepts_sketch_and_sparse_records() -> None:
    _, config = _sketching(kind="gaussian")
    assert config.scaleout.enabled and config.sketch.kind == "gaussian"
    assert config.decoding.format == "json_sparse"
