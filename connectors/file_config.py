"""The configuration of the file connector: the ``[source]`` table of ``kind = "file"``
(tailed files, the default kind) and the ``[sinks]`` table of ``kind = "file"`` (JSON-lines
output files, the default), with the hooks the core asks about them
(:class:`streamkm.registry.KindHooks`)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from streamkm.config.sections import ConfigPath, SinksSection, SourceSection
from streamkm.registry import KindHooks

__all__ = ["FileSourceConfig", "FileSinksConfig", "FILE_SOURCE_HOOKS", "FILE_SINKS_HOOKS"]

#: The output keys of ``[sinks] kind = "file"`` whose lengths a checkpoint holds.
OUTPUT_KEYS = ("assignments", "events", "dead_letter")


class FileSourceConfig(SourceSection):
    """Tailed files (``kind = "file"``, the default): ``paths`` are files or glob
    patterns."""

    kind: Literal["file"] = "file"
    paths: list[ConfigPath] = Field(min_length=1)
    framing: Literal["lines", "fixed"] = "lines"
    record_size: int | None = Field(default=None, gt=0)
    max_record_bytes: int = Field(default=1 << 20, gt=0)
    start_at: Literal["beginning", "end"] = "beginning"
    poll_interval_ms: float = Field(default=20.0, gt=0)
    #: Hand the batcher whole blocks of records (one buffer and the records' offsets) and
    #: decode each block in one call; ``false`` reads and decodes record by record.
    read_blocks: bool = True

    @model_validator(mode="after")
    def _fixed_needs_size(self) -> FileSourceConfig:
        if self.framing == "fixed" and self.record_size is None:
            raise ValueError("source.record_size (bytes per record) is required when "
                             "source.framing = 'fixed'")
        return self


class FileSinksConfig(SinksSection):
    """JSON-lines output files (``kind = "file"``, the default); ``assignments`` and
    ``events`` may be disabled with ``""``."""

    SHOWN_EMPTY: ClassVar[tuple[str, ...]] = ("assignments", "events", "model")

    kind: Literal["file"] = "file"
    assignments: ConfigPath | None = Path("state/assignments.jsonl")
    events: ConfigPath | None = Path("state/events.jsonl")
    dead_letter: ConfigPath = Path("state/dead_letter.jsonl")


def _input_files(section: FileSourceConfig) -> list[tuple[str, Path]]:
    return [(f"source.paths[{i}]", Path(p)) for i, p in enumerate(section.paths)]


def _source_refusal(section: FileSourceConfig) -> str | None:
    if section.start_at == "end":
        return "source.start_at = 'end' starts at the end of the files, not their beginning"
    return None


def _output_files(section: FileSinksConfig) -> list[tuple[str, Path]]:
    return [(f"sinks.{key}", Path(getattr(section, key))) for key in OUTPUT_KEYS
            if getattr(section, key) is not None]


#: The file source: its files are checked and watched; read again from the beginning
#: unless it starts at their end.
FILE_SOURCE_HOOKS = KindHooks(input_files=_input_files, start_over_refusal=_source_refusal)
#: The file sinks: their files are probed, bounded, emptied by ``--from-start``.
FILE_SINKS_HOOKS = KindHooks(output_files=_output_files)
