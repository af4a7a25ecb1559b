"""Exactly-once bookkeeping of the merge leader: per input partition a watermark and an owner.

Rules (applied in the updates topic's total order):

* a :class:`~streamkm.scaleout.messages.Fence` for partition p makes its token the owner of p
  (a new generation); the watermark stays;
* an update for p is applied iff its token is p's current owner **and** its range starts
  exactly at the watermark; the watermark then moves to the range's end;
* otherwise it is dropped with a reason: ``stale_generation`` (another token owns p: the
  sender lost p, the new owner re-reads from the watermark), ``duplicate`` (starts below the
  watermark: a re-sent range), ``gap`` (starts above: an earlier update was lost; the sender
  must re-fence).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from streamkm.exceptions import StateError

__all__ = ["PartitionLedger", "UpdateVerdict", "DROP_REASONS"]


class UpdateVerdict(str, Enum):
    """What the leader does with an update."""

    APPLY = "apply"
    STALE_GENERATION = "stale_generation"
    DUPLICATE = "duplicate"
    GAP = "gap"


#: The ``reason`` label values of ``streamkm_updates_dropped_total`` (``corrupt``: a message
#: that does not decode).
DROP_REASONS = (UpdateVerdict.STALE_GENERATION.value, UpdateVerdict.DUPLICATE.value,
                UpdateVerdict.GAP.value, "corrupt")


@dataclass
class PartitionLedger:
    """Watermarks (next offset to apply) and owner tokens per input partition.

    A partition never fenced has watermark 0 (its beginning) and no owner.
    """

    watermarks: dict[str, int] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)
    generations: dict[str, int] = field(default_factory=dict)

    def watermark(self, partition: str) -> int:
        """Next offset of ``partition`` the model has not absorbed."""
        return int(self.watermarks.get(partition, 0))

    def fence(self, partition: str, token: str) -> int:
        """Make ``token`` the owner of ``partition``; returns the new generation."""
        self.owners[partition] = token
        self.generations[partition] = self.generations.get(partition, 0) + 1
        self.watermarks.setdefault(partition, 0)
        return self.generations[partition]

    def judge(self, partition: str, token: str, start: int, end: int) -> UpdateVerdict:
        """The verdict on an update (nothing changes; see :meth:`advance`)."""
        if end < start:
            raise StateError(f"update range [{start}, {end}) of {partition!r} is reversed")
        if self.owners.get(partition) != token:
            return UpdateVerdict.STALE_GENERATION
        watermark = self.watermark(partition)
        if start < watermark:
            return UpdateVerdict.DUPLICATE
        if start > watermark:
            return UpdateVerdict.GAP
        return UpdateVerdict.APPLY

    def advance(self, partition: str, end: int) -> None:
        """Record an applied update ending at ``end``."""
        self.watermarks[partition] = int(end)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able state."""
        return {"watermarks": dict(self.watermarks), "owners": dict(self.owners),
                "generations": dict(self.generations)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PartitionLedger:
        """Rebuild from :meth:`to_dict` output."""
        try:
            return cls({str(k): int(v) for k, v in data["watermarks"].items()},
                       {str(k): str(v) for k, v in data["owners"].items()},
                       {str(k): int(v) for k, v in data["generations"].items()})
        except (KeyError, AttributeError, TypeError, ValueError) as exc:
            raise StateError(f"malformed partition ledger {data!r}: {exc!r}") from None
