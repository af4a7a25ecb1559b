"""The model sink as an application uses it: ``streamkm run`` publishes its model (a file
replaced atomically, or a Kafka topic keyed by step); the application loads it with
``MiniBatchKernelKMeans.load`` and predicts exactly what the service assigned with it.

A model published at step ``S`` is the model that assigns the next batch, whose assignments
carry ``step = S + 1`` (the step counts the update the batch then makes).
"""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from streamkm import MiniBatchKernelKMeans
from tests.helpers.processes import count_lines
from tests.helpers.service_process import RunningService, blob_rows, service_config, write_jsonl


def _assignments(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _app_clusters(model: MiniBatchKernelKMeans, rows: list[list[float]]) -> list[int]:
    """What an application computes: stable cluster ids of its records."""
    return model.cluster_ids_[model.predict(np.asarray(rows))].tolist()


class _Reader(threading.Thread):
    """An application polling the model file while the service rewrites it."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.stop = threading.Event()
        self.versions: list[int] = []
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            if self.path.exists():
                try:
                    self.versions.append(int(MiniBatchKernelKMeans.load(self.path).n_steps_))
                except Exception as exc:  # noqa: BLE001 - any failure is a torn read
                    self.errors.append(repr(exc))
            time.sleep(0.001)


@pytest.mark.integration
def test_app_loads_the_model_file_and_predicts_what_the_service_assigned(tmp_path: Path
                                                                         ) -> None:
    data = tmp_path / "in.jsonl"
    first = blob_rows(600)
    write_jsonl(data, first)
    config = service_config(tmp_path, data)
    model_file = tmp_path / "out" / "model.npz"
    output = tmp_path / "out" / "assignments.jsonl"
    reader = _Reader(model_file)
    reader.start()
    service = RunningService(config, env={"STREAMKM_SINKS__MODEL": "out/model.npz",
                                          "STREAMKM_SINKS__MODEL_EVERY_BATCHES": "1"})
    try:
        service.wait_until(lambda: count_lines(output) >= 600)
        last_step = max(a["step"] for a in _assignments(output))
        service.wait_until(lambda: model_file.exists() and int(
            MiniBatchKernelKMeans.load(model_file).n_steps_) == last_step)
        model = MiniBatchKernelKMeans.load(model_file)  # the application's copy, step S

        second = blob_rows(100, seed=1, start=600)
        write_jsonl(data, second, append=True)
        service.wait_until(lambda: count_lines(output) >= 700)
    finally:
        assert service.stop() == 0
        reader.stop.set()
        reader.join(timeout=10)

    by_id = dict(first + second)
    made_by_model = [a for a in _assignments(output) if a["step"] == last_step + 1]
    assert made_by_model and {a["id"] for a in made_by_model} <= {rid for rid, _ in second}
    assert _app_clusters(model, [by_id[a["id"]] for a in made_by_model]) == [
        a["cluster"] for a in made_by_model]
    # the reader never saw a partial file, and saw the model move forward
    assert reader.errors == []
    assert len(set(reader.versions)) >= 2 and reader.versions == sorted(reader.versions)


@pytest.mark.kafka
def test_model_topic_is_keyed_by_step_and_predicts_the_assignments(kafka_broker: object,
                                                                   tmp_path: Path) -> None:
    from tests.helpers.kafka_broker import (
        create_topics,
        produce,
        read_topic,
        valid_value,
        write_config,
    )

    bootstrap = kafka_broker.bootstrap  # type: ignore[attr-defined]
    topic, n = "features-model-sink", 400
    create_topics(bootstrap, {topic: 1, f"{topic}-out-assignments": 1,
                              f"{topic}-out-events": 1, f"{topic}-out-dlq": 1,
                              f"{topic}-model": 1})
    produce(bootstrap, topic, [(None, valid_value(i), 0) for i in range(n)])
    config = write_config(tmp_path, bootstrap, topic=topic, group="g-model-sink",
                          out_prefix=f"{topic}-out")
    service = RunningService(config, env={"STREAMKM_SINKS__MODEL_TOPIC": f"{topic}-model",
                                          "STREAMKM_SINKS__MODEL_EVERY_BATCHES": "1"})
    try:
        service.wait_until(lambda: any(e["event"] == "checkpoint_written" and e["step"] >= 8
                                       for e in service.events()))
    finally:
        assert service.stop() == 0

    models = {int(m.key): MiniBatchKernelKMeans.load(io.BytesIO(m.value))
              for m in read_topic(bootstrap, f"{topic}-model")}
    assert len(models) >= 2
    assert all(model.n_steps_ == step for step, model in models.items())
    x_by_id = {f"r{i}": json.loads(valid_value(i))["x"] for i in range(n)}
    assignments = [json.loads(m.value) for m in read_topic(bootstrap, f"{topic}-out-assignments")]
    checked = 0
    for step, model in models.items():
        made = [a for a in assignments if a["step"] == step + 1]
        if made:
            assert _app_clusters(model, [x_by_id[a["id"]] for a in made]) == [
                a["cluster"] for a in made]
            checked += 1
    assert checked >= 2


@pytest.mark.integration
def test_a_short_run_and_a_resumed_run_leave_the_model_of_their_last_step(tmp_path: Path
                                                                          ) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(400))
    config = service_config(tmp_path, data)
    model_file = tmp_path / "out" / "model.npz"
    output = tmp_path / "out" / "assignments.jsonl"
    env = {"STREAMKM_SINKS__MODEL": "out/model.npz"}  # every 50 batches: never in this run

    def run_to(n_assigned: int) -> int:
        service = RunningService(config, env=env)
        try:
            service.wait_until(lambda: count_lines(output) >= n_assigned)
        finally:
            assert service.stop() == 0
        return max(a["step"] for a in _assignments(output))

    first_step = run_to(400)
    assert first_step < 50
    assert int(MiniBatchKernelKMeans.load(model_file).n_steps_) == first_step

    write_jsonl(data, blob_rows(300, seed=1, start=400), append=True)
    second_step = run_to(700)
    assert second_step > first_step
    assert int(MiniBatchKernelKMeans.load(model_file).n_steps_) == second_step
