"""Loud misconfiguration: warnings about a service that runs but cannot be doing what was meant.

Four warnings (the first three set in ``[warnings]`` in the configuration; ``0`` turns one
off):

* ``source_no_files``: an entry of ``[source] paths`` (file source) has matched no file for
  ``source_no_files_after_s`` seconds: a typo, a wrong folder, a producer that never started;
* ``reject_ratio_high``: more than ``reject_ratio`` of the last ``reject_window`` records
  (whole batches, at least ``min(100, reject_window)`` records) were rejected; the log line
  names the most frequent reason, quotes one example (``field 'x' has 3 values, expected
  2: ...``) and the configuration key the reason points to (``decoding.dim``); it clears once
  the ratio is at most half the threshold;
* ``no_accepted_records``: no record was accepted for ``no_accepted_records_after_s``
  seconds (since the start, or since the last accepted record); a record counts once it is
  decoded into the batch being collected, so a large first batch that fills slowly does not
  raise it;
* ``source_unreadable``: an input exists but cannot be read (a directory or FIFO at a
  configured path, a broken symlink, a file the process may not open); the log line names
  each path with its errno (``inputs: [{"path", "errno", "error"}]``). Always on: the
  tailer re-checks on every scan, and the warning clears once every input can be read.

Each warning is logged once when it starts (level ``warning``, event = the warning's name)
and once when it clears (level ``info``, event ``<name>_cleared``), and is exported as
``streamkm_warning_active{warning="<name>"}`` (1 while active).
"""

from __future__ import annotations

import glob
import logging
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streamkm.config.schema import WarningsConfig
from streamkm.io import registry
from streamkm.logs import log_event
from streamkm.runtime.health import unreadable_inputs
from streamkm.runtime.ticker import TickingHook

if TYPE_CHECKING:
    from streamkm.io.batcher import Batch
    from streamkm.runtime.learner import Learned, RuntimeHost

__all__ = ["REASON_KEYS", "SOURCE_NO_FILES", "REJECT_RATIO_HIGH", "NO_ACCEPTED_RECORDS",
           "SOURCE_UNREADABLE",
           "WARNINGS", "WarningSwitch", "records_accepted_so_far", "RejectWindow", "NoFilesWatch", "WarningsHook"]

_log = logging.getLogger("streamkm.service")

SOURCE_NO_FILES = "source_no_files"
REJECT_RATIO_HIGH = "reject_ratio_high"
NO_ACCEPTED_RECORDS = "no_accepted_records"
SOURCE_UNREADABLE = "source_unreadable"
#: Every warning's name: the values of the ``warning`` label.
WARNINGS = (SOURCE_NO_FILES, REJECT_RATIO_HIGH, NO_ACCEPTED_RECORDS, SOURCE_UNREADABLE)
#: Fewest records in the window before the reject ratio is judged.
MIN_RECORDS = 100
#: The configuration key a rejection reason most often points to when every record has it.
REASON_KEYS = {"wrong_dimension": "decoding.dim", "missing_field": "decoding.x_field",
               "unparseable": "decoding.format", "length_mismatch": "decoding.format"}


class WarningSwitch:
    """One named warning: logs when it starts and when it clears, never in between, and
    keeps its gauge.

    Parameters
    ----------
    name : str
        One of :data:`WARNINGS`.
    gauge : prometheus_client.Gauge
        ``streamkm_warning_active`` (labelled by ``warning``).
    """

    def __init__(self, name: str, gauge: Any) -> None:
        self.name = name
        self.active = False
        self._gauge = gauge.labels(warning=name)
        self._gauge.set(0)

    def update(self, active: bool, message: str = "", **fields: Any) -> bool:
        """Set the state; log (and return True) only when it changes. ``message`` and
        ``fields`` go into the start line."""
        if active == self.active:
            return False
        self.active = active
        self._gauge.set(1 if active else 0)
        if active:
            log_event(_log, "warning", self.name, message=message, **fields)
        else:
            log_event(_log, "info", f"{self.name}_cleared", **fields)
        return True


