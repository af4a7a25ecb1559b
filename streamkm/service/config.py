"""The service configuration: pydantic models loaded from TOML with environment overrides.

A configuration file has one table per section (``[source]``, ``[decoding]``, ``[model]``,
``[batching]``, ``[checkpoint]``, ``[sinks]``, ``[metrics]``, ``[logging]``). An environment
variable ``STREAMKM_<SECTION>__<KEY>`` overrides one key; its value is read as a TOML value
(``8``, ``true``, ``"text"``, ``[1, 2]``) and, if that fails, taken as a plain string.
Unknown sections or keys and bad values raise :class:`~streamkm.exceptions.ConfigError`
naming the key and quoting the value. Relative paths are resolved against the folder of the
configuration file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from streamkm.exceptions import ConfigError

__all__ = [
    "SourceConfig",
    "DecodingConfig",
    "ModelConfig",
    "BatchingConfig",
    "CheckpointConfig",
    "SinksConfig",
    "MetricsConfig",
    "LoggingConfig",
    "ServiceConfig",
    "ENV_PREFIX",
    "load_config",
    "config_from_mapping",
    "config_hash",
]

ENV_PREFIX = "STREAMKM_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class SourceConfig(_Section):
    """Where records come from. Only the embedded file tailer (``kind = "file"``) for now."""

    kind: Literal["file"] = "file"
    paths: list[Path] = Field(min_length=1)
    framing: Literal["lines", "fixed"] = "lines"
    record_size: int | None = Field(default=None, gt=0)
    max_record_bytes: int = Field(default=1 << 20, gt=0)
    start_at: Literal["beginning", "end"] = "beginning"
    poll_interval_ms: float = Field(default=20.0, gt=0)

    @model_validator(mode="after")
    def _fixed_needs_size(self) -> SourceConfig:
        if self.framing == "fixed" and self.record_size is None:
            raise ValueError("source.record_size (bytes per record) is required when "
                             "source.framing = 'fixed'")
        return self


class DecodingConfig(_Section):
    """How raw records become feature vectors, and what is rejected."""

    format: Literal["json", "csv", "float32"] = "json"
    dim: int = Field(gt=0)
    id_field: str = "id"
    x_field: str = "x"
    csv_header: bool = False
    csv_id_column: int | None = Field(default=None, ge=0)
    max_abs_value: float = Field(default=1e12, gt=0)
    dtype: Literal["float32", "float64"] = "float64"


class ModelConfig(_Section):
    """Parameters of :class:`streamkm.MiniBatchKernelKMeans`; unset keys keep its defaults."""

    n_clusters: int = Field(gt=0)
    kernel: Literal["rbf", "laplacian", "polynomial", "cosine", "linear"] = "rbf"
    gamma: float | None = Field(default=None, gt=0)
    degree: int | None = Field(default=None, gt=0)
    coef0: float | None = None
    tau: int | None = Field(default=None, gt=0)
    learning_rate: Literal["sqrt", "count"] | None = None
    tol: float | None = Field(default=None, ge=0)
    patience: int | None = Field(default=None, gt=0)
    init: Literal["k-means++", "farthest"] | None = None
    n_init: int | None = Field(default=None, gt=0)
    init_size: int | None = Field(default=None, gt=0)
    n_warmup: int | None = Field(default=None, ge=0)
    wake_margin: float | None = Field(default=None, ge=0)
    smoothing: float | None = Field(default=None, gt=0, le=1)
    random_state: int | None = Field(default=0, ge=0)

    def estimator_params(self) -> dict[str, Any]:
        """Keyword arguments for the estimator: the keys that are set."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class BatchingConfig(_Section):
    """Mini-batch boundaries: ``batch_size`` valid records or ``max_wait_ms``, first wins."""

    batch_size: int = Field(default=1024, gt=0)
    max_wait_ms: float = Field(default=500.0, gt=0)


class CheckpointConfig(_Section):
    """When and where model state plus positions are written."""

    dir: Path = Path("state/checkpoints")
    every_batches: int | None = Field(default=50, gt=0)
    every_seconds: float | None = Field(default=30.0, gt=0)
    keep: int = Field(default=3, ge=1)


