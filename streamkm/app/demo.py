"""``streamkm demo``: a drifting non-linear stream written to a file and clustered live.

The generator appends JSON lines ``{"id": <n>, "x": [x0, x1]}`` to ``<state>/stream.jsonl``
at a given rate while the service tails that file. The stream has four groups:

* two interleaving half-moons that slowly rock back and forth (non-linear clusters),
* a ring around them whose radius breathes,
* a blob on the right that, after ``split_after`` records, drifts apart into two blobs
  (a cluster splitting in two: drift handling, on in the demo, splits its cluster; the
  status output prints a line for every split or merge, the events file and the
  ``streamkm_cluster_splits_total`` metric record it).

A small fraction of lines is deliberately malformed to exercise the dead-letter path.
Record ``n`` is a pure function of ``n`` and the seed, so a restarted demo continues the
same stream.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from streamkm.app.progress import first_batch_progress, first_batch_text
from streamkm.config.schema import ServiceConfig, config_from_mapping

__all__ = ["DriftingStream", "StreamWriter", "StatusLine", "demo_config", "describe_event"]

_BLOCK = 1024  # records drawn by one generator
_BAD_LINES = (b'{"id": "bad", "x": [1.0', b'{"x": [NaN, 1.0]}', b'{"x": [1.0, 2.0, 3.0]}',
              b"\xff\xfe not utf-8", b'{"x": [1e300, 0.0]}')


class DriftingStream:
    """Deterministic generator of the demo's records.

    Parameters
    ----------
    seed : int
        Seed of the noise.
    period : int
        Records per full rocking cycle of the moons and breathing cycle of the ring.
    split_after : int
        Record index from which the right-hand blob starts splitting in two.
    bad_fraction : float
        Fraction of lines that are malformed on purpose.
    """

    def __init__(self, *, seed: int = 0, period: int = 60_000, split_after: int = 20_000,
                 bad_fraction: float = 0.001) -> None:
        self.seed = seed
        self.period = period
        self.split_after = split_after
        self.bad_fraction = bad_fraction

    def points(self, start: int, count: int) -> np.ndarray:
        """Rows ``start .. start + count - 1`` of the stream, shape (count, 2)."""
        return self._draw(start, count)[0]

    def shapes(self, start: int, count: int, *, apart: float = 0.75) -> np.ndarray:
        """The shape each of those rows was drawn from (int64): 0 and 1 the two moons,
        2 the ring, 3 the blob, and 4 its upper half once the halves' centers are at
        least 2 * ``apart`` apart (the blob has split; with the default, from
        ``split_after + period / 8`` on)."""
        return self.points_and_groups(start, count, apart=apart)[1]

    def points_and_groups(self, start: int, count: int, *, apart: float = 0.75
                          ) -> tuple[np.ndarray, np.ndarray]:
        """The rows of :meth:`points` and their :meth:`shapes`, drawn once."""
        points, group, side, spread = self._draw(start, count)
        shapes = group.astype(np.int64)
        blob = np.flatnonzero(group == 3)
        shapes[blob[(side > 0) & (spread >= apart)]] = 4
        return points, shapes

    def _draw(self, start: int, count: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Points, shape group, blob side (-1 / 1, blob rows) and blob spread (blob rows),
        drawn in blocks of ``_BLOCK`` records so that record n does not depend on how the
        stream is cut into calls."""
        first, last = start // _BLOCK, -(-(start + count) // _BLOCK)
        parts = [self._draw_block(b) for b in range(first, last)]
        lo = start - first * _BLOCK
        points = np.concatenate([p[0] for p in parts])[lo:lo + count]
        group = np.concatenate([p[1] for p in parts])[lo:lo + count]
        blob_of = np.concatenate([np.where(p[1] == 3, 1, 0) for p in parts])
        side = np.concatenate([p[2] for p in parts])
        spread = np.concatenate([p[3] for p in parts])
        # blob rows of the range: those among the blocks' blob rows that fall in it
        in_range = np.zeros(blob_of.shape[0], dtype=bool)
        in_range[lo:lo + count] = True
        keep = in_range[blob_of.astype(bool)]
        return points, group, side[keep], spread[keep]

    def _draw_block(self, block: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        start, count = block * _BLOCK, _BLOCK
        n = np.arange(start, start + count)
        rng = np.random.default_rng([self.seed, block])
        group = rng.integers(0, 4, size=count)
        u = rng.uniform(0.0, math.pi, size=count)
        noise = rng.normal(0.0, 0.08, size=(count, 2))
        phase = 2 * math.pi * n / self.period
        out = np.empty((count, 2))
        upper = np.c_[np.cos(u), np.sin(u)]
        lower = np.c_[1 - np.cos(u), 0.5 - np.sin(u)]
        moons = np.where((group == 0)[:, None], upper, lower) - [0.5, 0.25]
        angle = 0.35 * np.sin(phase)
        rot = np.stack([np.cos(angle), -np.sin(angle), np.sin(angle), np.cos(angle)], axis=1)
        rotated = np.einsum("nij,nj->ni", rot.reshape(-1, 2, 2), moons)
        out[:] = rotated
        ring = group == 2
        radius = 3.0 + 0.3 * np.sin(phase[ring])
        theta = 2 * u[ring]
        out[ring] = np.c_[radius * np.cos(theta), radius * np.sin(theta)]
        blob = group == 3
        spread = np.clip((n[blob] - self.split_after) / (self.period / 4), 0.0, 1.0) * 1.5
        side = np.where(rng.random(count)[blob] < 0.5, -1.0, 1.0)
        out[blob] = np.c_[np.full(blob.sum(), 6.0), side * spread] + rng.normal(
            0.0, 0.25, size=(blob.sum(), 2))
        return out + noise, group, side, spread

    def lines(self, start: int, count: int) -> bytes:
        """JSON lines for rows ``start .. start + count - 1`` (some malformed on purpose)."""
        pts = self.points(start, count)
        rng = np.random.default_rng([self.seed, start, 1])
        bad = rng.random(count) < self.bad_fraction
        out = []
        for i, (x0, x1) in enumerate(pts.tolist()):
            if bad[i]:
                out.append(_BAD_LINES[(start + i) % len(_BAD_LINES)])
            else:
                out.append(f'{{"id":{start + i},"x":[{x0:.6f},{x1:.6f}]}}'.encode())
        return b"\n".join(out) + b"\n"


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


class StreamWriter(threading.Thread):
    """Appends the demo stream to ``path`` at ``rate`` records per second.

    Once the file holds ``max_bytes`` or more, the next write renames it to ``<path>.1``
    (replacing the older one) and starts a new file at ``path`` with its lines: the service's
    file tailer reads the renamed file to its end, then follows the new one, and the stream
    takes at most about ``2 * max_bytes`` on disk. ``<path>.count`` holds how many records came before the
    current file, so a restarted writer continues the same numbering.
    """

    def __init__(self, path: Path, stream: DriftingStream, rate: float,
                 stop: threading.Event, *, max_bytes: int | None = None) -> None:
        super().__init__(name="streamkm-demo-writer", daemon=True)
        self.path = path
        self.rotated = path.with_name(path.name + ".1")
        self._count_file = path.with_name(path.name + ".count")
        self.stream = stream
        self.rate = rate
        self.max_bytes = max_bytes
        self.stop_event = stop
        self.written = self._records_before() + _count_lines(path)

    def _records_before(self) -> int:
        try:
            return int(self._count_file.read_text())
        except (FileNotFoundError, ValueError):
            return 0

    def _rotate(self) -> None:
        # the count first: a crash between the two skips numbers, never repeats them
        tmp = self._count_file.with_name(self._count_file.name + ".tmp")
        tmp.write_text(str(self.written))
        os.replace(tmp, self._count_file)
        os.replace(self.path, self.rotated)

    def run(self) -> None:
        tick = 0.1
        owed = 0.0
        fh = open(self.path, "ab")
        try:
            while not self.stop_event.wait(tick):
                owed += self.rate * tick
                count = int(owed)
                if count <= 0:
                    continue
                owed -= count
                if self.max_bytes is not None and fh.tell() >= self.max_bytes:
                    # moved aside just before a write: a new file never stays empty
                    fh.close()
                    self._rotate()
                    fh = open(self.path, "ab")
                fh.write(self.stream.lines(self.written, count))
                fh.flush()
                self.written += count
        finally:
            fh.close()


_MERGE_REASONS = {
    "k_max": "more clusters than drift.k_max allows",
    "redundant": "they had become one group",
}


def describe_event(event: dict[str, Any]) -> str | None:
    """One sentence for a person about a lifecycle event of the model (``None`` for an
    event kind this does not know).

    Examples
    --------
    >>> describe_event({"event": "split", "cluster": 2, "into": [2, 4], "step": 310,
    ...                 "sizes": [60, 52], "sse_reduction": 0.41})
    'cluster 2 split into 2 and 4 at step 310 (two clusters fit its records with 41% less squared error)'
    >>> describe_event({"event": "merge", "clusters": [1, 5], "into": 1, "step": 900,
    ...                 "reason": "redundant"})
    'clusters 1 and 5 merged into 1 at step 900 (they had become one group)'
    >>> describe_event({"event": "born", "cluster_id": 6, "rows": 83, "near": 2, "step": 41})
    'cluster 6 born at step 41 from 83 outliers near cluster 2 (a compact group of its own)'
    >>> describe_event({"event": "retired", "cluster_id": 3, "idle_batches": 20, "step": 70})
    'cluster 3 retired at step 70 (no records for 20 batches)'
    """
    kind, step = event.get("event"), event.get("step")
    if kind == "split":
        a, b = event["into"]
        return (f"cluster {event['cluster']} split into {a} and {b} at step {step} "
                f"(two clusters fit its records with {100 * event['sse_reduction']:.0f}% "
                f"less squared error)")
    if kind == "merge":
        a, b = event["clusters"]
        reason = _MERGE_REASONS.get(event.get("reason", ""), event.get("reason", ""))
        return f"clusters {a} and {b} merged into {event['into']} at step {step} ({reason})"
    if kind == "born":
        return (f"cluster {event['cluster_id']} born at step {step} from {event['rows']} "
                f"outliers near cluster {event['near']} (a compact group of its own)")
    if kind == "retired":
        return (f"cluster {event['cluster_id']} retired at step {step} (no records for "
                f"{event['idle_batches']} batches)")
    if kind == "birth_blocked":
        return (f"a compact group of {event['rows']} outliers near cluster {event['near']} "
                f"was not made a cluster at step {step}: already drift.k_max = "
                f"{event['k_max']} clusters")
    if kind == "converged":
        return f"model converged at step {step}: centers frozen, new records are only assigned"
    if kind == "woke":
        cause = "a cluster drifted" if event.get("cause") == "drift" else "the fit got worse"
        return f"model woke up at step {step} ({cause}): learning again"
    if kind == "resketched":
        return (f"feature sketch refitted at step {step} (trigger: {event.get('trigger')}, "
                f"sketch number {event.get('sketch_epoch')})")
    return None


class StatusLine(threading.Thread):
    """Rewrites one terminal line about once a second with the service's progress."""

    def __init__(self, service: Any, stop: threading.Event, out: TextIO = sys.stdout) -> None:
        super().__init__(name="streamkm-demo-status", daemon=True)
        self._events_shown = 0
        self.service = service
        self.stop_event = stop
        self.out = out

    def render(self, rate: float) -> str:
        """The status text for a measured ``rate`` (records per second)."""
        s = self.service.status
        fit = "-" if s.objective is None else f"{s.objective:.4f}"
        state = "converged (assigning only)" if s.converged else "learning"
        filling = first_batch_progress(self.service)
        if filling is not None:
            head = first_batch_text(*filling)
        elif rate > 0:
            head = f"{rate:6.0f} records/s"
        else:
            head = "waiting for records, 0 records/s"
        return (f"{head} | {s.records_accepted:9d} clustered, "
                f"{s.records_rejected:4d} rejected | model {state}, {s.clusters} clusters, "
                f"step {s.step} | mean squared distance to centers {fit}")

    def new_cluster_events(self) -> list[str]:
        """One text line per split / merge / birth / retirement since the last call."""
        s = self.service.status
        total = s.cluster_splits + s.cluster_merges + s.cluster_births + s.cluster_retirements
        fresh = min(total - self._events_shown, len(s.cluster_events))
        self._events_shown = total
        lines = []
        for event in list(s.cluster_events)[len(s.cluster_events) - fresh:]:
            text = describe_event(event)
            if text is not None:
                lines.append(text)
        return lines

    def run(self) -> None:
        tty = self.out.isatty()
        last_time, last_read = time.monotonic(), self.service.status.records_read
        while not self.stop_event.wait(1.0):
            now, read = time.monotonic(), self.service.status.records_read
            rate = (read - last_read) / max(now - last_time, 1e-9)
            last_time, last_read = now, read
            for text in self.new_cluster_events():
                self.out.write(("\r\x1b[2K" + text + "\n") if tty else text + "\n")
            line = self.render(rate)
            self.out.write(("\r\x1b[2K" + line) if tty else line + "\n")
            self.out.flush()
        if tty:
            self.out.write("\n")
            self.out.flush()


def demo_config(state_dir: Path, *, metrics_port: int, batch_size: int = 512,
                env: dict[str, str] | None = None) -> ServiceConfig:
    """The demo's service configuration: everything under ``state_dir``."""
    raw = {
        "source": {"paths": ["stream.jsonl"], "poll_interval_ms": 20},
        "decoding": {"format": "json", "dim": 2},
        "model": {"n_clusters": 4, "kernel": "rbf", "tau": 200, "random_state": 0},
        "drift": {"enabled": True, "k_max": 8},
        "batching": {"batch_size": batch_size, "max_wait_ms": 1000},
        "checkpoint": {"dir": "checkpoints", "every_batches": 20, "every_seconds": 10,
                       "keep": 3},
        "sinks": {"assignments": "assignments.jsonl", "events": "events.jsonl",
                  "dead_letter": "dead_letter.jsonl"},
        "metrics": {"enabled": True, "address": "127.0.0.1", "port": metrics_port},
        "logging": {"level": "warning"},
    }
    return config_from_mapping(raw, env=env if env is not None else dict(os.environ),
                               base_dir=state_dir, where="of the demo")


def dump_config(config: ServiceConfig) -> str:
    """The configuration as JSON (for the demo's state folder, to show what ran)."""
    return json.dumps(config.model_dump(mode="json"), indent=2, sort_keys=True)
