"""The sections of the service configuration (one pydantic model per TOML table); the whole
configuration, its loading and its environment overrides are :mod:`streamkm.config.schema`."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from streamkm import exceptions
from streamkm._core.param_rules import is_text_only, parameter_problem
from streamkm.cluster._params import ESTIMATOR, PARAMETER_RULES, PARAMETERS, relations_problem
from streamkm.drift.policy import DriftPolicy
from streamkm.kernels._registry import kernel_options_problem


def _non_empty_path(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"a path must not be empty, got {value!r}")
    return value


#: A filesystem path: text that is not empty (strict mode would accept only Path objects).
ConfigPath = Annotated[Path, Strict(False), BeforeValidator(_non_empty_path)]


class _Section(BaseModel):
    # strict: no bool-as-int, no "3" for 3; allow_inf_nan: durations and sizes are finite
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True,
                              allow_inf_nan=False)


#: The base of every section model (strict types, no unknown keys, finite numbers); the
#: sections connectors register derive from it too.
Section = _Section


class SourceSection(_Section):
    """The base of a ``[source]`` table: each source kind's model (registered with its
    factory, :func:`streamkm.io.registry.register_source`) adds its keys."""

    kind: str


class DecodingConfig(_Section):
    """How raw records become feature vectors, and what is rejected."""

    format: Literal["json", "csv", "float32", "json_sparse"] = "json"
    dim: int = Field(gt=0)
    id_field: str = "id"
    x_field: str = "x"
    indices_field: str = "indices"
    values_field: str = "values"
    csv_header: bool = False
    csv_id_column: int | None = Field(default=None, ge=0)
    max_abs_value: float = Field(default=1e12, gt=0)
    dtype: Literal["float32", "float64"] = "float64"


def _checked_by(problem: Callable[[str, Any], str | None], name: str, prefix: str,
                suffix: Callable[[Any], str]) -> BeforeValidator:
    """A validator that runs ``problem(name, value)``, the component's own check of one
    parameter (None, or what is wrong); its message (without ``prefix`` and
    ``suffix(value)``) says what the key accepts."""

    def validate(value: Any) -> Any:
        message = problem(name, value)
        if message is not None:
            reason = message.removeprefix(prefix).removesuffix(suffix(value))
            raise PydanticCustomError("bad_parameter", "{reason}", {"reason": reason})
        return value

    return BeforeValidator(validate)


def _parsed_as(text_only: bool, check: BeforeValidator) -> Any:
    # a key whose values are all text is read from the environment as text (see _apply_env);
    # what a value may be is the component's check, not this annotation
    return Annotated[str if text_only else Any, check]


#: The one place where ``[model]`` differs from :class:`streamkm.MiniBatchKernelKMeans`'s
#: parameters. Parameters that another key sets (None: the service never uses it).
MODEL_KEYS_ELSEWHERE: dict[str, str | None] = {
    "batch_size": "batching.batch_size",  # the batcher's batches are the estimator's batches
    "drift": "drift",  # the [drift] section (a DriftPolicy)
    "max_iter": None,  # bounds fit(); the service learns by partial_fit only
}
#: Defaults the service chooses itself (``...``: the key is required).
MODEL_SERVICE_DEFAULTS: dict[str, Any] = {
    "n_clusters": ...,  # k is the operator's decision, never a silent 8
    "random_state": 0,  # the same input and configuration give the same model, restarts too
}


class _ModelSection(_Section):
    """Parameters of :class:`streamkm.MiniBatchKernelKMeans`, derived from its signature
    and ``_parameter_constraints``: same names, same defaults (except
    :data:`MODEL_SERVICE_DEFAULTS`), each value checked by the estimator's own check, so
    that a newly registered kernel or gamma rule is accepted here without a change to this
    file. ``kernel_params`` is a table (``[model.kernel_params]``)."""

    @field_validator("kernel_params", mode="after", check_fields=False)
    @classmethod
    def _options_of_the_kernel(cls, value: Any, info: Any) -> Any:
        kernel = info.data.get("kernel")  # absent when the kernel itself was refused
        problem = None if kernel is None else kernel_options_problem(kernel, value)
        if problem is not None:
            raise PydanticCustomError("bad_parameter", "{reason}", {"reason": problem})
        return value

    def estimator_params(self) -> dict[str, Any]:
        """Keyword arguments for the estimator (every key)."""
        return {name: getattr(self, name) for name in type(self).model_fields}

    @model_validator(mode="after")
    def _valid_for_the_estimator(self) -> _ModelSection:
        problem = relations_problem(self.estimator_params())  # checks across parameters
        if problem is not None:
            raise ValueError(problem)
        return self


def _model_problem(name: str, value: Any) -> str | None:
    return parameter_problem(ESTIMATOR, PARAMETER_RULES[name], value)


def _model_section() -> type[_ModelSection]:
    fields: dict[str, Any] = {}
    for param in PARAMETERS:
        name = param.name
        if name in MODEL_KEYS_ELSEWHERE:
            continue
        check = _checked_by(_model_problem, name, f"The {name!r} parameter of {ESTIMATOR} ",
                            lambda value: f" Got {value!r} instead.")
        fields[name] = (_parsed_as(is_text_only(param), check),
                        MODEL_SERVICE_DEFAULTS.get(name, param.default))
    return create_model("ModelConfig", __base__=_ModelSection, __module__=__name__,
                        __doc__=_ModelSection.__doc__, **fields)


ModelConfig = _model_section()


#: default size of the service's first batch (its initialisation sample): what ``fit`` starts
#: from at the default batch size (3 x 1024). Streamed in 1,024-row batches, two noisy rings
#: (factor 0.6, noise 0.08) are found from a 3,072-row first batch in 9 of 10 seeds, from a
#: 1,024-row one in 0 of 10 (``bench_quality.py --sections stream-first``)
FIRST_BATCH_ROWS = 3072


class BatchingConfig(_Section):
    """Mini-batch boundaries: ``batch_size`` valid records or ``max_wait_ms``, first wins.

    Before the first model exists the batch being collected is its initialisation sample
    (kernel k-means++ seeds, the warm-up, and, without drift handling or a sketch, the
    kernel the model keeps: ``gamma="auto"``'s choice, which needs at least 500 distinct
    rows and separates noisy shapes better from more, or a graph kernel's fit), so it
    closes at ``first_batch_size`` valid records (default:
    :attr:`ServiceConfig.first_batch`) or after ``first_batch_wait_ms`` (at least
    ``max_wait_ms``): a slow stream gets time to fill it.

    ``overlap`` (default ``"auto"``): on, the model steps a batch on its own thread while
    the loop reads and decodes the next one and writes the previous one's outputs
    (:mod:`streamkm.runtime.stepping`); off, the loop reads, steps and writes one batch
    after the other on one thread; ``"auto"``: on when the process may run on at least two
    CPUs (one for the step, one for ingest and outputs), off on one.
    """

    batch_size: int = Field(default=1024, gt=0)
    first_batch_size: int | None = Field(default=None, gt=0)
    max_wait_ms: float = Field(default=500.0, gt=0)
    first_batch_wait_ms: float = Field(default=5000.0, gt=0)
    overlap: bool | Literal["auto"] = "auto"

    @property
    def first_batch_wait_s(self) -> float:
        """Seconds the model's first batch may take to fill (never below ``max_wait_ms``)."""
        return max(self.first_batch_wait_ms, self.max_wait_ms) / 1000.0


class SketchConfig(_Section):
    """Feature sketching before the model (``kind = "none"``: the model sees the records).

    ``n_components = "auto"``: ceil(n_clusters / eps^2) for the projections,
    ceil(n_clusters * ln(n_clusters) / eps^2) for ``leverage`` (both capped at
    ``decoding.dim``), n_clusters for ``svd``. ``resketch_every`` batches (and on drift when
    ``resketch_on_drift``, for ``svd`` / ``leverage`` only) the sketch is refit on a
    reservoir of ``reservoir_size`` recent records.
    """

    kind: Literal["none", "gaussian", "sign", "sparse", "svd", "leverage"] = "none"
    n_components: int | str = "auto"
    eps: float = Field(default=0.5, gt=0, le=1)
    resketch_every: int | None = Field(default=None, gt=0)
    resketch_on_drift: bool = True
    reservoir_size: int = Field(default=2048, gt=0)
    random_state: int | None = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _settings_need_a_sketch(self) -> SketchConfig:
        if self.n_components != "auto" and (isinstance(self.n_components, str)
                                            or self.n_components < 1):
            raise ValueError(f"sketch.n_components must be 'auto' or a positive int, got "
                             f"{self.n_components!r}")
        if self.kind == "none":
            others = sorted(self.model_fields_set - {"kind"})
            if others:
                raise ValueError(f"sketch.{others[0]} = {getattr(self, others[0])!r} needs "
                                 f"sketch.kind other than 'none'")
        return self

    def svd_rank(self, n_clusters: int) -> int:
        """Rank of the SVD sketch (``kind = "svd"``)."""
        return n_clusters if self.n_components == "auto" else int(self.n_components)


class _DriftSection(_Section):
    """Drift handling (``docs/drift.md``): per-cluster spread monitors, re-bisection of a
    drifting cluster by kernel 2-means from RTMM pairs, Ward merges within [k_min, k_max],
    stable cluster ids, ``split`` / ``merge`` events.

    Off unless ``enabled = true``. The other keys are the fields of
    :class:`streamkm.drift.DriftPolicy` (which documents every key), with its defaults and
    its checks.
    """

    enabled: bool = False
    _policy: DriftPolicy | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _policy_is_valid(self) -> _DriftSection:
        if not self.enabled:
            others = sorted(self.model_fields_set - {"enabled"})
            if others:
                raise ValueError(f"drift.{others[0]} = {getattr(self, others[0])!r} needs "
                                 f"drift.enabled = true")
            self._policy = None
            return self
        try:
            self._policy = DriftPolicy(**{f.name: getattr(self, f.name)
                                          for f in dataclasses.fields(DriftPolicy)})
        except exceptions.ParameterError as exc:
            raise ValueError(str(exc)) from None
        return self

    @property
    def policy(self) -> DriftPolicy | None:
        """The drift policy, the estimator's ``drift`` parameter (built once, when the
        section is validated); None when disabled."""
        return self._policy


def _drift_section() -> type[_DriftSection]:
    hints = typing.get_type_hints(DriftPolicy)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(DriftPolicy):
        check = _checked_by(DriftPolicy.field_problem, f.name, f"drift.{f.name} ",
                            lambda value: "")
        fields[f.name] = (_parsed_as(hints[f.name] is str, check), f.default)
    return create_model("DriftConfig", __base__=_DriftSection, __module__=__name__,
                        __doc__=_DriftSection.__doc__, **fields)


DriftConfig = _drift_section()


class ScaleoutConfig(_Section):
    """Scale-out mode (``docs/scaleout.md``): the processes of one Kafka consumer group
    learn one global model; one of them, elected through ``<source.group_id>-leader``,
    merges the workers' updates and publishes model versions.

    Off unless ``enabled = true`` (single-process mode, unchanged). Needs a source kind with
    a scale-out transport (the Kafka source).
    """

    enabled: bool = False
    updates_topic: str = Field(default="streamkm-updates", min_length=1)
    model_topic: str = Field(default="streamkm-model", min_length=1)
    coordination_topic: str = Field(default="streamkm-coordination", min_length=1)
    create_topics: bool = True
    member_id: str | None = Field(default=None, min_length=1, max_length=64)
    publish_every_updates: int = Field(default=16, gt=0)
    publish_interval_ms: float = Field(default=200.0, gt=0)
    max_updates_per_round: int = Field(default=64, gt=0)
    model_chunk_bytes: int = Field(default=512 * 1024, ge=1024, le=8 << 20)
    max_update_bytes: int = Field(default=8 << 20, ge=1024)
    fence_timeout_ms: int = Field(default=30000, gt=0)

    @model_validator(mode="after")
    def _keys_need_enabled(self) -> ScaleoutConfig:
        if not self.enabled:
            others = sorted(self.model_fields_set - {"enabled"})
            if others:
                raise ValueError(f"scaleout.{others[0]} = {getattr(self, others[0])!r} needs "
                                 f"scaleout.enabled = true")
        names = [self.updates_topic, self.model_topic, self.coordination_topic]
        if len(set(names)) != 3:
            raise ValueError(f"scaleout topics must be three different topics, got {names!r}")
        return self


class CheckpointConfig(_Section):
    """When and where model state plus positions are written."""

    dir: ConfigPath = Path("state/checkpoints")
    every_batches: int | None = Field(default=50, gt=0)
    every_seconds: float | None = Field(default=30.0, gt=0)
    keep: int = Field(default=3, ge=1)


class SinksSection(_Section):
    """The keys of ``[sinks]`` every sinks kind has; each kind's model (registered with its
    factory, :func:`streamkm.io.registry.register_sinks`) adds its own outputs.

    ``model`` is a file the model is published to, with any sinks kind, every
    ``model_every_batches`` batches; a key that may be ``None`` is disabled with ``""``.
    """

    #: The keys of this kind that configure a model sink (at most one may be set).
    MODEL_SINK_KEYS: ClassVar[tuple[str, ...]] = ("model",)
    #: The outputs of this kind that ``streamkm config show`` shows as ``""`` when disabled.
    SHOWN_EMPTY: ClassVar[tuple[str, ...]] = ("model",)

    kind: str
    dead_letter_max_raw_bytes: int = Field(default=65536, ge=0)
    model: ConfigPath | None = None
    model_every_batches: int = Field(default=50, gt=0)

    @model_validator(mode="after")
    def _one_model_sink(self) -> SinksSection:
        keys = self.model_sink_keys()
        if len(keys) > 1:
            given = " and ".join(f"{key} (got {str(getattr(self, key.partition('.')[2]))!r})"
                                 for key in keys)
            raise ValueError(f"set at most one of {given}")
        if "model_every_batches" in self.model_fields_set and not keys:
            options = " or ".join(f"sinks.{key}" for key in self.MODEL_SINK_KEYS)
            raise ValueError(f"sinks.model_every_batches = {self.model_every_batches!r} needs "
                             f"a model sink ({options})")
        return self

    def model_sink_keys(self) -> list[str]:
        """The keys set that configure a model sink, e.g. ``["sinks.model"]``."""
        return [f"sinks.{key}" for key in self.MODEL_SINK_KEYS
                if getattr(self, key) is not None]

    @property
    def publishes_model(self) -> bool:
        """Whether a model sink is configured."""
        return bool(self.model_sink_keys())


class MetricsConfig(_Section):
    """The Prometheus HTTP endpoint (``port = 0`` picks a free port)."""

    enabled: bool = True
    address: str = "127.0.0.1"
    port: int = Field(default=9108, ge=0, le=65535)


class UiConfig(_Section):
    """The live cluster view (``GET /`` and ``GET /api/clusters`` on the metrics listener)."""

    enabled: bool = True
    sample_size: int = Field(default=2000, ge=10, le=100_000)


class StatusConfig(_Section):
    """The periodic ``status`` log event of a running service (``interval_s = 0``: none)."""

    interval_s: float = Field(default=30.0, ge=0)


class WarningsConfig(_Section):
    """When a running service warns that it cannot be doing what was meant (a log line when a
    warning starts and one when it clears, ``streamkm_warning_active{warning}``); ``0``
    turns a warning off.

    ``source_no_files_after_s``: a ``[source] paths`` entry (file source) has matched no file
    for this long. ``reject_ratio``: more than this fraction of the last ``reject_window``
    records were rejected. ``no_accepted_records_after_s``: no record was accepted for this
    long.
    """

    source_no_files_after_s: float = Field(default=60.0, ge=0)
    reject_ratio: float = Field(default=0.5, ge=0, le=1)
    reject_window: int = Field(default=1000, gt=0)
    no_accepted_records_after_s: float = Field(default=600.0, ge=0)


class LoggingConfig(_Section):
    """Structured logs: one JSON object per line on stderr."""

    level: Literal["debug", "info", "warning", "error"] = "info"
