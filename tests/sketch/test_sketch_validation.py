"""Bad parameters and bad input raise streamkm errors that quote the offending value."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamkm.exceptions import NotFittedError, ParameterError, ValidationError
from streamkm.sketch import (
    ApproxSVD,
    LeverageScoreSelector,
    RandomProjection,
    feature_selection_dimension,
    kmeans_sketch_dimension,
)

pytestmark = pytest.mark.unit

X = np.random.default_rng(0).standard_normal((20, 30))


@pytest.mark.parametrize(
    ("sketcher", "quoted"),
    [
        (RandomProjection(5, kind="fourier"), "'fourier'"),
        (RandomProjection(0), "0"),
        (RandomProjection(-3), "-3"),
        (RandomProjection(2.5), "2.5"),
        (RandomProjection("many"), "'many'"),
        (RandomProjection(n_clusters=None), "n_clusters=None"),
        (RandomProjection(n_clusters=0), "0"),
        (RandomProjection(n_clusters=3, eps=0.0), "0.0"),
        (RandomProjection(n_clusters=3, eps=1.5), "1.5"),
        (RandomProjection(5, random_state=-1), "-1"),
        (RandomProjection(5, random_state="seed"), "'seed'"),
        (ApproxSVD(0), "0"),
        (ApproxSVD(3, eps=-0.1), "-0.1"),
        (ApproxSVD(3, eps=float("nan")), "nan"),
        (LeverageScoreSelector(5), "n_clusters=None"),
        (LeverageScoreSelector(5, n_clusters=-2), "-2"),
        (LeverageScoreSelector("lots", n_clusters=2), "'lots'"),
        (LeverageScoreSelector(0, n_clusters=2), "0"),
    ],
)
def test_bad_parameters_raise_parameter_error(sketcher, quoted: str) -> None:
    with pytest.raises(ParameterError, match=quoted.replace(".", r"\.").replace("-", r"\-")):
        sketcher.fit(X)
    with pytest.raises(ValueError):  # ParameterError is also a ValueError
        sketcher.fit_transform(X)


def test_svd_rank_larger_than_input() -> None:
    with pytest.raises(ValidationError, match="n_components=25"):
        ApproxSVD(25).fit(X)
    with pytest.raises(ValidationError, match="n_components=31"):
        LeverageScoreSelector(5, n_clusters=31).fit(np.ones((40, 30)))


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomProjection(4),
        lambda: ApproxSVD(2),
        lambda: LeverageScoreSelector(4, n_clusters=2),
    ],
)
def test_transform_before_fit_and_wrong_width(make) -> None:
    sketcher = make()
    with pytest.raises(NotFittedError, match="fit"):
        sketcher.transform(X)
    sketcher.fit(X)
    with pytest.raises(ValidationError, match="31 features.*30"):
        sketcher.transform(np.ones((2, 31)))
    with pytest.raises(ValidationError, match="31 features.*30"):
        sketcher.transform(sp.csr_matrix(np.ones((2, 31))))


def test_bad_input_is_quoted() -> None:
    bad = X.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValidationError, match=r"nan.*row 3.*column 4"):
        RandomProjection(4).fit(bad)
    bad_sparse = sp.csr_matrix(X)
    bad_sparse.data[bad_sparse.indptr[5] + 2] = np.inf
    with pytest.raises(ValidationError, match=r"inf.*row 5.*column 2"):
        ApproxSVD(2).fit(bad_sparse)
    with pytest.raises(ValidationError, match=r"\(0, 30\)"):
        RandomProjection(4).fit(sp.csr_matrix((0, 30)))
    with pytest.raises(ValidationError, match="2-D"):
        RandomProjection(4).fit(np.ones(5))


def test_dimension_helpers_validate() -> None:
    with pytest.raises(ParameterError, match="0"):
        kmeans_sketch_dimension(0, 0.5, 10)
    with pytest.raises(ParameterError, match="2.0"):
        kmeans_sketch_dimension(3, 2.0, 10)
    with pytest.raises(ParameterError, match="-5"):
        feature_selection_dimension(3, 0.5, -5)
