"""``[sinks] kind = "csv"``: assignments and dead letters as CSV files, exactly-once with the
service's checkpoints (a file is truncated back to its checkpointed length on restart).

    [sinks]
    kind = "csv"
    assignments = "out/assignments.csv"   # id, cluster, squared distance, model step
    dead_letter = "out/dead_letter.csv"   # reason, detail, position (JSON), raw value
    delimiter = ";"
    header = true                         # a header line at the top of a new file

Its section and its output files are its own: the core learns them from the model and the
``output_files`` hook this package registers (``register``).
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from streamkm.config.sections import ConfigPath, SinksSection
from streamkm.registry import KindHooks
from streamkm.sinks import SinkSet

__all__ = ["CsvSinksConfig", "CsvFile", "CsvAssignments", "CsvDeadLetters", "csv_sinks",
           "CSV_SINKS_HOOKS"]


class CsvSinksConfig(SinksSection):
    """The ``[sinks]`` table of ``kind = "csv"``."""

    kind: Literal["csv"]
    assignments: ConfigPath = Path("out/assignments.csv")
    dead_letter: ConfigPath = Path("out/dead_letter.csv")
    delimiter: str = Field(default=",", min_length=1, max_length=1)
    header: bool = True


class CsvFile:
    """Append-only CSV rows with a byte-count position (buffered until :meth:`flush`)."""

    columns: tuple[str, ...] = ()

    def __init__(self, path: Path, *, delimiter: str, header: bool) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self._delimiter = delimiter
        self._disk = os.fstat(self._fd).st_size
        self._pending = bytearray()
        if header and self._disk == 0:
            self._append([self.columns])

    def _append(self, rows: list[Any]) -> None:
        text = io.StringIO()
        csv.writer(text, delimiter=self._delimiter, lineterminator="\n").writerows(rows)
        self._pending += text.getvalue().encode()

    def position(self) -> dict[str, Any]:
        return {"path": str(self.path), "bytes": self._disk + len(self._pending)}

    def flush(self) -> None:
        if self._pending:
            os.write(self._fd, bytes(self._pending))
            self._disk += len(self._pending)
            self._pending.clear()

    def sync(self) -> dict[str, Any]:
        self.flush()
        os.fsync(self._fd)
        return self.position()

    def restore(self, position: dict[str, Any] | None) -> None:
        if position is not None:
            self.rollback(position)

    def rollback(self, mark: dict[str, Any]) -> None:
        length = int(mark["bytes"])
        if length >= self._disk:
            del self._pending[length - self._disk:]
        else:
            self._pending.clear()
            os.ftruncate(self._fd, length)
            self._disk = length

    def close(self) -> None:
        self.flush()
        os.close(self._fd)


class CsvAssignments(CsvFile):
    """One row per accepted record."""

    columns = ("id", "cluster", "sq_distance", "step")

    def write_assignments(self, ids: list[Any], clusters: Any, sq_distances: Any,
                          step: int) -> None:
        self._append([(i, int(c), float(d), step)
                      for i, c, d in zip(ids, clusters, sq_distances)])


class CsvDeadLetters(CsvFile):
    """One row per rejected record."""

    columns = ("reason", "detail", "position", "raw")

    def write_dead_letter(self, raw: bytes, reason: str, detail: str,
                          position: dict[str, Any]) -> None:
        self._append([(reason, detail, json.dumps(position, sort_keys=True),
                       bytes(raw).decode("utf-8", "replace"))])


def csv_sinks(section: CsvSinksConfig, config: Any, metrics: Any) -> SinkSet:
    """The sinks of ``[sinks] kind = "csv"``."""
    options = {"delimiter": section.delimiter, "header": section.header}
    return SinkSet(assignments=CsvAssignments(section.assignments, **options), events=None,
                   dead_letter=CsvDeadLetters(section.dead_letter, **options))


#: The CSV files: probed before a start, refused when not empty without a checkpoint,
#: emptied by ``--from-start``.
CSV_SINKS_HOOKS = KindHooks(output_files=lambda section: [
    ("sinks.assignments", Path(section.assignments)),
    ("sinks.dead_letter", Path(section.dead_letter))])
