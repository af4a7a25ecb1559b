"""Every estimator parameter and every drift policy field has one definition: settable
from the service's TOML and from the River adapter, with the same default, and a bad value
gives the same error in the engine, the configuration and the adapter."""

from __future__ import annotations

import dataclasses
import inspect
import json
import typing
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import pytest
from sklearn.utils._param_validation import Interval, StrOptions

from streamkm import MiniBatchKernelKMeans
from streamkm.config.schema import (
    MODEL_KEYS_ELSEWHERE,
    MODEL_SERVICE_DEFAULTS,
    BatchingConfig,
    DriftConfig,
    ModelConfig,
    load_config,
)
from streamkm.drift import DriftPolicy
from streamkm.exceptions import ConfigError, ParameterError

pytest.importorskip("river")
from streamkm.river import RIVER_NAMES, KernelKMeans  # noqa: E402

pytestmark = pytest.mark.unit

ENGINE_DEFAULTS = {name: p.default for name, p in
                   inspect.signature(MiniBatchKernelKMeans.__init__).parameters.items()
                   if name != "self"}
POLICY_FIELDS = {f.name: f for f in dataclasses.fields(DriftPolicy)}
POLICY_TYPES = typing.get_type_hints(DriftPolicy)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _load(tmp_path: Path, model: dict[str, Any], drift: dict[str, Any] | None = None,
          env: dict[str, str] | None = None) -> Any:
    lines = ['[source]', 'paths = ["in.jsonl"]', '[decoding]', 'dim = 2', '[model]']
    lines += [f"{k} = {_toml(v)}" for k, v in {"n_clusters": 3, **model}.items()]
    if drift is not None:
        lines += ["[drift]", "enabled = true"] + [f"{k} = {_toml(v)}" for k, v in drift.items()]
    path = tmp_path / "streamkm.toml"
    path.write_text("\n".join(lines) + "\n")
    return load_config(path, env=env or {})


def _other_valid(name: str, default: Any) -> Any:
    """A value of the parameter other than its default that the estimator accepts."""
    for c in MiniBatchKernelKMeans._parameter_constraints[name]:
        if isinstance(c, StrOptions):
            candidate: Any = sorted(set(c.options) - {default})[0]
        elif isinstance(c, Interval) and c.type is Integral:
            candidate = (default if isinstance(default, int) else (c.left or 0)) + 1
        elif isinstance(c, Interval):
            candidate = default / 2 if isinstance(default, float) else 0.5
        elif c is dict:
            candidate = {"n_neighbors": 7}
        elif c == "boolean":
            candidate = not default
        else:
            continue
        try:
            MiniBatchKernelKMeans.check_param(name, candidate)
        except ParameterError:
            continue
        return candidate
    raise AssertionError(f"no other valid value found for {name}")


def _bad_values(name: str) -> list[Any]:
    """Values the estimator refuses: a bool for a number, an unknown text, out of range."""
    constraints = MiniBatchKernelKMeans._parameter_constraints[name]
    bad: list[Any] = [1 if "boolean" in constraints else True, "no-such-option"]
    for c in constraints:
        if isinstance(c, Interval) and c.type is Integral and c.left is not None:
            bad.append(c.left - 1)
    return bad


MODEL_PARAMS = [n for n in ENGINE_DEFAULTS if n not in MODEL_KEYS_ELSEWHERE]


def test_every_engine_parameter_is_a_model_key_or_named_elsewhere() -> None:
    assert set(ENGINE_DEFAULTS) == set(ModelConfig.model_fields) | set(MODEL_KEYS_ELSEWHERE)
    assert not set(ModelConfig.model_fields) & set(MODEL_KEYS_ELSEWHERE)
    # the batcher's batch is the estimator's batch, with the estimator's default
    assert MODEL_KEYS_ELSEWHERE["batch_size"] == "batching.batch_size"
    assert BatchingConfig().batch_size == ENGINE_DEFAULTS["batch_size"]
    assert set(DriftConfig.model_fields) == {"enabled"} | set(POLICY_FIELDS)


@pytest.mark.parametrize("name", list(ENGINE_DEFAULTS))
def test_engine_parameter_same_default_in_config_and_adapter(name: str) -> None:
    river = KernelKMeans()
    assert getattr(river, RIVER_NAMES.get(name, name)) == ENGINE_DEFAULTS[name]
    if name in ModelConfig.model_fields:
        field = ModelConfig.model_fields[name]
        expected = MODEL_SERVICE_DEFAULTS.get(name, ENGINE_DEFAULTS[name])
        if expected is ...:
            assert field.is_required()
        else:
            assert field.default == expected


