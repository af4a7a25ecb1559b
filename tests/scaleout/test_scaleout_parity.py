"""Scale-out at parity with one process, against the real (Tansu) broker: drift handling
and sketched sparse records across two ``streamkm run`` processes.

* drift: one cluster of the stream splits in two mid-stream (the second regime is fed until
  the split is announced, whatever the load); the leader splits it, announces
  the split with the model version, every member's later assignments use the new stable id,
  the split event is written once, the global counts are exact and the clustering is within
  0.02 ARI of a single process on the same stream;
* sketching: sparse planted-topics documents (d = 2000, ``json_sparse``) through an SVD
  sketch re-sketched by the leader: counts exact, ARI within 0.02 of a single process, the
  sketch epoch changes, and every update holds rows of exactly one epoch (its rows are that
  epoch's sketch of its raw rows).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from sklearn.metrics import adjusted_rand_score

from streamkm import MiniBatchKernelKMeans
from streamkm.config.schema import load_config
from streamkm.runtime.metrics import ServiceMetrics
from streamkm.runtime.sketching import ServiceSketching
from streamkm.runtime.wiring import build_model
from streamkm.scaleout.leader import ModelVersion
from streamkm.scaleout.messages import ModelUpdate, decode_message
from tests.helpers.kafka_broker import (
    ModelTopic,
    TansuBroker,
    create_topics,
    owned_partitions,
    produce,
    read_topic,
    write_config,
)
from tests.helpers.planted_topics import PlantedTopics
from tests.helpers.processes import kill, log_events, start_service, stop, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 6
BATCH = 100
MEMBERS = "ab"


def _configs(tmp: Path, bootstrap: str, prefix: str, *, decoding: str, n_clusters: int,
             extra: str, batch_size: int = BATCH) -> dict[str, Path]:
    """Two members' configs: the common test config with the ``decoding`` section,
    ``n_clusters``, ``batch_size`` and the ``extra`` sections, in scale-out mode."""
    create_topics(bootstrap, {prefix: PARTITIONS, f"{prefix}-out-assignments": 3,
                              f"{prefix}-out-events": 1, f"{prefix}-out-dlq": 1})
    configs = {}
    for member in MEMBERS:
        config = write_config(tmp / member, bootstrap, topic=prefix, group=f"{prefix}-g",
                              out_prefix=f"{prefix}-out", batch_size=batch_size)
        text = config.read_text()
        for old, new in (("[decoding]\ndim = 2\n", f"[decoding]\n{decoding}\n"),
                         ("n_clusters = 4\n", f"n_clusters = {n_clusters}\n")):
            assert old in text
            text = text.replace(old, new)
        config.write_text(text + extra + f"""
