"""The effective configuration as an operator sees it: TOML for ``streamkm config show``
and flat ``section.key`` values for checkpoints and diffs, secrets always masked.

Only keys that take effect are shown: ``[sketch]`` with ``kind = "none"``, ``[drift]`` and
``[scaleout]`` while disabled show their switch only, ``[source]`` and ``[sinks]`` show the
keys of their kind, ``sinks.model_every_batches`` shows only with a model sink, a disabled
output of ``[sinks]`` shows as ``""``, other keys left unset (None, such as
``model.init_size``) are omitted. The TOML loads back into the same
configuration (secrets aside, which read ``**********``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from streamkm.config.schema import (
    KIND_SECTIONS,
    SECRET_MASK,
    ServiceConfig,
    SinksSection,
    SourceSection,
    default_kind,
    kind_models,
    mask_value,
    service_model,
)

__all__ = ["config_sections", "flatten_config", "config_defaults", "config_to_toml"]


def _plain(key: str, value: Any) -> Any:
    if isinstance(value, SecretStr):
        return SECRET_MASK
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list):
        return [_plain(key, v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(f"{key}.{k}", v) for k, v in mask_value(key, value).items()}
    return mask_value(key, value)


def _keys(name: str, section: Any) -> list[str]:
    """A section's keys in the order shown: for ``[source]`` / ``[sinks]`` the kind, then
    the kind's own keys, then those every kind has (a kind's own model sink keys after
    ``model``)."""
    keys = list(type(section).model_fields)
    if name not in KIND_SECTIONS:
        return keys
    base = next((c for c in type(section).__mro__ if c in (SourceSection, SinksSection)), None)
    common = [key for key in (base.model_fields if base else {}) if key != "kind"]
    model_keys = [k for k in getattr(section, "MODEL_SINK_KEYS", ()) if k not in common]
    own = [k for k in keys if k != "kind" and k not in common and k not in model_keys]
    ordered = ["kind", *own]
    for key in common:
        ordered += [key, *model_keys] if key == "model" else [key]
    return ordered


def _section_items(name: str, section: Any) -> dict[str, Any]:
    items: dict[str, Any] = {}
    for key in _keys(name, section):
        value = getattr(section, key)
        if name == "sinks":
            if key == "model_every_batches" and not section.publishes_model:
                continue
            if value is None and key in section.SHOWN_EMPTY:  # disabled with ""
                items[key] = ""
                continue
        if value is None:
            continue
        items[key] = _plain(f"{name}.{key}", value)
    switch = {"sketch": ("kind", "none"), "drift": ("enabled", False),
              "scaleout": ("enabled", False)}.get(name)
    if switch is not None and items.get(switch[0]) == switch[1]:
        return {switch[0]: switch[1]}
    return items


def config_sections(config: ServiceConfig) -> dict[str, dict[str, Any]]:
    """Every section's effective keys as plain TOML/JSON values, secrets masked."""
    return {name: _section_items(name, getattr(config, name))
            for name in type(config).model_fields}


def flatten_config(config: ServiceConfig) -> dict[str, Any]:
    """``{"section.key": value}`` of :func:`config_sections` (tables stay one value)."""
    return {f"{name}.{key}": value for name, items in config_sections(config).items()
            for key, value in items.items()}


def config_defaults() -> dict[str, Any]:
    """``{"section.key": default}`` of every key that has a default other than None, in the
    form :func:`flatten_config` gives values (``[source]`` has none: its kind decides;
    ``[sinks]`` those of the kind a table without ``kind`` has)."""
    defaults: dict[str, Any] = {}
    for name, field in service_model().model_fields.items():
        section = field.annotation
        if name in KIND_SECTIONS:
            models = kind_models(name)
            kind = default_kind(models) if name != "source" else None
            section = models.get(kind) if kind is not None else None
        if not isinstance(section, type):
            continue
        for key, info in section.model_fields.items():
            if info.is_required():
                continue
            value = info.get_default(call_default_factory=True)
            if value is not None:
                defaults[f"{name}.{key}"] = _plain(f"{name}.{key}", value)
    return defaults


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}"
                               for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {value!r}")


def config_to_toml(config: ServiceConfig, *, kernel_note: str | None = None) -> str:
    """The effective configuration as TOML, secrets masked (``streamkm config show``);
    ``kernel_note`` becomes a comment after ``model.kernel`` (the kernel in use)."""
    lines: list[str] = []
    for name, items in config_sections(config).items():
        tables = {k: v for k, v in items.items() if isinstance(v, dict)}
        lines.append(f"[{name}]")
        for key, value in items.items():
            if key in tables:
                continue
            note = f"  # {kernel_note}" if kernel_note and (name, key) == ("model",
                                                                         "kernel") else ""
            lines.append(f"{key} = {_toml_value(value)}{note}")
        for key, table in tables.items():
            if table:
                lines.append(f"\n[{name}.{key}]")
                lines.extend(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in table.items())
        lines.append("")
    return "\n".join(lines)