@dataclass
class _BatchRejects:
    n_read: int
    n_rejected: int
    reasons: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)


class RejectWindow:
    """The reject ratio of the last ``window`` records, counted by whole batches (the window
    holds the newest batches that make up at least ``window`` records).

    Parameters
    ----------
    window : int
        Records the ratio is taken over.
    """

    def __init__(self, window: int) -> None:
        self.window = window
        self._batches: deque[_BatchRejects] = deque()
        self.n_read = 0
        self.n_rejected = 0

    def add(self, n_read: int, rejections: list[Any]) -> None:
        """One batch: ``n_read`` records of which ``rejections`` (``Rejection`` objects)."""
        entry = _BatchRejects(n_read, len(rejections))
        for rejection in rejections:
            reason = rejection.reason.value
            entry.reasons[reason] += 1
            entry.examples[reason] = rejection.detail
        self._batches.append(entry)
        self.n_read += entry.n_read
        self.n_rejected += entry.n_rejected
        while len(self._batches) > 1 and self.n_read - self._batches[0].n_read >= self.window:
            old = self._batches.popleft()
            self.n_read -= old.n_read
            self.n_rejected -= old.n_rejected

    @property
    def ratio(self) -> float:
        """Rejected over read in the window (0 when empty)."""
        return self.n_rejected / self.n_read if self.n_read else 0.0

    def top_reason(self) -> tuple[str, int, str] | None:
        """The most frequent reason in the window, its count and its latest example."""
        total: Counter[str] = Counter()
        for entry in self._batches:
            total.update(entry.reasons)
        if not total:
            return None
        reason, count = total.most_common(1)[0]
        example = next(e.examples[reason] for e in reversed(self._batches)
                       if reason in e.examples)
        return reason, count, example


class NoFilesWatch:
    """Since when each file-source pattern has matched no file.

    Parameters
    ----------
    patterns : list of str
        ``[source] paths`` (absolute), as the file tailer globs them.
    """

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = patterns
        self._unmatched_since: dict[str, float] = {}

    def unmatched_for(self, now: float) -> dict[str, float]:
        """Each pattern that matches no file now, with the seconds it has not matched."""
        for pattern in self.patterns:
            if glob.glob(pattern):
                self._unmatched_since.pop(pattern, None)
            else:
                self._unmatched_since.setdefault(pattern, now)
        return {p: now - since for p, since in self._unmatched_since.items()}


def records_accepted_so_far(runtime: Any) -> int:
    """Records accepted by ``runtime``: those of its processed batches plus the valid rows
    of the batch being collected (safe from any thread)."""
    batcher = getattr(runtime, "batcher", None)
    filling = batcher.filling[0] if batcher is not None else 0
    return int(runtime.status.records_accepted) + filling


