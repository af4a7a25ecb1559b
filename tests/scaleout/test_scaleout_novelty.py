"""Novelty in scale-out without a broker: the leader's global model gathers the calibration
buffers from every member's updates (bounded by ``novelty_window``), a published version
carries them bit for bit, and a member scores its records against the adopted version's
buffers."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm import MiniBatchKernelKMeans
from streamkm.scaleout import Fence, MergeLeader, ModelUpdate
from streamkm.scaleout.leader import ModelVersion

pytestmark = pytest.mark.unit

WINDOW = 64
CENTERS = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])


def _new_model() -> MiniBatchKernelKMeans:
    return MiniBatchKernelKMeans(3, tau=40, n_init=1, random_state=0, outlier_alpha=0.05,
                                 novelty_window=WINDOW)


def _rows(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return CENTERS[rng.integers(0, 3, n)] + rng.normal(0.0, 0.5, (n, 2))


def _update(part: str, start: int, x: np.ndarray, token: str) -> ModelUpdate:
    return ModelUpdate(partition=part, start=start, end=start + len(x), token=token,
                       worker=f"member-{part}", model_version=-1, rows=x,
                       multiplicities=np.ones(len(x), np.int64))


def _novelty_arrays(version: ModelVersion) -> dict[str, np.ndarray]:
    assert version.model_arrays is not None
    return {k: v for k, v in version.model_arrays.items() if k.startswith("novelty_")}


def _leader_after(n_updates: int) -> MergeLeader:
    leader = MergeLeader(_new_model, init_records=60)
    messages: list = [Fence("p0", "a", "w"), Fence("p1", "b", "w")]
    for i in range(n_updates):  # two members, one partition each, interleaved
        messages.append(_update("p0", 60 * i, _rows(60, seed=2 * i), "a"))
        messages.append(_update("p1", 60 * i, _rows(60, seed=2 * i + 1), "b"))
    for offset, message in enumerate(messages):
        leader.apply(message, offset)
    return leader


def test_the_leader_gathers_every_members_rows_into_bounded_buffers() -> None:
    few = _leader_after(1).snapshot()
    sizes = _novelty_arrays(few)["novelty_sizes"]
    # the first model step is taken on both members' rows: each counted once in its
    # cluster's buffer (about 40 per cluster, below the window)
    assert int(sizes.sum()) == 2 * 60 and (sizes < WINDOW).all()
    many = _novelty_arrays(_leader_after(20).snapshot())
    assert (many["novelty_sizes"] == WINDOW).all()          # bounded, every cluster full
    assert many["novelty_ring"].shape[-1] == WINDOW


def test_a_published_version_restores_the_buffers_bit_for_bit() -> None:
    leader = _leader_after(6)
    version = leader.snapshot()
    restored = ModelVersion.from_bytes(version.to_bytes())
    before, after = _novelty_arrays(version), _novelty_arrays(restored)
    assert before.keys() == after.keys() and before
    for name in before:
        assert before[name].dtype == after[name].dtype
        np.testing.assert_array_equal(before[name], after[name])
    probe = np.vstack([_rows(200, seed=99), [[40.0, -40.0], [-35.0, 50.0]]])
    np.testing.assert_array_equal(restored.build_model().score_samples(probe),
                                  leader.model.score_samples(probe))


def test_a_member_scores_with_the_adopted_versions_buffers() -> None:
    leader = _leader_after(6)
    member_model = ModelVersion.from_bytes(leader.snapshot().to_bytes()).build_model()
    probe = np.vstack([_rows(300, seed=7), [[40.0, -40.0], [-35.0, 50.0]]])
    fields = member_model.novelty_fields(member_model.transform(probe), probe)
    np.testing.assert_array_equal(fields["novelty"], leader.model.score_samples(probe))
    np.testing.assert_array_equal(fields["labels"], leader.model.predict(probe))
    assert fields["outliers"][-2:].all()                   # far from every cluster
    assert fields["outliers"][:-2].mean() < 0.1             # about alpha = 0.05
    distances = member_model.transform(probe)
    ordered = np.sort(distances, axis=1)
    np.testing.assert_array_equal(fields["sq_distances"], ordered[:, 0])
    np.testing.assert_array_equal(fields["margins"], ordered[:, 1] - ordered[:, 0])
    assert (fields["second_cluster_ids"] != member_model.cluster_ids_[fields["labels"]]).all()


def test_with_one_cluster_there_is_no_second_cluster_and_the_margin_is_infinite() -> None:
    model = MiniBatchKernelKMeans(1, n_init=1, random_state=0).partial_fit(_rows(100, 1))
    rows = _rows(5, 2)
    fields = model.novelty_fields(model.transform(rows), rows)
    np.testing.assert_array_equal(fields["second_labels"], np.full(5, -1))
    np.testing.assert_array_equal(fields["second_cluster_ids"], np.full(5, -1))
    assert np.isinf(fields["margins"]).all() and not fields["outliers"].any()
