"""Data-oblivious random projections for k-means (Theorem 12 of Boutsidis et al.)."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from streamkm._core.estimator import RANDOM_STATE_CONSTRAINT
from streamkm._core.sparse_input import SketchInput, right_multiply
from streamkm._core.validation import check_random_state
from streamkm.exceptions import ParameterError, StateError
from streamkm.sketch._base import BaseSketcher, float_dtype_from_name, require_array
from streamkm.sketch._dimension import kmeans_sketch_dimension

__all__ = ["RandomProjection", "PROJECTION_KINDS"]

PROJECTION_KINDS: tuple[str, ...] = ("gaussian", "sign", "sparse")


def _import_scipy_sparse() -> Any:
    try:
        import scipy.sparse as sparse
    except ImportError as exc:  # pragma: no cover - scipy is installed in dev and CI
        raise ImportError("RandomProjection(kind='sparse') needs scipy installed") from exc
    return sparse


def gaussian_matrix(n_components: int, n_features: int, rng: np.random.Generator) -> np.ndarray:
    """Dense (n_components, n_features) matrix with i.i.d. N(0, 1/n_components) entries."""
    return rng.standard_normal((n_components, n_features)) / math.sqrt(n_components)


def sign_matrix(n_components: int, n_features: int, rng: np.random.Generator) -> np.ndarray:
    """Dense (n_components, n_features) matrix with i.i.d. +-1/sqrt(n_components) entries."""
    signs = rng.integers(0, 2, size=(n_components, n_features), dtype=np.int8) * 2 - 1
    return signs.astype(np.float64) / math.sqrt(n_components)


def very_sparse_density(n_features: int) -> float:
    """Li, Hastie and Church's density 1/sqrt(n_features) (1 for a single feature)."""
    return 1.0 / math.sqrt(n_features)


def very_sparse_matrix(n_components: int, n_features: int, rng: np.random.Generator) -> Any:
    """CSR (n_components, n_features) Achlioptas/Li very sparse projection.

    Each entry is nonzero with probability d = 1/sqrt(n_features), then +-sqrt(1/(d r))
    with equal probability (r = n_components), so E[entry^2] = 1/r and
    E||R x||^2 = ||x||^2. Column indices are sorted within each row.
    """
    sparse = _import_scipy_sparse()
    density = very_sparse_density(n_features)
    counts = rng.binomial(n_features, density, size=n_components)
    indptr = np.zeros(n_components + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=np.int64)
    for row, count in enumerate(counts):
        chosen = rng.choice(n_features, size=int(count), replace=False)
        indices[indptr[row]:indptr[row + 1]] = np.sort(chosen)
    value = math.sqrt(1.0 / (density * n_components))
    data = (rng.integers(0, 2, size=indices.size, dtype=np.int8) * 2 - 1) * value
    return sparse.csr_matrix(
        (data.astype(np.float64), indices, indptr), shape=(n_components, n_features)
    )