@pytest.mark.parametrize("name", list(ENGINE_DEFAULTS))
def test_engine_parameter_settable_from_toml_environment_and_adapter(
        name: str, tmp_path: Path) -> None:
    if name == "drift":
        value: Any = {"k_max": 9}
        assert _load(tmp_path, {}, {"k_max": 9}).drift.policy == DriftPolicy(k_max=9)
    else:
        value = _other_valid(name, ENGINE_DEFAULTS[name])
    # kernel options are those of the kernel they are for
    context = {"kernel": "heat"} if name == "kernel_params" else {}
    if name in ModelConfig.model_fields:
        assert getattr(_load(tmp_path, {**context, name: value}).model, name) == value
        env = {f"STREAMKM_MODEL__{name.upper()}": _toml(value)}
        assert getattr(_load(tmp_path, context, env=env).model, name) == value
    elif name == "batch_size":
        path = tmp_path / "b.toml"
        path.write_text('[source]\npaths = ["in.jsonl"]\n[decoding]\ndim = 2\n[model]\n'
                        f'n_clusters = 3\n[batching]\nbatch_size = {value}\n')
        assert load_config(path, env={}).batching.batch_size == value
    adapter = KernelKMeans(**context, **{RIVER_NAMES.get(name, name): value})
    assert adapter._template.get_params()[name] == value


@pytest.mark.parametrize("name", MODEL_PARAMS)
def test_bad_engine_parameter_same_error_in_config_and_adapter(
        name: str, tmp_path: Path) -> None:
    for bad in _bad_values(name):
        with pytest.raises(ParameterError) as engine:
            MiniBatchKernelKMeans.from_params({name: bad})
        message = str(engine.value)
        reason = message.removeprefix(f"The {name!r} parameter of MiniBatchKernelKMeans ")
        reason = reason.removesuffix(f" Got {bad!r} instead.")
        with pytest.raises(ConfigError) as config:
            _load(tmp_path, {name: bad})
        assert f"config key 'model.{name}' has bad value {bad!r}: {reason}" in str(config.value)
        with pytest.raises(ParameterError) as river:
            KernelKMeans(**{RIVER_NAMES.get(name, name): bad})
        assert str(river.value) == message


@pytest.mark.parametrize("name", list(POLICY_FIELDS))
def test_policy_field_same_default_settable_everywhere(name: str, tmp_path: Path) -> None:
    default = POLICY_FIELDS[name].default
    assert DriftConfig.model_fields[name].default == default
    kind = POLICY_TYPES[name]
    if kind is str:
        value: Any = "rscd"
    elif default is None:
        value = 9 if kind == (int | None) else 0.25
    else:
        value = default + 1 if kind is int else default / 2
    assert getattr(_load(tmp_path, {}, {name: value}).drift.policy, name) == value
    env = {"STREAMKM_DRIFT__ENABLED": "true", f"STREAMKM_DRIFT__{name.upper()}": _toml(value)}
    assert getattr(_load(tmp_path, {}, env=env).drift.policy, name) == value
    adapter = KernelKMeans(drift={name: value})
    assert getattr(adapter._template._drift_policy(), name) == value


@pytest.mark.parametrize("name", list(POLICY_FIELDS))
def test_bad_policy_field_same_error_everywhere(name: str, tmp_path: Path) -> None:
    for bad in ([True, -1, "no-such-option"] if POLICY_TYPES[name] is not str
                else ["no-such-option", 3]):
        with pytest.raises(ParameterError) as policy:
            DriftPolicy(**{name: bad})
        message = str(policy.value)
        assert message.startswith(f"drift.{name} ")
        with pytest.raises(ConfigError) as config:
            _load(tmp_path, {}, {name: bad})
        reason = message.removeprefix(f"drift.{name} ")
        assert f"config key 'drift.{name}' has bad value {bad!r}: {reason}" in str(config.value)
        for engine in (lambda: MiniBatchKernelKMeans.from_params({"drift": {name: bad}}),
                       lambda: KernelKMeans(drift={name: bad})):
            with pytest.raises(ParameterError) as error:
                engine()
            assert str(error.value) == message