[scaleout]
enabled = true
updates_topic = "{prefix}-updates"
model_topic = "{prefix}-model"
coordination_topic = "{prefix}-coord"
member_id = "{member}"
publish_every_updates = 12
publish_interval_ms = 150
""")
        configs[member] = config
    return configs


def _run(configs: dict[str, Path]) -> tuple[dict[str, object], dict[str, Path]]:
    logs = {m: c.parent / "service.log" for m, c in configs.items()}
    return {m: start_service(c, logs[m]) for m, c in configs.items()}, logs


def _wait_exact(model: ModelTopic, expected: int, procs: list[object]) -> None:
    wait_until(lambda: model.count() >= expected, 90,
               f"the global model to count {expected} records", procs, interval=0.2)
    time.sleep(1.0)  # nothing more arrives: not a single record counted twice
    assert model.count() == expected


def _all_versions(bootstrap: str, topic: str) -> list[ModelVersion]:
    """Every complete version in the model topic, oldest first."""
    from streamkm_connectors.scaleout_kafka import ModelReader

    versions: list[ModelVersion] = []
    reader = ModelReader({"bootstrap_servers": [bootstrap]}, topic, max_fetch_bytes=1 << 22,
                         on_version=lambda v, data: versions.append(
                             ModelVersion.from_bytes(data)), from_tail=False)
    try:
        reader.read_to_end(60)
    finally:
        reader.close()
    return versions


# ---------------------------------------------------------------- drift

CENTERS = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
#: The leader steps once per update: one partition's share of a member's batch. The drift
#: monitor observes a cluster only in a step that gives it at least ``min_batch_rows`` (16)
#: rows, and each partition carries the 3 clusters in turn: a batch of 300 holds about 100
#: records of each of the 3 partitions a member reads (33 rows per cluster), 50 while one
#: member reads all 6 (16.7 per cluster).
DRIFT_BATCH = 300
#: From here on cluster 2 is two clusters, 6 apart. Before it the leader buffers
#: ``DRIFT_BATCH`` records of each of the 6 partitions to initialise the model (1,800) and
#: then sets every cluster's spread reference level on the first regime: 1,800 more records,
#: about 18 updates of 100, where 5 observed updates per cluster suffice.
CHANGE = 3600
FEED_CHUNK = 1800  # records of the second regime produced at a time until the split
FEED_LIMIT = 15000
DRIFT_POLICY = {"k_max": 5, "reservoir_size": 128, "min_reservoir": 48}
DRIFT = "\n[drift]\nenabled = true\n" + "".join(f"{k} = {v}\n" for k, v in DRIFT_POLICY.items())


def _point(i: int) -> tuple[np.ndarray, int]:
    """Record ``i`` and its true cluster (3: the right half of cluster 2 after the split)."""
    rng = np.random.default_rng(50_000 + i)
    c = i % 3
    x = CENTERS[c] + rng.normal(0, 0.5, 2)
    if c == 2 and i >= CHANGE:
        right = rng.random() < 0.5
        x[0] += 3.0 if right else -3.0
        c = 3 if right else 2
    return x, c


def _produce_points(bootstrap: str, topic: str, lo: int, hi: int) -> None:
    # runs of 3 consecutive records (one per cluster) per partition: every partition
    # carries the whole mixture
    produce(bootstrap, topic, [
        (f"k{i}".encode(), json.dumps({"id": f"r{i}", "x": _point(i)[0].round(6).tolist()})
         .encode(), (i // 3) % PARTITIONS) for i in range(lo, hi)])


def _drift_single_process_ari(n: int, held_out: np.ndarray, truth: np.ndarray) -> float:
    single = MiniBatchKernelKMeans(3, tau=40, n_init=1, random_state=3,
                                   batch_size=DRIFT_BATCH, drift=DRIFT_POLICY)
    rows = np.array([_point(i)[0] for i in range(n)])
    for lo in range(0, n, DRIFT_BATCH):
        single.step(rows[lo:lo + DRIFT_BATCH])
    assert single.n_clusters_ == 4, "the single process did not split either"
    return adjusted_rand_score(truth, single.cluster_ids_[single.predict(held_out)])


def _feed_until(announced: Callable[[], bool], model: ModelTopic, procs: list[Any],
                bootstrap: str, prefix: str, produced: int) -> int:
    """Produce the stream from record ``produced`` on, one chunk each time the global model
    has counted every record produced so far, until ``announced()``; the records produced.
    Fails when the model's count stops growing for 90 s or after ``FEED_LIMIT`` records."""
    last_count, last_progress = -1, time.monotonic()
    while not announced():
        count = model.count()
        if count > last_count:
            last_count, last_progress = count, time.monotonic()
        assert time.monotonic() - last_progress < 90, (
            f"the global model stopped counting at {count} of {produced} records")
        assert all(proc.poll() is None for proc in procs), "a member exited"
        if count >= produced:
            assert produced < FEED_LIMIT, f"no split announced after {produced} records"
            _produce_points(bootstrap, prefix, produced, produced + FEED_CHUNK)
            produced += FEED_CHUNK
        time.sleep(0.2)
    return produced


