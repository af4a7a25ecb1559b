"""The configuration a checkpoint was written under against the one starting now.

A restore takes the model from the checkpoint with every parameter it was built with, so a
change to a setting that defines the model would silently not apply. Those settings are
**model-defining**:

- every ``[model]`` key (the estimator's parameters: k, kernel, gamma, tau, learning rate,
  convergence monitor, initialisation, seed),
- ``batching.batch_size`` (an estimator parameter: learning rate and default window),
- ``decoding.dim`` and ``decoding.dtype`` (the model's input space and precision),
- ``[sketch]`` except ``resketch_every`` and ``resketch_on_drift`` (the sketch is restored
  from the checkpoint; the schedule is taken from the configuration),
- ``[drift]`` (the drift policy is part of the restored model).

Everything else is **harmless** and applies on restart: how records are found and parsed
(``[source]``, the other ``[decoding]`` keys), ``batching.max_wait_ms``, ``batching.first_batch_size``, ``batching.first_batch_wait_ms``, ``batching.overlap``, ``[checkpoint]``,
``[sinks]``, ``[metrics]``, ``[logging]``, ``[scaleout]``, the connectors' own sections (``[kafka]``).

Checkpoints store the effective configuration (:func:`~streamkm.config.view.
flatten_config`, secrets masked) under ``"config"``. A key the stored configuration lacks
(unset then, or unknown to the version that wrote it) reads as its default
(:func:`~streamkm.config.view.config_defaults`). Older checkpoints lack it: their
model-defining values are then read from the model's own parameters, for the keys the
current configuration sets, and harmless changes cannot be listed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from streamkm.config.schema import ModelConfig, ServiceConfig
from streamkm.config.view import config_defaults, flatten_config
from streamkm.exceptions import ConfigError
from streamkm.logs import log_event

__all__ = ["ConfigDiff", "is_model_defining", "compare_configs", "checkpoint_config",
           "check_against_checkpoint"]

_log = logging.getLogger("streamkm.service")

_MODEL_DEFINING_SECTIONS = ("model", "sketch", "drift")
_MODEL_DEFINING_KEYS = frozenset({"batching.batch_size", "decoding.dim", "decoding.dtype"})
_APPLIED_ON_RESTORE = frozenset({"sketch.resketch_every", "sketch.resketch_on_drift"})
_UNSET = object()
_SWITCHES = {"sketch": "sketch.kind", "drift": "drift.enabled", "scaleout": "scaleout.enabled"}


def is_model_defining(key: str) -> bool:
    """Whether a ``section.key`` setting is part of the checkpointed model."""
    if key in _APPLIED_ON_RESTORE:
        return False
    return key in _MODEL_DEFINING_KEYS or key.split(".", 1)[0] in _MODEL_DEFINING_SECTIONS


@dataclass
class ConfigDiff:
    """Differences between a checkpoint's configuration and the current one, as lines
    ``key: checkpoint OLD, config NEW``."""

    model_defining: list[str] = field(default_factory=list)
    harmless: list[str] = field(default_factory=list)
    complete: bool = True  # False: the checkpoint did not store its configuration

    def __bool__(self) -> bool:
        return bool(self.model_defining or self.harmless)


def _shown(value: Any) -> str:
    return "unset" if value is _UNSET else repr(value)


def _hidden_by_switch(key: str, old: Any, new: Any, checkpoint: dict[str, Any],
                      current: dict[str, Any]) -> bool:
    """A key of a section switched on or off (``sketch.kind``, ``drift.enabled``, ...)
    that only one side has: the switch's own line says it all."""
    section = key.split(".", 1)[0]
    switch = _SWITCHES.get(section)
    if switch is None or key == switch or (old is not _UNSET and new is not _UNSET):
        return False
    return checkpoint.get(switch, _UNSET) != current.get(switch, _UNSET)


def compare_configs(checkpoint: dict[str, Any], current: dict[str, Any], *,
                    complete: bool = True) -> ConfigDiff:
    """Compare two flat configurations (``{"section.key": value}``).

    With ``complete=False`` (a configuration rebuilt from an older checkpoint's model) only
    keys present in both are compared.
    """
    diff = ConfigDiff(complete=complete)
    keys = sorted(set(checkpoint) | set(current)) if complete else sorted(
        set(checkpoint) & set(current))
    for key in keys:
        old, new = checkpoint.get(key, _UNSET), current.get(key, _UNSET)
        if old == new or _hidden_by_switch(key, old, new, checkpoint, current):
            continue
        line = f"{key}: checkpoint {_shown(old)}, config {_shown(new)}"
        (diff.model_defining if is_model_defining(key) else diff.harmless).append(line)
    return diff


def checkpoint_config(meta: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The flat configuration a checkpoint was written under, and whether it is complete.

    Older checkpoints did not store it: the model-defining part is read back from the
    model's parameters (and nothing when the model was not initialised).
    """
    stored = meta.get("config")
    if isinstance(stored, dict):
        return stored, True
    model = meta.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("params"), dict):
        return {}, False
    params = model["params"]
    flat: dict[str, Any] = {f"model.{k}": v for k, v in params.items()
                            if k in ModelConfig.model_fields}
    if "batch_size" in params:
        flat["batching.batch_size"] = params["batch_size"]
    flat["drift.enabled"] = params.get("drift") is not None
    if meta.get("sketch") is None and model.get("n_features_in") is not None:
        flat["decoding.dim"] = int(model["n_features_in"])
    if model.get("dtype") is not None:
        flat["decoding.dtype"] = model["dtype"]
    return flat, False


def _refusal(path: str, diff: ConfigDiff) -> str:
    lines = "\n".join(f"  {line}" for line in diff.model_defining)
    return (f"the configuration changed since checkpoint {path!r} in settings that define "
            f"the model:\n{lines}\nThe checkpointed model keeps the values it was built "
            f"with. Either revert these settings (config file or STREAMKM_<SECTION>__<KEY> "
            f"variables), or start a fresh model with --reset-model (`streamkm run "
            f"--reset-model -c FILE`; keeps the input positions and the outputs written so "
            f"far, discards the old model)")


def check_against_checkpoint(config: ServiceConfig, meta: dict[str, Any], path: str, *,
                             reset_model: bool = False, log: bool = True) -> ConfigDiff:
    """Compare ``config`` with a checkpoint's; log harmless changes (unless ``log`` is
    False), refuse model-defining ones unless ``reset_model``.

    Raises
    ------
    ConfigError
        A model-defining setting changed and ``reset_model`` is False (the message lists
        the differences and the two ways forward).
    """
    stored, complete = checkpoint_config(meta)
    current = flatten_config(config)
    if complete:
        defaults = config_defaults()
        stored = {**{k: defaults[k] for k in current if k in defaults}, **stored}
    diff = compare_configs(stored, current, complete=complete)
    if diff.model_defining and not reset_model:
        raise ConfigError(_refusal(path, diff))
    if diff and log:
        log_event(_log, "info" if not diff.model_defining else "warning",
                  "config_changed_since_checkpoint", checkpoint=path,
                  model_defining=diff.model_defining, harmless=diff.harmless,
                  complete=diff.complete)
    return diff
