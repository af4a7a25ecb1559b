"""Structured logs: one JSON object per line on stderr.

Use :func:`log_event` with an event name and keyword fields::

    log_event(logger, "info", "checkpoint_written", path=str(path), seconds=0.012)
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

__all__ = ["JsonLineFormatter", "configure_logging", "log_event", "LOGGER_NAME"]

LOGGER_NAME = "streamkm"


class JsonLineFormatter(logging.Formatter):
    """Formats a record as ``{"ts", "level", "logger", "event", ...fields}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, allow_nan=True)


def configure_logging(level: str = "info", stream: TextIO | None = None) -> logging.Logger:
    """Send the ``streamkm`` loggers to ``stream`` (stderr) as JSON lines at ``level``."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        if getattr(handler, "_streamkm_json", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    handler._streamkm_json = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    logging.Formatter.converter = time.gmtime
    return logger


def log_event(logger: logging.Logger, level: str, event: str, /, **fields: Any) -> None:
    """Log ``event`` with structured ``fields`` at ``level`` ("debug", "info", ...)."""
    logger.log(logging.getLevelName(level.upper()), event, extra={"fields": fields})
