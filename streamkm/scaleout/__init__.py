"""Scale-out: several processes in one Kafka consumer group learning one global model.

Workers assign their partitions' records with the current global model and send compact
update messages (:mod:`.messages`, rows subsampled by :mod:`.compress`) to a single-partition
updates topic; the merge leader (:mod:`.leader`) applies them in the topic's total order under
the fencing rules of :mod:`.ledger` and publishes model versions (:mod:`.versions`). The broker
plumbing is behind :mod:`.transport` (Kafka: ``streamkm_connectors.scaleout_kafka``); a member
is the runtime shell running :class:`~.worker.ScaleoutWorker` (:mod:`.process`).
See ``docs/scaleout.md``.
"""

from __future__ import annotations

from streamkm.scaleout.compress import subsample_per_cluster
from streamkm.scaleout.ledger import PartitionLedger, UpdateVerdict
from streamkm.scaleout.leader import MergeLeader
from streamkm.scaleout.messages import Fence, ModelUpdate, decode_message, encode_message

__all__ = ["Fence", "ModelUpdate", "encode_message", "decode_message", "PartitionLedger",
           "UpdateVerdict", "MergeLeader", "subsample_per_cluster"]
