"""The demo's outputs stay bounded: past a size, the demo starts over with a fresh model.

The service's output files (assignments, events, dead letters) are exactly-once: each line
is tied to the checkpoint that covers it, so they cannot be cut or rotated while a model
runs. The demo instead watches their total size; once it reaches ``max_bytes`` the running
service is stopped (its final checkpoint as usual), the demo starts from the beginning as
``streamkm run --reset-model --from-start`` does (:mod:`streamkm.app.start_over`: the
checkpoints move aside, the outputs are emptied) and deletes the moved checkpoints, and a
new service reads the current stream file from its start. Every output line is then the new
model's, and the outputs never hold more than ``max_bytes`` plus what is written between two
checks.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from streamkm.app.start_over import start_from_beginning
from streamkm.config.schema import ServiceConfig
from streamkm.io import registry

__all__ = ["output_paths", "outputs_size", "OutputsBound", "start_over"]


def output_paths(config: ServiceConfig) -> list[Path]:
    """The output files the service writes (assignments, events, dead letters)."""
    return [path for _, path in registry.output_files(config.sinks)]


def outputs_size(paths: list[Path]) -> int:
    """Bytes held by ``paths`` together (a missing file holds none)."""
    total = 0
    for path in paths:
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            pass
    return total


class OutputsBound(threading.Thread):
    """Calls ``stop_service`` once the output files together hold ``max_bytes`` or more.

    Parameters
    ----------
    paths : list of Path
        The output files (:func:`output_paths`).
    max_bytes : int
        The bound.
    stop_service : callable
        Asks the running service to stop.
    period_s : float
        Seconds between two checks.
    """

    def __init__(self, paths: list[Path], max_bytes: int, stop_service: Callable[[], None],
                 *, period_s: float = 1.0) -> None:
        super().__init__(name="streamkm-demo-bound", daemon=True)
        self.paths = paths
        self.max_bytes = max_bytes
        self.stop_service = stop_service
        self.period_s = period_s
        self.reached = threading.Event()
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.period_s):
            if outputs_size(self.paths) >= self.max_bytes:
                self.reached.set()
                self.stop_service()
                return

    def finish(self) -> None:
        """Stop watching (the service stopped)."""
        self._done.set()
        self.join(timeout=2 * self.period_s + 1)


def start_over(config: ServiceConfig) -> None:
    """Start the demo from the beginning: checkpoints deleted, outputs emptied (the
    service's :func:`~streamkm.app.start_over.start_from_beginning`, whose kept copy of the
    checkpoints the demo does not keep)."""
    moved = start_from_beginning(config)
    if moved is not None:
        shutil.rmtree(moved)
