"""``[model]`` is validated by the estimator's own parameter constraints (one source of
truth): what the estimator accepts, the configuration accepts, and errors name the key."""

from __future__ import annotations

import pytest

from streamkm.config.schema import config_from_mapping
from streamkm.exceptions import ConfigError

pytestmark = pytest.mark.unit


def _config(**model: object) -> dict:
    return {"source": {"paths": ["in.jsonl"]}, "decoding": {"format": "json", "dim": 2},
            "model": {"n_clusters": 3, **model}}


@pytest.mark.parametrize("model", [{"kernel": "heat"}, {"kernel": "knn"}, {"kernel": "anchor"},
                                   {"kernel": "level_set"}, {"gamma": "eigengap"},
                                   {"gamma": 0.5}, {"tau": 50}])
def test_what_the_estimator_accepts_the_config_accepts(model: dict) -> None:
    config = config_from_mapping(_config(**model), env={})
    assert config.model.estimator_params()["n_clusters"] == 3


@pytest.mark.parametrize("model, words", [
    ({"kernel": "gaussian"}, ["model", "kernel", "gaussian"]),
    ({"gamma": "widest"}, ["model", "gamma", "widest"]),
    ({"smoothing": 0}, ["model", "smoothing"]),
])
def test_what_the_estimator_refuses_is_a_config_error_naming_key_and_value(
        model: dict, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping(_config(**model), env={})
    for word in words:
        assert word in str(info.value)


def test_a_newly_registered_kernel_is_accepted_without_touching_the_config() -> None:
    from streamkm.kernels import KernelType, _registry, register

    with pytest.raises(ConfigError):
        config_from_mapping(_config(kernel="test-cfg-linear"), env={})

    @register
    class Doubled(KernelType):
        name = "test-cfg-linear"
        explicit_features = True

        def block(self, params, x, y, x_sq, y_sq):
            return 2.0 * (x @ y.T)

        def diagonal(self, params, x):
            return 2.0 * (x * x).sum(axis=1)

    try:
        config = config_from_mapping(_config(kernel="test-cfg-linear"), env={})
        assert config.model.kernel == "test-cfg-linear"
    finally:
        _registry._REGISTRY.pop("test-cfg-linear")


def test_kernel_params_from_toml_reach_the_fitted_kernel() -> None:
    import numpy as np

    from streamkm.runtime.wiring import build_model

    config = config_from_mapping(_config(kernel="heat", kernel_params={"n_neighbors": 12}),
                                 env={})
    model = build_model(config.model, 300)
    model.partial_fit(np.random.default_rng(0).normal(size=(300, 2)))
    assert model.kernel_.name == "heat" and model.kernel_.options["n_neighbors"] == 12


def test_an_option_the_kernel_lacks_names_the_key_and_the_options_it_has() -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping(_config(kernel="heat"),
                            env={"STREAMKM_MODEL__KERNEL_PARAMS": "{n_neighbours = 12}"})
    message = str(info.value)
    assert "config key 'model.kernel_params' has bad value {'n_neighbours': 12}" in message
    assert "'n_neighbors'" in message and "STREAMKM_MODEL__KERNEL_PARAMS" in message
