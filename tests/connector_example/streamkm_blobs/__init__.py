"""A connector package outside streamkm: ``[source] kind = "blobs"`` generates JSON-lines
records around the centers of its own ``[blobs]`` section, and ``[sinks] kind = "csv"``
(:mod:`.csv_sinks`) writes assignments and dead letters as CSV files.

It shows what a third party writes to add a source kind and a sinks kind: a module each and
an entry point of the ``streamkm.connectors`` group naming :func:`register`. Nothing under
``streamkm/`` knows them.

    [source]
    kind = "blobs"
    records = 900        # how many records the source holds

    [blobs]
    centers = [[0.0, 0.0], [8.0, 0.0]]
    spread = 0.5         # standard deviation around each center
    seed = 0
"""

from __future__ import annotations

import json
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from streamkm import registry
from streamkm.sources import LAG_RECORDS, RawRecord

from .csv_sinks import CSV_SINKS_HOOKS, CsvSinksConfig, csv_sinks

__all__ = ["BlobsSourceConfig", "BlobsConfig", "BlobsSource", "register"]

PART = "blobs"


class BlobsSourceConfig(BaseModel):
    """The ``[source]`` table of ``kind = "blobs"``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    kind: Literal["blobs"]
    records: int = Field(gt=0)


class BlobsConfig(BaseModel):
    """The ``[blobs]`` table: where the generated records lie."""

    model_config = ConfigDict(extra="forbid", strict=True)

    centers: list[list[float]] = Field(default=[[0.0, 0.0], [8.0, 0.0]], min_length=1)
    spread: float = Field(default=0.5, gt=0)
    seed: int = 0

    @model_validator(mode="after")
    def _same_dimension(self) -> BlobsConfig:
        if len({len(c) for c in self.centers}) != 1:
            raise ValueError(f"blobs.centers must all have one dimension, got {self.centers!r}")
        return self


class _BlobsPartition:
    lag_unit = LAG_RECORDS

    def __init__(self, rows: np.ndarray, start: int) -> None:
        self._rows, self._next = rows, start

    def next_batch(self, max_records: int) -> list[RawRecord]:
        stop = min(self._next + max_records, len(self._rows))
        batch = [RawRecord(json.dumps({"id": f"b{i}", "x": self._rows[i].tolist()}).encode(),
                           None, {"partition": PART, "offset": i})
                 for i in range(self._next, stop)]
        self._next = stop
        return batch

    def snapshot(self) -> dict[str, Any]:
        return {"next": self._next}

    def lag(self) -> float:
        return float(len(self._rows) - self._next)

    def close(self) -> None:
        pass


class BlobsSource:
    """``records`` rows, row ``i`` drawn around center ``i % len(centers)``."""

    def __init__(self, section: BlobsSourceConfig, blobs: BlobsConfig) -> None:
        centers = np.asarray(blobs.centers)
        noise = np.random.default_rng(blobs.seed).normal(
            0.0, blobs.spread, (section.records, centers.shape[1]))
        self.rows = centers[np.arange(section.records) % len(centers)] + noise

    def list_parts(self) -> list[str]:
        return [PART]

    def build_part(self, part_key: str, resume_state: dict[str, Any] | None) -> _BlobsPartition:
        return _BlobsPartition(self.rows, int((resume_state or {}).get("next", 0)))


def blobs_source(section: BlobsSourceConfig, config: Any, metrics: Any) -> BlobsSource:
    """The source of ``[source] kind = "blobs"``, read with the loaded ``[blobs]`` table."""
    return BlobsSource(section, config.blobs)


def register() -> None:
    """Add the ``blobs`` source kind, the ``[blobs]`` section and the ``csv`` sinks kind."""
    registry.register_source("blobs", blobs_source, section=BlobsSourceConfig,
                             lag_unit=LAG_RECORDS)
    registry.register_config_section("blobs", BlobsConfig)
    registry.register_sinks("csv", csv_sinks, section=CsvSinksConfig, hooks=CSV_SINKS_HOOKS)
