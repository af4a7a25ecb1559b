"""The sections of the service configuration (one pydantic model per TOML table); the whole
configuration, its loading and its environment overrides are :mod:`streamkm.config.schema`."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    Strict,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from sklearn.utils._param_validation import StrOptions

from streamkm.cluster import MiniBatchKernelKMeans
from streamkm.drift.policy import DriftPolicy
from streamkm.config.secrets import mask_value
from streamkm.exceptions import ParameterError
from streamkm.io.registry import client_settings_check
from streamkm.kernels._spec import check_kernel_options


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


class SourceConfig(_Section):
    """Tailed files (``kind = "file"``, the default); see :class:`KafkaSourceConfig`."""

    kind: Literal["file"] = "file"
    paths: list[ConfigPath] = Field(min_length=1)
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


class KafkaSourceConfig(_Section):
    """A Kafka consumer group (``kind = "kafka"``); connection settings are in ``[kafka]``."""

    kind: Literal["kafka"]
    topics: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    pattern: str | None = Field(default=None, min_length=1)
    group_id: str = Field(default="streamkm", min_length=1)
    group_instance_id: str | None = Field(default=None, min_length=1)
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    session_timeout_ms: int = Field(default=6000, gt=0)
    heartbeat_interval_ms: int = Field(default=1000, gt=0)
    max_poll_interval_ms: int = Field(default=30000, gt=0)
    max_poll_records: int = Field(default=2000, gt=0)
    max_record_bytes: int = Field(default=1 << 20, gt=0)
    max_buffered_records: int = Field(default=10000, gt=0)
    poll_interval_ms: float = Field(default=100.0, gt=0)
    commit_timeout_ms: int = Field(default=10000, gt=0)

    @model_validator(mode="after")
    def _topics_or_pattern(self) -> KafkaSourceConfig:
        if bool(self.topics) == (self.pattern is not None):
            raise ValueError(
                f"set exactly one of source.topics (got {self.topics!r}) and source.pattern "
                f"(got {self.pattern!r})")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"source.heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be below "
                f"source.session_timeout_ms ({self.session_timeout_ms})")
        return self


def _source_kind(value: Any) -> str:
    kind = value.get("kind", "file") if isinstance(value, dict) else getattr(value, "kind", "file")
    return kind if isinstance(kind, str) else repr(kind)


#: Keys of ``[kafka.consumer]`` / ``[kafka.producer]`` that streamkm sets itself.
_MANAGED_KAFKA_KEYS = frozenset({
    "bootstrap_servers", "group_id", "enable_auto_commit", "key_deserializer",
    "value_deserializer", "key_serializer", "value_serializer", "default_offset_commit_callback",
    "kafka_client", "selector", "metric_reporters", "ssl_context", "sasl_oauth_token_provider",
})


class KafkaConfig(_Section):
    """Connection to the Kafka cluster, shared by the Kafka source and the Kafka sinks.

    ``consumer`` and ``producer`` pass any other kafka-python ``KafkaConsumer`` /
    ``KafkaProducer`` setting through (unknown names are errors).
    """

    bootstrap_servers: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=lambda: ["127.0.0.1:9092"], min_length=1)
    client_id: str = Field(default="streamkm", min_length=1)
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER",
                            "GSSAPI"] | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: SecretStr | None = None
    ssl_cafile: ConfigPath | None = None
    ssl_certfile: ConfigPath | None = None
    ssl_keyfile: ConfigPath | None = None
    ssl_crlfile: ConfigPath | None = None
    ssl_password: SecretStr | None = None
    ssl_check_hostname: bool = True
    api_version: str | None = Field(default=None, pattern=r"^\d+(\.\d+){1,2}$")
    request_timeout_ms: int = Field(default=30000, gt=0)
    bootstrap_timeout_ms: int = Field(default=5000, gt=0)
    reconnect_backoff_ms: int = Field(default=50, gt=0)
    reconnect_backoff_max_ms: int = Field(default=5000, gt=0)
    #: Exactly-once Kafka outputs (docs/service.md, Kafka): unique per process, stable across
    #: its restarts (a restart fences the previous incarnation's producer).
    transactional_id: str | None = Field(default=None, min_length=1)
    transaction_timeout_ms: int = Field(default=60000, gt=0)
    #: While no transaction commits, how often the producer checks with the transaction
    #: coordinator that it was not fenced (connectors/kafka_sinks.py).
    transaction_check_interval_ms: int = Field(default=5000, gt=0)
    consumer: dict[str, Any] = Field(default_factory=dict)
    producer: dict[str, Any] = Field(default_factory=dict)

    @field_validator("consumer", "producer")
    @classmethod
    def _known_client_settings(cls, value: dict[str, Any], info: Any) -> dict[str, Any]:
        if not value:
            return value
        for key in value:
            if key in _MANAGED_KAFKA_KEYS or key in cls.model_fields:
                shown = mask_value(key, value[key])
                raise ValueError(f"kafka.{info.field_name}.{key} = {shown!r} is set by "
                                 f"streamkm or in [kafka]/[source], not here")
        check = client_settings_check("kafka")  # the connector knows its client's settings
        if check is not None:
            check(info.field_name, value)
        return value

    @model_validator(mode="after")
    def _sasl_complete(self) -> KafkaConfig:
        if self.security_protocol.startswith("SASL_"):
            if self.sasl_mechanism is None:
                raise ValueError(f"kafka.sasl_mechanism is required with "
                                 f"kafka.security_protocol = {self.security_protocol!r}")
            if self.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and (
                    self.sasl_plain_username is None or self.sasl_plain_password is None):
                raise ValueError(f"kafka.sasl_plain_username and kafka.sasl_plain_password "
                                 f"are required with kafka.sasl_mechanism = "
                                 f"{self.sasl_mechanism!r}")
        return self

    def client_settings(self) -> dict[str, Any]:
        """Keyword arguments common to kafka-python's consumer and producer."""
        settings: dict[str, Any] = {
            "bootstrap_servers": list(self.bootstrap_servers), "client_id": self.client_id,
            "security_protocol": self.security_protocol,
            "ssl_check_hostname": self.ssl_check_hostname,
            "request_timeout_ms": self.request_timeout_ms,
            "bootstrap_timeout_ms": self.bootstrap_timeout_ms,
            "reconnect_backoff_ms": self.reconnect_backoff_ms,
            "reconnect_backoff_max_ms": self.reconnect_backoff_max_ms,
        }
        if self.sasl_mechanism is not None:
            settings["sasl_mechanism"] = self.sasl_mechanism
        if self.sasl_plain_username is not None:
            settings["sasl_plain_username"] = self.sasl_plain_username
        for name in ("sasl_plain_password", "ssl_password"):
            secret = getattr(self, name)
            if secret is not None:
                settings[name] = secret.get_secret_value()
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_crlfile"):
            path = getattr(self, name)
            if path is not None:
                settings[name] = str(path)
        if self.api_version is not None:
            settings["api_version"] = tuple(int(p) for p in self.api_version.split("."))
        return settings


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


