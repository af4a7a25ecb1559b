"""make_drifting_stream: seeded, its events happen where the schedule says, its labels name
the shape each row was drawn from, and bad arguments are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import streamkm
from streamkm import ParameterError, StreamkmError
from streamkm.datasets import StreamEvent, make_drifting_stream

pytestmark = pytest.mark.unit

N = 20_000


@pytest.fixture(scope="module")
def stream() -> tuple[np.ndarray, np.ndarray, tuple[StreamEvent, ...]]:
    return make_drifting_stream(N, noise=0.05, random_state=3)


def _event(events: tuple[StreamEvent, ...], kind: str) -> StreamEvent:
    (found,) = [e for e in events if e.kind == kind]
    return found


def test_same_seed_same_stream_other_seed_other_rows() -> None:
    a = make_drifting_stream(5000, n_features=5, random_state=11)
    b = make_drifting_stream(5000, n_features=5, random_state=11)
    c = make_drifting_stream(5000, n_features=5, random_state=12)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2] == b[2] == c[2]
    assert not np.allclose(a[0], c[0])


def test_generator_argument_is_used_and_advanced() -> None:
    rng = np.random.default_rng(0)
    first = make_drifting_stream(2000, random_state=rng)[0]
    second = make_drifting_stream(2000, random_state=rng)[0]
    assert not np.allclose(first, second)
    np.testing.assert_array_equal(first, make_drifting_stream(
        2000, random_state=np.random.default_rng(0))[0])


def test_schedule_is_in_order_and_scales_with_the_stream() -> None:
    events = make_drifting_stream(50_000, random_state=0)[2]
    assert [e.kind for e in events] == ["move", "appear", "split", "disappear", "merge"]
    split = _event(events, "split")
    assert (split.start, split.at, split.end) == (20_000, 22_500, 25_000)
    assert all(e.start <= e.at <= e.end for e in events)
    assert [e.start for e in events] == sorted(e.start for e in events)


def test_labels_present_follow_the_schedule(stream) -> None:
    _, y, events = stream
    appear, split = _event(events, "appear"), _event(events, "split")
    gone, merge = _event(events, "disappear"), _event(events, "merge")
    (new,) = appear.labels_after
    assert new not in y[:appear.at] and np.sum(y[appear.at:appear.at + 500] == new) > 20
    for child in split.labels_after:
        assert child not in y[:split.at]
        assert np.sum(y[split.at:split.at + 500] == child) > 20
    (parent,) = split.labels_before
    assert parent in y[split.at - 200:split.at] and parent not in y[split.at:]
    (ring,) = gone.labels_before
    assert ring in y[gone.at - 200:gone.at] and ring not in y[gone.at:]
    absorbed = set(merge.labels_before) - set(merge.labels_after)
    for label in absorbed:
        assert label in y[merge.at - 200:merge.at] and label not in y[merge.at:]
    counts = [len(np.unique(y[i:i + 400])) for i in (0, appear.at + 100, split.at + 100,
                                                       gone.at + 100, merge.at + 100)]
    assert counts == [7, 8, 9, 8, 7]


def test_clusters_present_draw_equal_shares(stream) -> None:
    _, y, events = stream
    head = y[:_event(events, "appear").at]
    shares = np.bincount(head) / head.size
    np.testing.assert_allclose(shares[shares > 0], 1 / 7, atol=0.02)


def test_moon_rows_lie_on_their_half_circles(stream) -> None:
    X, y, _ = stream
    upper = X[y == 0] - [-1.0, -0.5]                  # centre of the upper moon
    lower = X[y == 1] - [1.0, 0.5]                    # centre of the lower moon
    np.testing.assert_allclose(np.linalg.norm(upper, axis=1), 2.0, atol=0.25)
    np.testing.assert_allclose(np.linalg.norm(lower, axis=1), 2.0, atol=0.25)
    assert np.mean(upper[:, 1] > -0.15) > 0.99 and np.mean(lower[:, 1] < 0.15) > 0.99


def test_ring_rows_lie_on_the_ring(stream) -> None:
    X, y, _ = stream
    radius = np.linalg.norm(X[y == 2] - [9.0, 5.0], axis=1)
    np.testing.assert_allclose(radius, 2.0, atol=0.25)


def test_moving_blob_is_where_the_schedule_puts_it(stream) -> None:
    X, y, events = stream
    move = _event(events, "move")
    index = np.flatnonzero(y == 3)
    before = index[index < move.start]
    middle = index[np.abs(index - (move.start + move.end) // 2) < 300]
    after = index[index >= move.end]
    np.testing.assert_allclose(X[before].mean(axis=0), [-9.0, -6.0], atol=0.15)
    np.testing.assert_allclose(X[middle].mean(axis=0), [-9.0, 0.0], atol=0.25)
    np.testing.assert_allclose(X[after].mean(axis=0), [-9.0, 6.0], atol=0.15)


def test_split_halves_move_apart_and_merged_blobs_come_together(stream) -> None:
    X, y, events = stream
    split, merge = _event(events, "split"), _event(events, "merge")
    late = np.arange(N) >= split.end
    np.testing.assert_allclose(X[late & (y == 5)].mean(axis=0), [9.0, -3.0], atol=0.15)
    np.testing.assert_allclose(X[late & (y == 6)].mean(axis=0), [9.0, -9.0], atol=0.15)
    early = np.arange(N) < merge.start
    np.testing.assert_allclose(X[early & (y == 8)].mean(axis=0), [-3.0, 7.0], atol=0.15)
    np.testing.assert_allclose(X[early & (y == 9)].mean(axis=0), [3.0, 7.0], atol=0.15)
    merged = X[merge.end:][y[merge.end:] == 8]
    np.testing.assert_allclose(merged.mean(axis=0), [0.0, 7.0], atol=0.15)


def test_higher_dimensions_keep_the_plane_and_add_only_noise() -> None:
    X2, y2, _ = make_drifting_stream(4000, noise=0.0, random_state=5)
    X, y, _ = make_drifting_stream(4000, n_features=16, noise=0.0, random_state=5)
    assert X.shape == (4000, 16)
    # An orthonormal embedding keeps every distance of the plane.
    d_plane = np.linalg.norm(X2[:200, None] - X2[None, :200], axis=2)
    d_high = np.linalg.norm(X[:200, None] - X[None, :200], axis=2)
    np.testing.assert_allclose(d_high, d_plane, atol=1e-9)
    np.testing.assert_array_equal(y, y2)
    noisy = make_drifting_stream(4000, n_features=16, noise=0.1, random_state=5)[0]
    singular = np.linalg.svd(noisy - noisy.mean(axis=0), compute_uv=False) / np.sqrt(4000)
    assert singular[1] > 2.0 and np.all(singular[2:] < 0.13)


def test_float32_is_kept() -> None:
    X, _, _ = make_drifting_stream(1000, dtype=np.float32, random_state=0)
    assert X.dtype == np.float32 and X.flags.c_contiguous


@pytest.mark.parametrize("kwargs, name, value", [
    ({"n_samples": 999}, "n_samples", "999"),
    ({"n_samples": 2.5}, "n_samples", "2.5"),
    ({"n_features": 1}, "n_features", "1"),
    ({"noise": -0.1}, "noise", "-0.1"),
    ({"noise": float("nan")}, "noise", "nan"),
    ({"cluster_std": 0.0}, "cluster_std", "0.0"),
    ({"random_state": "seed"}, "random_state", "'seed'"),
    ({"dtype": np.int32}, "dtype", "int32"),
    ({"dtype": "no-such-type"}, "dtype", "no-such-type"),
])
def test_bad_arguments_are_refused_by_name(kwargs, name, value) -> None:
    with pytest.raises(ParameterError) as info:
        make_drifting_stream(**kwargs)
    assert name in str(info.value) and value in str(info.value)
    assert isinstance(info.value, StreamkmError) and isinstance(info.value, ValueError)


def test_reachable_from_the_package() -> None:
    assert streamkm.datasets.make_drifting_stream is make_drifting_stream
