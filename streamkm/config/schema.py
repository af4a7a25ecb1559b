"""The service configuration: pydantic models loaded from TOML with environment overrides.

A configuration file has one table per section (``[source]``, ``[decoding]``, ``[model]``,
``[batching]``, ``[checkpoint]``, ``[sinks]``, ``[metrics]``, ``[logging]``, ``[sketch]``,
``[drift]``, ``[scaleout]``, ``[status]``, ``[warnings]``, and the sections of the installed
connectors, e.g. ``[kafka]``). The models of ``[source]`` and ``[sinks]`` are those the
connector of their ``kind`` registered (:mod:`streamkm.io.registry`). An environment
variable ``STREAMKM_<SECTION>__<KEY>`` overrides one key; its value is read as a TOML value
(``8``, ``true``, ``"text"``, ``[1, 2]``) and, if that fails, taken as a plain string.
Unknown sections or keys and bad values raise :class:`~streamkm.exceptions.ConfigError`
naming the key and quoting the value. Relative paths are resolved against the folder of the
configuration file.

The sections' models are :mod:`streamkm.config.sections` (exported from here too), secrets'
masking :mod:`streamkm.config.secrets`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    SecretStr,
    Tag,
    ValidationError,
    create_model,
    model_validator,
)

from streamkm.config.secrets import SECRET_MASK, is_secret_key, mask_value
from streamkm.config.sections import (
    BatchingConfig,
    CheckpointConfig,
    DecodingConfig,
    DriftConfig,
    FIRST_BATCH_ROWS,
    LoggingConfig,
    MODEL_KEYS_ELSEWHERE,
    MODEL_SERVICE_DEFAULTS,
    MetricsConfig,
    ModelConfig,
    ScaleoutConfig,
    Section,
    SinksSection,
    SketchConfig,
    SourceSection,
    StatusConfig,
    UiConfig,
    WarningsConfig,
    _Section,
)
from streamkm.exceptions import ConfigError
from streamkm.io import registry

__all__ = [
    "Section",
    "SourceSection",
    "SinksSection",
    "DecodingConfig",
    "ModelConfig",
    "MODEL_KEYS_ELSEWHERE",
    "MODEL_SERVICE_DEFAULTS",
    "BatchingConfig",
    "SketchConfig",
    "DriftConfig",
    "ScaleoutConfig",
    "CheckpointConfig",
    "MetricsConfig",
    "LoggingConfig",
    "StatusConfig",
    "WarningsConfig",
    "ServiceConfig",
    "ENV_PREFIX",
    "load_config",
    "service_model",
    "config_from_mapping",
    "config_hash",
    "SECRET_MASK",
    "is_secret_key",
    "mask_value",
]

ENV_PREFIX = "STREAMKM_"


#: The sections whose model is chosen by their ``kind`` key among the registered kinds.
KIND_SECTIONS = ("source", "sinks")


class ServiceConfig(_Section):
    """The whole service configuration (:func:`service_model` adds the registered kinds'
    ``[source]`` and ``[sinks]`` models and the connectors' own sections)."""

    source: SourceSection
    decoding: DecodingConfig
    model: ModelConfig
    batching: BatchingConfig = BatchingConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    sinks: SinksSection
    metrics: MetricsConfig = MetricsConfig()
    ui: UiConfig = UiConfig()
    logging: LoggingConfig = LoggingConfig()
    status: StatusConfig = StatusConfig()
    warnings: WarningsConfig = WarningsConfig()
    sketch: SketchConfig = SketchConfig()
    drift: DriftConfig = DriftConfig()
    scaleout: ScaleoutConfig = ScaleoutConfig()

    @property
    def first_batch(self) -> int:
        """Valid records the model's first batch closes at: ``batching.first_batch_size``;
        by default ``batch_size`` or ``model.init_size``, whichever is larger, and at least
        ``FIRST_BATCH_ROWS`` when the kernel the model keeps is chosen or fitted on that
        batch (no drift handling, no sketch)."""
        batching = self.batching
        if batching.first_batch_size is not None:
            return batching.first_batch_size
        rows = max(batching.batch_size, self.model.init_size or 0)
        if self.drift.enabled or self.sketch.kind != "none":
            return rows
        return max(rows, FIRST_BATCH_ROWS)

    @model_validator(mode="after")
    def _first_batch_can_initialise(self) -> ServiceConfig:
        for key in ("batch_size", "first_batch_size"):
            size = getattr(self.batching, key)
            if size is not None and size < self.model.n_clusters:
                raise ValueError(
                    f"batching.{key} ({size}) must be at least "
                    f"model.n_clusters ({self.model.n_clusters})"
                )
        return self

    @model_validator(mode="after")
    def _scaleout_needs_a_transport(self) -> ServiceConfig:
        kinds = registry.scaleout_kinds()
        if self.scaleout.enabled and self.source.kind not in kinds:
            raise ValueError(f"scaleout.enabled = true needs a source.kind with a scale-out "
                             f"transport ({' or '.join(map(repr, kinds))}), got "
                             f"{self.source.kind!r}")
        return self

    @model_validator(mode="after")
    def _model_sink_single_process(self) -> ServiceConfig:
        if self.scaleout.enabled and self.sinks.publishes_model:
            key = self.sinks.model_sink_keys()[0]
            raise ValueError(f"{key} (the model sink) is not supported with scaleout.enabled "
                             f"= true yet: the group's model versions are on "
                             f"scaleout.model_topic")
        return self

    @model_validator(mode="after")
    def _drift_fits_the_model(self) -> ServiceConfig:
        if self.drift.policy is not None:
            problem = self.drift.policy.problem_against(self.model.n_clusters)
            if problem is not None:
                raise ValueError(f"model.n_clusters and [drift]: {problem}")
        return self

    @model_validator(mode="after")
    def _sketch_fits_the_input(self) -> ServiceConfig:
        sketch, k, dim = self.sketch, self.model.n_clusters, self.decoding.dim
        if sketch.kind == "svd":
            rank = sketch.svd_rank(k)
            limits = {"decoding.dim": dim, "batching.batch_size": self.batching.batch_size,
                      "sketch.reservoir_size": sketch.reservoir_size}
            for key, limit in limits.items():
                if rank > limit:
                    raise ValueError(f"the svd sketch rank ({rank}, sketch.n_components or "
                                     f"model.n_clusters) must be at most {key} ({limit})")
        if sketch.kind == "leverage":
            for key, limit in (("decoding.dim", dim),
                               ("sketch.reservoir_size", sketch.reservoir_size)):
                if k > limit:
                    raise ValueError(f"sketch.kind = 'leverage' needs model.n_clusters ({k}) "
                                     f"at most {key} ({limit})")
        return self

    @model_validator(mode="after")
    def _connectors_accept_it(self) -> ServiceConfig:
        for check in registry.config_checks():  # e.g. what exactly-once outputs need
            check(self)
        return self

    def resolve_paths(self, base: Path) -> ServiceConfig:
        """A copy with every relative path of every section (a path key, or a list of
        paths) made absolute against ``base``."""
        def fix(p: Path) -> Path:
            p = Path(os.path.expanduser(p))
            return p if p.is_absolute() else (base / p).resolve()

        data = self.model_copy(deep=True)
        for name in type(data).model_fields:
            section = getattr(data, name)
            if not isinstance(section, BaseModel):
                continue
            for key in type(section).model_fields:
                value = getattr(section, key)
                if isinstance(value, Path):
                    setattr(section, key, fix(value))
                elif isinstance(value, list) and value and all(isinstance(v, Path)
                                                               for v in value):
                    setattr(section, key, [fix(v) for v in value])
        return data


_models: dict[tuple[Any, ...], type[ServiceConfig]] = {}


def service_model() -> type[ServiceConfig]:
    """:class:`ServiceConfig` with the sections the installed connectors registered: the
    ``[source]`` and ``[sinks]`` tables of every registered kind, and their own top-level
    tables (:mod:`streamkm.io.registry`). Loaded configurations are instances of it."""
    kinds = {"source": registry.source_sections(), "sinks": registry.sinks_sections()}
    extra = registry.config_sections()
    key = tuple(tuple(k.items()) for k in kinds.values()) + (tuple(extra.items()),)
    if key not in _models:
        _models[key] = _build_service_model(kinds, extra)
    return _models[key]


def default_kind(models: dict[str, type]) -> str | None:
    """The kind a ``[source]`` or ``[sinks]`` table that names none has: the registered
    model whose ``kind`` key has a default."""
    for kind, model in models.items():
        if not model.model_fields["kind"].is_required():
            return kind
    return None


def _kind_union(models: dict[str, type]) -> Any:
    default = default_kind(models)

    def kind_of(value: Any) -> str | None:
        kind = (value.get("kind", default) if isinstance(value, dict)
                else getattr(value, "kind", default))
        return kind if isinstance(kind, str) or kind is None else repr(kind)

    tagged = tuple(Annotated[model, Tag(kind)] for kind, model in models.items())
    union = tagged[0] if len(tagged) == 1 else typing.Union[tagged]  # noqa: UP007
    return Annotated[union, Discriminator(kind_of)]


def _build_service_model(kinds: dict[str, dict[str, type]],
                         extra: dict[str, type]) -> type[ServiceConfig]:
    fields: dict[str, Any] = {}
    for name, models in kinds.items():
        if models:
            default = default_kind(models)
            fields[name] = (_kind_union(models),
                            ... if default is None or name == "source"
                            else Field(default_factory=models[default]))
    for name, model in extra.items():
        if name in ServiceConfig.model_fields:
            raise ConfigError(f"a connector registered config section [{name}], which "
                              f"streamkm's own configuration already has")
        try:
            model()
            fields[name] = (model, Field(default_factory=model))
        except ValidationError:
            fields[name] = (model, ...)  # a table with required keys must be written
    if not fields:
        return ServiceConfig
    return create_model("ServiceConfig", __base__=ServiceConfig, __module__=__name__,
                        __doc__=ServiceConfig.__doc__, **fields)


def kind_models(section: str) -> dict[str, type]:
    """The registered models of the ``[source]`` or ``[sinks]`` table, by kind."""
    return registry.source_sections() if section == "source" else registry.sinks_sections()


def _empty_path_to_none(raw: dict[str, Any]) -> None:
    sinks = raw.get("sinks")
    if not isinstance(sinks, dict):
        return
    optional = {key for model in kind_models("sinks").values()
                for key, info in model.model_fields.items() if _admits_none(info.annotation)}
    for key in optional:
        if sinks.get(key) == "":
            sinks[key] = None


def _admits_none(annotation: Any) -> bool:
    return (typing.get_origin(annotation) in (typing.Union, types.UnionType)
            and type(None) in typing.get_args(annotation))


def _is_text_type(annotation: Any) -> bool:
    """Whether a field annotation only ever holds text (str, a path, a secret, a choice of
    strings), possibly optional."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _is_text_type(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return bool(args) and all(_is_text_type(a) for a in args)
    if origin is Literal:
        return all(isinstance(a, str) for a in typing.get_args(annotation))
    return annotation in (str, SecretStr, Path)


def _section_models(section: str) -> list[type[BaseModel]]:
    if section in KIND_SECTIONS:
        return list(kind_models(section).values())
    annotation = service_model().model_fields[section].annotation
    return [annotation] if isinstance(annotation, type) else []


def _is_text_key(section: str, key: str) -> bool:
    fields = [m.model_fields[key] for m in _section_models(section) if key in m.model_fields]
    return bool(fields) and all(_is_text_type(f.annotation) for f in fields)


def _parse_env_value(text: str, *, as_text: bool) -> Any:
    """An environment value: text as it is for a text key (TOML quotes removed), else TOML."""
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    if as_text:
        return value if isinstance(value, str) and text[:1] in "\"'" else text
    return value


def _apply_env(raw: dict[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """Merge ``STREAMKM_<SECTION>__<KEY>`` variables into ``raw``; return key -> variable."""
    origin: dict[str, str] = {}
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX):].partition("__")
        section, key = section.lower(), key.lower()
        shown = mask_value(key, env[name])
        known = service_model().model_fields
        if section not in known:
            raise ConfigError(
                f"environment variable {name}={shown!r}: unknown config section "
                f"{section!r} (known: {', '.join(known)})"
            )
        if not key:
            raise ConfigError(f"environment variable {name}={shown!r}: missing key")
        table = raw.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"config key {section!r} must be a table, got {table!r}")
        table[key] = _parse_env_value(env[name], as_text=_is_text_key(section, key))
        origin[f"{section}.{key}"] = name
    return origin


def _lookup(raw: Any, loc: tuple[Any, ...]) -> tuple[bool, Any]:
    node = raw
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return False, None
    return True, node


def _format_errors(exc: ValidationError, raw: dict[str, Any], origin: dict[str, str],
                   where: str) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        kinds = sorted(kind_models(loc[0])) if loc and loc[0] in KIND_SECTIONS else []
        if len(loc) > 1 and loc[1] in kinds:
            loc = loc[:1] + loc[2:]  # drop the union tag
        key = ".".join(str(p) for p in loc)
        found, value = _lookup(raw, loc)
        value = mask_value(key, value)
        owners = _kinds_with_key(loc) if err["type"] == "extra_forbidden" else []
        if err["type"] == "union_tag_invalid":
            found, value = _lookup(raw, loc + ("kind",))
            text = (f"config key {key + '.kind'!r} has bad value {value!r}: expected "
                    f"{' or '.join(map(repr, kinds))}")
        elif owners:  # a key of another kind of this section
            text = (f"{key} = {value!r} needs {loc[0]}.kind = "
                    f"{' or '.join(map(repr, owners))}")
        elif err["type"] == "extra_forbidden":
            text = f"unknown config key {key!r} (value {value!r})"
        elif err["type"] == "missing":
            text = f"config key {key!r} is required"
        elif err["type"] == "value_error" and len(loc) <= 1:
            # a check across keys of one section (or of several): its message names them
            text = err["msg"].removeprefix("Value error, ")
            if loc and f"{key}." not in text:
                text = f"[{key}] {text}"
            text += "".join(f" (from environment variable {var})"
                            for name, var in sorted(origin.items()) if name in text)
        elif found:
            text = f"config key {key!r} has bad value {value!r}: {err['msg']}"
        else:
            text = f"config {('key ' + repr(key)) if loc else 'file'}: {err['msg']}"
        section_key = ".".join(str(p) for p in loc[:2])
        if section_key in origin and len(loc) > 1:
            text += f" (from environment variable {origin[section_key]})"
        lines.append(text)
    return f"invalid configuration {where}: " + "; ".join(lines)


def _kinds_with_key(loc: tuple[Any, ...]) -> list[str]:
    """The kinds of ``[sinks]`` whose model has the key ``loc[1]``, for an unknown key
    ``loc`` of another kind's ``[sinks]`` table (none for another section or a nested key;
    an unknown ``[source]`` key is reported as unknown)."""
    if len(loc) != 2 or loc[0] != "sinks":
        return []
    return sorted(kind for kind, model in kind_models(loc[0]).items()
                  if loc[1] in model.model_fields)


def config_from_mapping(raw: Mapping[str, Any], *, env: Mapping[str, str] | None = None,
                        base_dir: str | os.PathLike[str] | None = None,
                        where: str = "(mapping)") -> ServiceConfig:
    """Validate a configuration given as nested dicts, after applying ``env`` overrides.

    Parameters
    ----------
    raw : mapping
        Sections as nested dicts, as read from TOML.
    env : mapping, optional
        Environment variables to apply (``STREAMKM_<SECTION>__<KEY>``); none by default.
    base_dir : path, optional
        Folder that relative paths are resolved against (default: the current folder).
    where : str
        Where the configuration came from, for error messages.

    Raises
    ------
    ConfigError
        Naming every bad or unknown key with its value.
    """
    data = json.loads(json.dumps(raw, default=str))
    origin = _apply_env(data, env or {})
    _empty_path_to_none(data)
    try:
        config = service_model().model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, data, origin, where)) from None
    return config.resolve_paths(Path(base_dir) if base_dir is not None else Path.cwd())


def load_config(path: str | os.PathLike[str], *,
                env: Mapping[str, str] | None = None) -> ServiceConfig:
    """Load and validate a TOML configuration file.

    Parameters
    ----------
    path : path
        The TOML file.
    env : mapping, optional
        Environment for overrides; ``os.environ`` when omitted.

    Raises
    ------
    ConfigError
        The file cannot be read or parsed, or a key is unknown or has a bad value.
    """
    file = Path(path)
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(file)!r}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {str(file)!r} is not valid TOML: {exc}") from None
    return config_from_mapping(raw, env=os.environ if env is None else env,
                               base_dir=file.resolve().parent, where=f"in {str(file)!r}")


def config_hash(config: ServiceConfig) -> str:
    """SHA-256 of the sections that change what the model learns (decoding, model, batching)."""
    semantic = {
        "decoding": config.decoding.model_dump(mode="json"),
        "model": config.model.model_dump(mode="json"),
        "batching": config.batching.model_dump(mode="json"),
        **({"sketch": config.sketch.model_dump(mode="json")}
           if config.sketch.kind != "none" else {}),
        **({"drift": config.drift.model_dump(mode="json")} if config.drift.enabled else {}),
    }
    return hashlib.sha256(json.dumps(semantic, sort_keys=True).encode()).hexdigest()
