"""The novelty fields of the assignments topic, written through the service's SinkSet to a
real Kafka-protocol broker (Tansu) and read back."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from streamkm.sinks import AssignmentNovelty, SinkSet
from streamkm.sources import RawRecord
from streamkm_connectors.kafka_sinks import AssignmentKafkaSink, KafkaProducerHandle
from tests.helpers.kafka_broker import TansuBroker, create_topics, read_topic

pytestmark = pytest.mark.kafka


def test_assignment_messages_carry_novelty_outlier_second_cluster_and_margin(
        kafka_broker: TansuBroker) -> None:
    topic = "novelty-out"
    create_topics(kafka_broker.bootstrap, {topic: 1})
    handle = KafkaProducerHandle({"bootstrap_servers": [kafka_broker.bootstrap]})
    sink = AssignmentKafkaSink(handle, topic)
    sinks = SinkSet(assignments=sink, events=None, dead_letter=None)
    records = [RawRecord(b"{}", f"k{i}", {"offset": i}) for i in range(3)]
    scored = AssignmentNovelty(novelty=np.array([0.5, 0.004, 1.0]),
                               outliers=np.array([False, True, False]),
                               second_cluster_ids=np.array([2, 0, -1]),
                               margins=np.array([0.25, 1.5, np.inf]))
    try:
        assert sinks.write_assignments(records, ["a", "b", "c"], np.array([1, 3, 0]),
                                       np.array([0.04, 0.81, 0.0]), 7, scored) == []
        # a batch the model did not score (e.g. written by a custom learner): base fields
        assert sinks.write_assignments(records[:1], ["d"], np.array([1]), np.array([0.09]),
                                       8) == []
        sinks.flush()
        sink.sync()
    finally:
        sink.close()
    got = {m.key: json.loads(m.value) for m in read_topic(kafka_broker.bootstrap, topic)}
    assert got[b"a"] == {"id": "a", "cluster": 1, "distance": pytest.approx(0.2),
                         "sq_distance": 0.04, "step": 7, "novelty": 0.5, "outlier": False,
                         "second_cluster": 2, "margin": 0.25}
    assert got[b"b"]["outlier"] is True and got[b"b"]["novelty"] == 0.004
    assert got[b"b"]["second_cluster"] == 0 and got[b"b"]["margin"] == 1.5
    # one cluster only: no second cluster, an infinite margin written as JSON null
    assert got[b"c"]["second_cluster"] == -1 and got[b"c"]["margin"] is None
    assert set(got[b"d"]) == {"id", "cluster", "distance", "sq_distance", "step"}
    assert not math.isnan(got[b"d"]["distance"])