def _checked_by(check: Callable[[str, Any], None], name: str, prefix: str,
                suffix: Callable[[Any], str]) -> BeforeValidator:
    """A validator that runs ``check(name, value)``, the component's own check of one
    parameter; its message (without ``prefix`` and ``suffix(value)``) says what the key
    accepts."""

    def validate(value: Any) -> Any:
        try:
            check(name, value)
        except ParameterError as exc:
            reason = str(exc).removeprefix(prefix).removesuffix(suffix(value))
            raise PydanticCustomError("bad_parameter", "{reason}", {"reason": reason}) from None
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
        if kernel is not None:
            try:
                check_kernel_options(kernel, value)
            except ParameterError as exc:
                raise PydanticCustomError("bad_parameter", "{reason}",
                                          {"reason": str(exc)}) from None
        return value

    def estimator_params(self) -> dict[str, Any]:
        """Keyword arguments for the estimator (every key)."""
        return {name: getattr(self, name) for name in type(self).model_fields}

    @model_validator(mode="after")
    def _valid_for_the_estimator(self) -> _ModelSection:
        try:  # the estimator's checks across parameters
            MiniBatchKernelKMeans.from_params(self.estimator_params())
        except ParameterError as exc:
            raise ValueError(str(exc)) from None
        return self


def _model_section() -> type[_ModelSection]:
    estimator = MiniBatchKernelKMeans
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(estimator.__init__).parameters.items():
        if name == "self" or name in MODEL_KEYS_ELSEWHERE:
            continue
        constraints = estimator._parameter_constraints[name]
        check = _checked_by(estimator.check_param, name,
                            f"The {name!r} parameter of {estimator.__name__} ",
                            lambda value: f" Got {value!r} instead.")
        text_only = all(isinstance(c, StrOptions) for c in constraints)
        fields[name] = (_parsed_as(text_only, check),
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

    ``overlap`` (default on): the model steps a batch on its own thread while the next one
    is read and decoded (:mod:`streamkm.runtime.stepping`); off, the loop reads, steps and
    writes one batch after the other on one thread.
    """

    batch_size: int = Field(default=1024, gt=0)
    first_batch_size: int | None = Field(default=None, gt=0)
    max_wait_ms: float = Field(default=500.0, gt=0)
    first_batch_wait_ms: float = Field(default=5000.0, gt=0)
    overlap: bool = True

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
        except ParameterError as exc:
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
        check = _checked_by(lambda name, value: DriftPolicy.check_field(name, value), f.name,
                            f"drift.{f.name} ", lambda value: "")
        fields[f.name] = (_parsed_as(hints[f.name] is str, check), f.default)
    return create_model("DriftConfig", __base__=_DriftSection, __module__=__name__,
                        __doc__=_DriftSection.__doc__, **fields)


DriftConfig = _drift_section()


class ScaleoutConfig(_Section):
    """Scale-out mode (``docs/scaleout.md``): the processes of one Kafka consumer group
    learn one global model; one of them, elected through ``<source.group_id>-leader``,
    merges the workers' updates and publishes model versions.

    Off unless ``enabled = true`` (single-process mode, unchanged). Needs a Kafka source.
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


class SinksConfig(_Section):
    """Output files (JSON lines, ``kind = "file"``) or Kafka topics (``kind = "kafka"``).

    ``assignments`` / ``events`` (files) and ``assignments_topic`` / ``events_topic``
    (topics) may be disabled with ``""``.
    """

    kind: Literal["file", "kafka"] = "file"
    assignments: ConfigPath | None = Path("state/assignments.jsonl")
    events: ConfigPath | None = Path("state/events.jsonl")
    dead_letter: ConfigPath = Path("state/dead_letter.jsonl")
    dead_letter_max_raw_bytes: int = Field(default=65536, ge=0)
    assignments_topic: str | None = "streamkm-assignments"
    events_topic: str | None = "streamkm-events"
    dead_letter_topic: str = Field(default="streamkm-dead-letter", min_length=1)
    flush_timeout_ms: int = Field(default=30000, gt=0)
    model: ConfigPath | None = None
    model_topic: str | None = Field(default=None, min_length=1)
    model_every_batches: int = Field(default=50, gt=0)

    @model_validator(mode="after")
    def _topics_only_for_kafka(self) -> SinksConfig:
        topic_keys = {"assignments_topic", "events_topic", "dead_letter_topic",
                      "flush_timeout_ms", "model_topic"} & self.model_fields_set
        if self.kind == "file" and topic_keys:
            key = sorted(topic_keys)[0]
            raise ValueError(f"sinks.{key} = {getattr(self, key)!r} needs sinks.kind = 'kafka'")
        return self

    @model_validator(mode="after")
    def _one_model_sink(self) -> SinksConfig:
        if self.model is not None and self.model_topic is not None:
            raise ValueError(f"set at most one of sinks.model (got {str(self.model)!r}) and "
                             f"sinks.model_topic (got {self.model_topic!r})")
        if "model_every_batches" in self.model_fields_set and not self.publishes_model:
            raise ValueError(f"sinks.model_every_batches = {self.model_every_batches!r} needs "
                             f"a model sink (sinks.model or sinks.model_topic)")
        return self

    @property
    def publishes_model(self) -> bool:
        """Whether a model sink is configured."""
        return self.model is not None or self.model_topic is not None


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
