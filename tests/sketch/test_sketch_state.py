"""get_state / from_state: JSON meta, no pickle, bit-identical transforms after restore."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from streamkm._core.state_io import read_npz, write_npz_atomic
from streamkm.exceptions import NotFittedError, StateError
from streamkm.sketch import (
    ApproxSVD,
    LeverageScoreSelector,
    RandomProjection,
    sketcher_from_state,
)
from streamkm.sketch._base import BaseSketcher

pytestmark = pytest.mark.unit

SKETCHERS: dict[str, Callable[[], BaseSketcher]] = {
    "gaussian": lambda: RandomProjection(n_clusters=4, eps=0.6, random_state=3),
    "sign": lambda: RandomProjection(10, kind="sign", random_state=3),
    "sparse": lambda: RandomProjection(10, kind="sparse", random_state=3),
    "svd": lambda: ApproxSVD(4, eps=0.4, random_state=3),
    "leverage": lambda: LeverageScoreSelector(n_clusters=4, random_state=3),
}


def _data(dtype: type) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((60, 120)).astype(dtype)


@pytest.mark.parametrize("name", sorted(SKETCHERS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_round_trip_through_a_file_is_bit_identical(name: str, dtype: type, tmp_path: Path) -> None:
    x = _data(dtype)
    original = SKETCHERS[name]().fit(x)
    arrays, meta = original.get_state()
    json.dumps(meta, allow_nan=False)  # JSON-able
    assert all(isinstance(a, np.ndarray) and not a.dtype.hasobject for a in arrays.values())
    write_npz_atomic(tmp_path / "sketch.npz", arrays, meta)
    arrays_back, meta_back = read_npz(tmp_path / "sketch.npz")
    restored = type(original).from_state(arrays_back, meta_back)
    via_dispatch = sketcher_from_state(arrays_back, meta_back)
    assert type(via_dispatch) is type(original)
    assert restored.get_params() == original.get_params()
    assert restored.n_components_ == original.n_components_
    assert restored.n_features_in_ == original.n_features_in_
    x_new = np.random.default_rng(1).standard_normal((25, 120))
    for probe in (x_new, x_new.astype(np.float32), sp.csr_matrix(x_new)):
        expected = original.transform(probe)
        assert np.array_equal(restored.transform(probe), expected)
        assert np.array_equal(via_dispatch.transform(probe), expected)


@pytest.mark.parametrize("name", sorted(SKETCHERS))
def test_restored_sketcher_refits_identically(name: str) -> None:
    x = _data(np.float64)
    original = SKETCHERS[name]().fit(x)
    restored = sketcher_from_state(*original.get_state()).fit(x)
    assert np.array_equal(restored.transform(x), original.transform(x))


def test_state_arrays_are_copies() -> None:
    s = ApproxSVD(3, random_state=0).fit(_data(np.float64))
    arrays, _ = s.get_state()
    arrays["components"][:] = 0
    assert np.any(s.components_ != 0)


def test_unfitted_state_round_trip() -> None:
    arrays, meta = LeverageScoreSelector(7, n_clusters=2).get_state()
    assert arrays == {} and meta["fitted"] is False
    restored = LeverageScoreSelector.from_state(arrays, meta)
    with pytest.raises(NotFittedError):
        restored.transform(_data(np.float64))


def test_generator_random_state_is_not_serialised() -> None:
    s = RandomProjection(5, random_state=np.random.default_rng(0)).fit(_data(np.float64))
    arrays, meta = s.get_state()
    assert meta["params"]["random_state"] is None
    assert np.array_equal(RandomProjection.from_state(arrays, meta).transform(_data(np.float64)),
                          s.transform(_data(np.float64)))


def test_bad_states_raise_state_error() -> None:
    arrays, meta = ApproxSVD(3, random_state=0).fit(_data(np.float64)).get_state()
    with pytest.raises(StateError, match="'ApproxSVD'"):
        RandomProjection.from_state(arrays, meta)
    with pytest.raises(StateError, match="'Mystery'"):
        sketcher_from_state(arrays, {**meta, "sketcher": "Mystery"})
    with pytest.raises(StateError, match="99"):
        ApproxSVD.from_state(arrays, {**meta, "format_version": 99})
    with pytest.raises(StateError, match="'components'"):
        ApproxSVD.from_state({}, meta)
    with pytest.raises(StateError, match=r"\(3, 119\)"):
        ApproxSVD.from_state({"components": arrays["components"][:, :119]}, meta)
    with pytest.raises(StateError, match="float16"):
        ApproxSVD.from_state(arrays, {**meta, "dtype": "float16"})
    lev_arrays, lev_meta = LeverageScoreSelector(5, n_clusters=2, random_state=0).fit(
        _data(np.float64)).get_state()
    lev_arrays["selected_features"] = lev_arrays["selected_features"] + 1000
    with pytest.raises(StateError, match="selected_features"):
        LeverageScoreSelector.from_state(lev_arrays, lev_meta)