class RandomProjection(BaseSketcher):
    """Random projection of the features for k-means (Theorem 12 of Boutsidis et al.).

    The sketch is ``X @ components_.T`` with a random ``components_`` drawn independently of
    the data, so ``fit`` only looks at the number of features. With
    ``n_components = O(k / eps^2)``, the optimal k-means partition of the sketch is, with
    constant probability, a (2 + eps)-approximation in the original space.

    Parameters
    ----------
    n_components : "auto" or int, default="auto"
        Sketch dimension r. "auto" uses :func:`kmeans_sketch_dimension`
        ``ceil(n_clusters / eps**2)`` capped at the number of features; it needs
        ``n_clusters``.
    kind : {"gaussian", "sign", "sparse"}, default="gaussian"
        Entries N(0, 1/r); +-1/sqrt(r); or the Achlioptas/Li very sparse projection with
        density 1/sqrt(n_features), scaled so that E||x R||^2 = ||x||^2.
    eps : float, default=0.5
        Accuracy parameter in (0, 1], used by ``n_components="auto"``.
    n_clusters : int or None, default=None
        Number of clusters k, used by ``n_components="auto"``.
    random_state : None, int or numpy.random.Generator, default=None
        Source of randomness for ``components_``.

    Attributes
    ----------
    components_ : numpy.ndarray or scipy.sparse.csr_matrix of shape (n_components_, n_features_in_)
        The projection matrix (CSR for ``kind="sparse"``), in the dtype of the fitted input.
    n_components_ : int
        Sketch dimension r.
    n_features_in_ : int
        Number of input features.
    density_ : float
        Fraction of nonzero entries expected in ``components_`` (1.0 unless sparse).

    Examples
    --------
    >>> import numpy as np
    >>> from streamkm.sketch import RandomProjection
    >>> X = np.random.default_rng(0).normal(size=(100, 500))
    >>> sketch = RandomProjection(n_clusters=4, eps=0.5, random_state=0).fit(X)
    >>> sketch.n_components_, sketch.transform(X).shape  # ceil(4 / 0.5**2) dimensions
    (16, (100, 16))
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "n_components": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "kind": [StrOptions(set(PROJECTION_KINDS))],
        "eps": [Interval(Real, 0, 1, closed="right")],
        "n_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    components_: Any
    density_: float

    def __init__(
        self,
        n_components: int | str = "auto",
        kind: str = "gaussian",
        eps: float = 0.5,
        n_clusters: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.kind = kind
        self.eps = eps
        self.n_clusters = n_clusters
        self.random_state = random_state

    def _resolve_n_components(self, n_features: int) -> int:
        if isinstance(self.n_components, str):
            if self.n_clusters is None:
                raise ParameterError(
                    "n_components='auto' needs n_clusters (the number of clusters k), "
                    "got n_clusters=None"
                )
            return kmeans_sketch_dimension(self.n_clusters, self.eps, n_features)
        return int(self.n_components)

    def _check_params_for(self, n_features: int) -> None:
        self._resolve_n_components(n_features)

    def _fit(self, x: SketchInput) -> None:
        n_features = int(x.shape[1])
        r = self._resolve_n_components(n_features)
        rng = check_random_state(self.random_state)
        if self.kind == "gaussian":
            matrix = gaussian_matrix(r, n_features, rng)
            density = 1.0
        elif self.kind == "sign":
            matrix = sign_matrix(r, n_features, rng)
            density = 1.0
        else:
            matrix = very_sparse_matrix(r, n_features, rng)
            density = very_sparse_density(n_features)
        self.components_ = matrix.astype(x.dtype)
        self.n_components_ = r
        self.density_ = density
        self._components_by_dtype: dict[np.dtype, Any] = {}

    def _components_as(self, dtype: np.dtype) -> Any:
        if self.components_.dtype == dtype:
            return self.components_
        cache = self.__dict__.setdefault("_components_by_dtype", {})
        if dtype not in cache:
            cache[dtype] = self.components_.astype(dtype)
        return cache[dtype]

    def _transform(self, x: SketchInput) -> np.ndarray:
        return right_multiply(x, self._components_as(x.dtype).T)

    # -- state --------------------------------------------------------------------------
    def _fitted_meta(self) -> dict[str, Any]:
        return {"dtype": np.dtype(self.components_.dtype).name, "density": float(self.density_)}

    def _fitted_arrays(self) -> dict[str, np.ndarray]:
        if self.kind == "sparse":
            c = self.components_
            return {
                "components_data": c.data,
                "components_indices": c.indices.astype(np.int64),
                "components_indptr": c.indptr.astype(np.int64),
            }
        return {"components": self.components_}

    def _restore_fitted(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        dtype = float_dtype_from_name(meta.get("dtype"))
        r, n = self.n_components_, self.n_features_in_
        self.density_ = float(meta["density"])
        self._components_by_dtype = {}
        if self.kind != "sparse":
            self.components_ = require_array(arrays, "components", (r, n), (dtype,))
            return
        sparse = _import_scipy_sparse()
        indptr = require_array(arrays, "components_indptr", (r + 1,), (np.int64, np.int32))
        nnz = int(indptr[-1]) if indptr.size else 0
        indices = require_array(arrays, "components_indices", (nnz,), (np.int64, np.int32))
        data = require_array(arrays, "components_data", (nnz,), (dtype,))
        if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or (
            nnz and (indices.min() < 0 or indices.max() >= n)
        ):
            raise StateError("sketcher state has an inconsistent sparse components_ matrix")
        self.components_ = sparse.csr_matrix((data, indices, indptr), shape=(r, n))