def test_drift_split_decided_by_the_leader_used_by_every_member(kafka_broker: TansuBroker,
                                                                 tmp_path: Path) -> None:
    bootstrap, prefix = kafka_broker.bootstrap, "so-drift"
    configs = _configs(tmp_path, bootstrap, prefix, decoding="dim = 2", n_clusters=3,
                       extra=DRIFT, batch_size=DRIFT_BATCH)
    _produce_points(bootstrap, prefix, 0, CHANGE)
    procs, logs = _run(configs)
    model = ModelTopic(bootstrap, f"{prefix}-model")

    def announced() -> bool:
        model.count()
        return (model.latest is not None and bool(model.latest.cluster_events)
                and all(any(e.get("event") == "scaleout_clusters_changed"
                            for e in log_events(log)) for log in logs.values()))

    try:
        # The leader sets its spread reference levels on the first regime only: the second
        # one (cluster 2 in two halves) is produced once every record of the first counts,
        # and fed until both members announce the split, however fast the leader goes.
        wait_until(lambda: model.count() >= CHANGE, 90, "the first regime counted",
                   list(procs.values()), interval=0.2)
        first = _feed_until(announced, model, list(procs.values()), bootstrap, prefix,
                            CHANGE)
        split_version = min(e["version"] for e in model.latest.cluster_events)
        n = first + 1500
        _produce_points(bootstrap, prefix, first, n)  # assigned after both adopted the split
        _wait_exact(model, n, list(procs.values()))
        owner = {int(key.rsplit(":", 1)[1]): member  # who owns each partition at the end
                 for member, log in logs.items() for key in owned_partitions(log)}
        for proc in procs.values():
            assert stop(proc) == 0
    finally:
        for proc in procs.values():
            kill(proc)
        model.close()
    final = model.latest
    assert final is not None and final.counters["records_applied"] == n
    splits = [e for e in final.cluster_events if e["event"] == "split"]
    assert splits and all(e["version"] >= split_version for e in splits)
    new_id = splits[0]["into"][1]
    assert new_id in final.build_model().cluster_ids_.tolist()

    # announced with the version: each member logged it with the new ids
    for member, log in logs.items():
        changed = [e for e in log_events(log) if e.get("event") == "scaleout_clusters_changed"]
        assert changed and new_id in changed[0]["cluster_ids"], member
        assert changed[0]["model_version"] >= split_version
    # the split event is written once, by the leader
    events = [json.loads(m.value) for m in read_topic(bootstrap, f"{prefix}-out-events")]
    written = [e for e in events if e["event"] == "split"]
    assert len(written) == len(splits) and all("leader" in e for e in written)

    # assignments: made with a version before the split never use the new id; those of the
    # records produced after both members adopted it (from every member) use the new ids
    late: dict[str, list[tuple[int, int]]] = {m: [] for m in MEMBERS}
    for message in read_topic(bootstrap, f"{prefix}-out-assignments"):
        a = json.loads(message.value)
        i = int(a["id"][1:])
        if a["step"] < split_version:
            assert a["cluster"] != new_id, a
        if i >= first:
            assert a["step"] >= split_version, a
            late[owner[(i // 3) % PARTITIONS]].append((_point(i)[1], a["cluster"]))
    for member, pairs in late.items():
        assert len(pairs) > 100, member  # both members assigned records after the split
        halves = {t: Counter(c for tt, c in pairs if tt == t).most_common(1)[0][0]
                  for t in (2, 3)}
        assert halves[2] != halves[3] and new_id in halves.values(), (member, halves)
        agree = np.mean([c == halves.get(t, c) for t, c in pairs if t in (2, 3)])
        assert agree > 0.97, (member, agree)

    held_out_ids = range(10**6, 10**6 + 900)
    held_out = np.array([_point(i)[0] for i in held_out_ids])
    truth = np.array([_point(i)[1] for i in held_out_ids])
    built = final.build_model()
    ari_global = adjusted_rand_score(truth, built.cluster_ids_[built.predict(held_out)])
    ari_single = _drift_single_process_ari(n, held_out, truth)
    assert abs(ari_global - ari_single) <= 0.02, (ari_global, ari_single)
    assert ari_global > 0.95


# ---------------------------------------------------------------- sketching, sparse records

TOPICS = PlantedTopics(dim=2000, n_topics=4, seed=5)
SKETCH = "\n[sketch]\nkind = \"svd\"\nresketch_every = 15\nreservoir_size = 300\n"


def test_sketched_sparse_records_one_epoch_per_update(kafka_broker: TansuBroker,
                                                      tmp_path: Path) -> None:
    bootstrap, prefix = kafka_broker.bootstrap, "so-sketch"
    configs = _configs(tmp_path, bootstrap, prefix, n_clusters=4, extra=SKETCH,
                       decoding=f'format = "json_sparse"\ndim = {TOPICS.dim}')
    n = 3000

    def produce_docs(lo: int, hi: int) -> None:
        produce(bootstrap, prefix, [(f"k{i}".encode(), TOPICS.json(i), (i // 4) % PARTITIONS)
                                    for i in range(lo, hi)])

    produce_docs(0, 600)
    procs, logs = _run(configs)
    model = ModelTopic(bootstrap, f"{prefix}-model")
    try:
        # the rest in steps, each after the previous one was counted: the members assign
        # and project with models (and sketch epochs) they adopted
        for lo in range(600, n, 600):
            wait_until(lambda lo=lo: model.count() >= lo, 60, f"{lo} records counted",
                       list(procs.values()), interval=0.2)
            produce_docs(lo, lo + 600)
        _wait_exact(model, n, list(procs.values()))
        for proc in procs.values():
            assert stop(proc) == 0
    finally:
        for proc in procs.values():
            kill(proc)
        model.close()
    final = model.latest
    assert final is not None and final.counters["records_applied"] == n
    assert final.sketch_epoch is not None and final.sketch_epoch >= 2

    # every update holds rows of one sketch epoch: its rows are that epoch's sketch (as
    # published with the model) of its raw rows
    sketches, by_version = {}, {}
    for version in _all_versions(bootstrap, f"{prefix}-model"):
        if version.sketch_epoch is not None:
            by_version[version.version] = version
            sketches.setdefault(version.sketch_epoch, version.build_model().sketcher_)
    epochs: Counter[int] = Counter()
    for message in read_topic(bootstrap, f"{prefix}-updates"):
        update = decode_message(message.value)
        if not isinstance(update, ModelUpdate) or update.raw is None:
            continue
        epochs[update.sketch_epoch] += 1
        assert update.sketch_epoch in sketches, update.sketch_epoch
        np.testing.assert_allclose(update.rows, sketches[update.sketch_epoch].transform(
            update.raw), rtol=1e-5, atol=1e-6)
    assert len(epochs) >= 2, epochs  # the members moved to a new epoch mid-stream
    adopted = [e for log in logs.values() for e in log_events(log)
               if e.get("event") == "scaleout_sketch_adopted"]
    assert {e["member"] for e in adopted} == set(MEMBERS)
    assert final.counters["updates_reprojected"] <= sum(epochs.values())

    # an assignment is made with the sketch, model and novelty buffers of the version it
    # names (``step``)
    assignments = [json.loads(m.value)
                   for m in read_topic(bootstrap, f"{prefix}-out-assignments")]
    assert {a["id"] for a in assignments} == {f"d{i}" for i in range(n)}
    sample = assignments[::25]
    assert len({a["step"] for a in sample}) >= 3
    models = {v: by_version[v].build_model() for v in {a["step"] for a in sample}}
    for a in sample:
        doc = TOPICS.matrix([int(a["id"][1:])])
        assert a["cluster"] == int(models[a["step"]].predict(doc)[0]), a
        assert a["novelty"] == float(models[a["step"]].score_samples(doc)[0]), a
        assert a["outlier"] is False and a["second_cluster"] != a["cluster"], a

    held_out_ids = range(10**6, 10**6 + 600)
    held_out = TOPICS.matrix(held_out_ids)
    truth = [TOPICS.label(i) for i in held_out_ids]
    ari_global = adjusted_rand_score(truth, final.build_model().predict(held_out))
    config = load_config(configs["a"])
    sketching = ServiceSketching(config, ServiceMetrics(CollectorRegistry()))
    single = sketching.wrap(build_model(config.model, BATCH, None))
    for lo in range(0, n, BATCH):
        sketching.step(single, TOPICS.matrix(range(lo, lo + BATCH)))
    ari_single = adjusted_rand_score(truth, single.predict(held_out))
    assert abs(ari_global - ari_single) <= 0.02, (ari_global, ari_single)
    assert ari_global > 0.9
