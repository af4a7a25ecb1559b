"""The configuration stored in a checkpoint against the current one: which differences
define the model (refuse) and which are harmless (apply and log)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamkm import MiniBatchKernelKMeans
from streamkm.config.diff import (
    check_against_checkpoint,
    checkpoint_config,
    compare_configs,
    is_model_defining,
)
from streamkm.config.schema import config_from_mapping
from streamkm.config.view import config_defaults, flatten_config
from streamkm.exceptions import ConfigError

pytestmark = pytest.mark.unit

RAW = {"source": {"paths": ["in.jsonl"]}, "decoding": {"dim": 2},
       "model": {"n_clusters": 3, "tau": 50}, "batching": {"batch_size": 64}}


def flat(**sections: dict) -> dict:
    raw = {**RAW, **{k: {**RAW.get(k, {}), **v} for k, v in sections.items()}}
    return flatten_config(config_from_mapping(raw, base_dir=Path("/srv")))


@pytest.mark.parametrize(("key", "defining"), [
    ("model.n_clusters", True), ("model.gamma", True), ("model.tol", True),
    ("batching.batch_size", True), ("decoding.dim", True), ("decoding.dtype", True),
    ("sketch.kind", True), ("sketch.eps", True), ("drift.k_max", True),
    ("sketch.resketch_every", False), ("sketch.resketch_on_drift", False),
    ("batching.max_wait_ms", False), ("batching.first_batch_wait_ms", False),
    ("batching.first_batch_size", False),
    ("decoding.x_field", False), ("source.paths", False),
    ("sinks.assignments", False), ("metrics.port", False), ("checkpoint.keep", False),
    ("kafka.bootstrap_servers", False), ("logging.level", False), ("scaleout.enabled", False),
])
def test_classification(key: str, defining: bool) -> None:
    assert is_model_defining(key) is defining


def test_diff_lines_split_by_kind() -> None:
    diff = compare_configs(flat(), flat(model={"n_clusters": 5, "gamma": 0.5},
                                        batching={"max_wait_ms": 100.0},
                                        metrics={"port": 0}))
    assert diff.model_defining == ["model.gamma: checkpoint 'auto', config 0.5",
                                   "model.n_clusters: checkpoint 3, config 5"]
    assert diff.harmless == ["batching.max_wait_ms: checkpoint 500.0, config 100.0",
                             "metrics.port: checkpoint 9108, config 0"]
    assert not compare_configs(flat(), flat())


def test_switching_a_section_on_shows_the_switch_only() -> None:
    diff = compare_configs(flat(), flat(drift={"enabled": True, "k_max": 6}))
    assert diff.model_defining == ["drift.enabled: checkpoint False, config True"]


def test_older_checkpoint_compared_on_the_model_parameters() -> None:
    model = MiniBatchKernelKMeans(n_clusters=3, tau=50, batch_size=64, random_state=0)
    model.partial_fit(np.random.default_rng(0).normal(size=(64, 2)))
    _arrays, model_meta = model.get_state()
    meta = {"model": model_meta}  # no "config": written before it was stored
    stored, complete = checkpoint_config(meta)
    assert not complete and stored["model.n_clusters"] == 3 and stored["decoding.dim"] == 2
    config = config_from_mapping({**RAW, "model": {"n_clusters": 4, "tau": 50}})
    with pytest.raises(ConfigError, match="model.n_clusters: checkpoint 3, config 4"):
        check_against_checkpoint(config, meta, "old.npz")
    # a harmless change cannot be listed, and does not refuse
    same = config_from_mapping({**RAW, "batching": {"batch_size": 64, "max_wait_ms": 10.0}})
    assert not check_against_checkpoint(same, meta, "old.npz")
    # --reset-model accepts the change
    assert check_against_checkpoint(config, meta, "old.npz", reset_model=True).model_defining


def _without_defaults(stored: dict) -> dict:
    """A stored configuration as a version that listed only the keys set wrote it."""
    defaults = config_defaults()
    return {k: v for k, v in stored.items() if k not in defaults or defaults[k] != v}


def test_a_key_the_stored_configuration_lacks_reads_as_its_default() -> None:
    raw = {**RAW, "drift": {"enabled": True, "k_max": 6}}
    config = config_from_mapping(raw, base_dir=Path("/srv"))
    stored = _without_defaults(flatten_config(config))
    assert "model.gamma" not in stored and "drift.threshold" not in stored
    assert stored["model.tau"] == 50 and stored["drift.k_max"] == 6
    assert not check_against_checkpoint(config, {"config": stored}, "old.npz")
    changed = config_from_mapping({**raw, "model": {"n_clusters": 3, "tau": 50, "gamma": 0.5},
                                   "drift": {"enabled": True, "k_max": 6, "threshold": 2.0}},
                                  base_dir=Path("/srv"))
    with pytest.raises(ConfigError) as info:
        check_against_checkpoint(changed, {"config": stored}, "old.npz")
    assert "model.gamma: checkpoint 'auto', config 0.5" in str(info.value)
    assert "drift.threshold: checkpoint 1.0, config 2.0" in str(info.value)