class SinksConfig(_Section):
    """Output files (JSON lines). ``assignments`` and ``events`` may be disabled with ``""``."""

    assignments: Path | None = Path("state/assignments.jsonl")
    events: Path | None = Path("state/events.jsonl")
    dead_letter: Path = Path("state/dead_letter.jsonl")
    dead_letter_max_raw_bytes: int = Field(default=65536, ge=0)


class MetricsConfig(_Section):
    """The Prometheus HTTP endpoint (``port = 0`` picks a free port)."""

    enabled: bool = True
    address: str = "127.0.0.1"
    port: int = Field(default=9108, ge=0, le=65535)


class LoggingConfig(_Section):
    """Structured logs: one JSON object per line on stderr."""

    level: Literal["debug", "info", "warning", "error"] = "info"


class ServiceConfig(_Section):
    """The whole service configuration."""

    source: SourceConfig
    decoding: DecodingConfig
    model: ModelConfig
    batching: BatchingConfig = BatchingConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    sinks: SinksConfig = SinksConfig()
    metrics: MetricsConfig = MetricsConfig()
    logging: LoggingConfig = LoggingConfig()

    @model_validator(mode="after")
    def _first_batch_can_initialise(self) -> ServiceConfig:
        if self.batching.batch_size < self.model.n_clusters:
            raise ValueError(
                f"batching.batch_size ({self.batching.batch_size}) must be at least "
                f"model.n_clusters ({self.model.n_clusters})"
            )
        return self

    def resolve_paths(self, base: Path) -> ServiceConfig:
        """A copy with every relative path made absolute against ``base``."""
        def fix(p: Path | None) -> Path | None:
            if p is None:
                return None
            p = Path(os.path.expanduser(p))
            return p if p.is_absolute() else (base / p).resolve()

        data = self.model_copy(deep=True)
        data.source.paths = [fix(p) for p in data.source.paths]  # type: ignore[misc]
        data.checkpoint.dir = fix(data.checkpoint.dir)  # type: ignore[assignment]
        data.sinks.assignments = fix(data.sinks.assignments)
        data.sinks.events = fix(data.sinks.events)
        data.sinks.dead_letter = fix(data.sinks.dead_letter)  # type: ignore[assignment]
        return data


def _empty_path_to_none(raw: dict[str, Any]) -> None:
    sinks = raw.get("sinks")
    if isinstance(sinks, dict):
        for key in ("assignments", "events"):
            if sinks.get(key) == "":
                sinks[key] = None


def _parse_env_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _apply_env(raw: dict[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """Merge ``STREAMKM_<SECTION>__<KEY>`` variables into ``raw``; return key -> variable."""
    origin: dict[str, str] = {}
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX):].partition("__")
        section, key = section.lower(), key.lower()
        if section not in ServiceConfig.model_fields:
            raise ConfigError(
                f"environment variable {name}={env[name]!r}: unknown config section "
                f"{section!r} (known: {', '.join(ServiceConfig.model_fields)})"
            )
        if not key:
            raise ConfigError(f"environment variable {name}={env[name]!r}: missing key")
        table = raw.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"config key {section!r} must be a table, got {table!r}")
        table[key] = _parse_env_value(env[name])
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
        key = ".".join(str(p) for p in loc) or "(top level)"
        found, value = _lookup(raw, loc)
        if err["type"] == "extra_forbidden":
            text = f"unknown config key {key!r} (value {value!r})"
        elif err["type"] == "missing":
            text = f"config key {key!r} is required"
        elif found:
            text = f"config key {key!r} has bad value {value!r}: {err['msg']}"
        else:
            text = f"config {('key ' + repr(key)) if loc else 'file'}: {err['msg']}"
        section_key = ".".join(str(p) for p in loc[:2])
        if section_key in origin:
            text += f" (from environment variable {origin[section_key]})"
        lines.append(text)
    return f"invalid configuration {where}: " + "; ".join(lines)


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
        config = ServiceConfig.model_validate(data)
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
    }
    return hashlib.sha256(json.dumps(semantic, sort_keys=True).encode()).hexdigest()