class WarningsHook(TickingHook):
    """Raises and clears the four warnings of a runtime (see the module docstring).

    The reject ratio is judged after every batch (on the runtime's thread), the two
    time-based warnings once a second on the hook's thread.

    Parameters
    ----------
    config : WarningsConfig
        Thresholds.
    source : SourceSection
        The ``[source]`` section: the patterns of its kind's input files are watched
        (:func:`streamkm.io.registry.input_files`; none for a source without files).
    metrics : ServiceMetrics
        Holds ``warning_active``.
    """

    def __init__(self, config: WarningsConfig, source: Any, metrics: Any,
                 period_s: float = 1.0) -> None:
        super().__init__(period_s, "streamkm-warnings")
        self.config = config
        self.switches = {name: WarningSwitch(name, metrics.warning_active)
                         for name in WARNINGS}
        self.rejects = RejectWindow(config.reject_window)
        patterns = [str(path) for _, path in registry.input_files(source)]
        self.no_files = NoFilesWatch(patterns)
        self._last_accepted = time.monotonic()
        self._accepted_seen = 0
        self._unreadable: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ hook

    def on_started(self, runtime: RuntimeHost) -> None:
        self._last_accepted = time.monotonic()
        self._accepted_seen = records_accepted_so_far(runtime)
        super().on_started(runtime)

    def on_batch(self, runtime: RuntimeHost, batch: Batch, learned: Learned) -> None:
        if batch.n_valid:
            self._last_accepted = time.monotonic()
        self.rejects.add(batch.n_read, batch.rejections)
        self.check_rejects()

    def tick(self, runtime: RuntimeHost, now: float) -> None:
        self.check_no_files(now)
        if runtime is not None:
            self.note_accepted(records_accepted_so_far(runtime), now)
        self.check_no_accepted(now)
        if runtime is not None:
            self.check_unreadable(runtime.parts)

    # ------------------------------------------------------------------ checks

    def check_rejects(self) -> None:
        """Judge the reject ratio of the window."""
        limit, window = self.config.reject_ratio, self.rejects
        switch = self.switches[REJECT_RATIO_HIGH]
        if limit <= 0 or window.n_read < min(MIN_RECORDS, self.config.reject_window):
            return
        ratio = window.ratio
        if not switch.active and ratio > limit:
            top = window.top_reason()
            assert top is not None
            reason, count, example = top
            key = REASON_KEYS.get(reason)
            hint = f"; if the records are right, check the config key {key}" if key else ""
            switch.update(True, (f"{ratio:.0%} of the last {window.n_read} records were "
                                 f"rejected (threshold {limit:g}); most often {reason} "
                                 f"({count}), e.g. {example}{hint}"),
                          ratio=round(ratio, 4), records=window.n_read,
                          rejected=window.n_rejected, top_reason=reason, top_count=count,
                          example=example)
        elif switch.active and ratio <= limit / 2:
            switch.update(False, ratio=round(ratio, 4), records=window.n_read)

    def check_no_files(self, now: float) -> None:
        """Judge whether a source pattern has matched no file for too long."""
        after = self.config.source_no_files_after_s
        if after <= 0 or not self.no_files.patterns:
            return
        missing = sorted(p for p, s in self.no_files.unmatched_for(now).items() if s >= after)
        switch = self.switches[SOURCE_NO_FILES]
        if missing and not switch.active:
            switch.update(True, (f"[source] paths {missing!r} matched no file for "
                                 f"{after:g} s: check the paths (relative paths are relative "
                                 f"to the configuration file's folder)"),
                          patterns=missing, after_s=after)
        elif not missing and switch.active:
            switch.update(False)

    def note_accepted(self, accepted: int, now: float) -> None:
        """Record ``accepted`` (records accepted so far, see
        :func:`records_accepted_so_far`); any change since the last call counts as records
        accepted at ``now``."""
        if accepted != self._accepted_seen:
            self._accepted_seen = accepted
            self._last_accepted = now

    def check_no_accepted(self, now: float) -> None:
        """Judge whether the model has gone without an accepted record for too long."""
        after = self.config.no_accepted_records_after_s
        if after <= 0:
            return
        idle = now - self._last_accepted
        switch = self.switches[NO_ACCEPTED_RECORDS]
        if idle >= after and not switch.active:
            switch.update(True, f"no record was accepted for {after:g} s",
                          seconds=round(idle, 1))
        elif idle < after and switch.active:
            switch.update(False)

    def check_unreadable(self, parts: dict[str, Any]) -> None:
        """Judge whether an input the source found cannot be read; a change in the set of
        such inputs while active is logged as a new start."""
        inputs = unreadable_inputs(parts)
        switch = self.switches[SOURCE_UNREADABLE]
        if inputs and inputs != self._unreadable:
            if switch.active:
                switch.update(False, inputs=[])
            names = ", ".join(f"{i['path']!r} ({i['errno'] or i['error']})" for i in inputs)
            switch.update(True, f"cannot read the input(s) {names}: fix the path or its "
                                f"permissions; it is read once it can be", inputs=inputs)
        elif not inputs and switch.active:
            switch.update(False, inputs=[])
        self._unreadable = inputs
