"""What the demo prints about the model's lifecycle events: sentences a person reads
without knowing the event schema."""

from __future__ import annotations

import pytest

from streamkm.app.demo import describe_event

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("event, text", [
    ({"event": "split", "step": 57, "cluster": 2, "into": [2, 4], "sizes": [30, 25],
      "sse_reduction": 0.356, "n_pairs": 64},
     "cluster 2 split into 2 and 4 at step 57 (two clusters fit its records with 36% less "
     "squared error)"),
    ({"event": "merge", "step": 90, "clusters": [3, 6], "into": 3, "ward_cost": 0.1,
      "reason": "k_max"},
     "clusters 3 and 6 merged into 3 at step 90 (more clusters than drift.k_max allows)"),
    ({"event": "merge", "step": 91, "clusters": [1, 5], "into": 1, "ward_cost": 0.01,
      "reason": "redundant"},
     "clusters 1 and 5 merged into 1 at step 91 (they had become one group)"),
    ({"event": "converged", "step": 40, "objective": 0.2},
     "model converged at step 40: centers frozen, new records are only assigned"),
    ({"event": "woke", "step": 70, "objective": 0.9},
     "model woke up at step 70 (the fit got worse): learning again"),
    ({"event": "woke", "step": 71, "objective": 0.9, "cause": "drift"},
     "model woke up at step 71 (a cluster drifted): learning again"),
    ({"event": "resketched", "trigger": "drift", "sketch_epoch": 3, "step": 72},
     "feature sketch refitted at step 72 (trigger: drift, sketch number 3)"),
])
def test_lifecycle_events_read_as_sentences(event: dict, text: str) -> None:
    assert describe_event(event) == text


def test_unknown_events_are_not_described() -> None:
    assert describe_event({"event": "something_new", "step": 1}) is None
