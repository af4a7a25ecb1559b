"""Checkpoint store: atomic writes, keep-last-K, corrupt latest falls back, no pickle."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from streamkm.app.inspect import summarize_checkpoints
from streamkm.exceptions import CheckpointError, StateError
from streamkm.io.checkpoint import CheckpointStore, read_checkpoint

pytestmark = pytest.mark.unit


def write_one(store: CheckpointStore, step: int) -> Path:
    return store.write(
        model_arrays={"counts": np.array([step, 1], dtype=np.int64),
                      "support": np.full((3, 2), float(step))},
        model_meta={"n_steps": step}, positions={"p": {"offset": step * 10}},
        sink_positions={"assignments": {"path": "a", "bytes": step * 100}},
        counters={"records_accepted": step}, config_hash="h",
        extra={"batcher": {"next_part": 0}})


def test_round_trip(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "ck", keep=3)
    path = write_one(store, 7)
    ckpt = read_checkpoint(path)
    assert ckpt.sequence == 1
    assert ckpt.model_meta == {"n_steps": 7}
    assert ckpt.positions == {"p": {"offset": 70}}
    assert ckpt.sink_positions["assignments"]["bytes"] == 700
    assert ckpt.counters == {"records_accepted": 7}
    assert ckpt.meta["format_version"] == 2 and ckpt.meta["config_hash"] == "h"
    np.testing.assert_array_equal(ckpt.model_arrays["counts"], [7, 1])


def test_keep_last_k_and_sequence_continues(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, keep=2)
    for step in range(5):
        write_one(store, step)
    names = [p.name for p in store.paths()]
    assert names == ["checkpoint-000000000004.npz", "checkpoint-000000000005.npz"]
    reopened = CheckpointStore(tmp_path, keep=2)
    assert write_one(reopened, 9).name == "checkpoint-000000000006.npz"
    assert reopened.load_latest().model_meta == {"n_steps": 9}


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupt_latest_falls_back_to_previous(tmp_path: Path, damage: str) -> None:
    skipped: list[Path] = []
    store = CheckpointStore(tmp_path, keep=3, on_corrupt=lambda p, _e: skipped.append(p))
    write_one(store, 1)
    latest = write_one(store, 2)
    data = latest.read_bytes()
    if damage == "truncate":
        latest.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        # Flip a byte inside the stored (uncompressed) array data of "support".
        with zipfile.ZipFile(latest) as zf:
            info = zf.getinfo("model.support.npy")
        offset = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.file_size - 3
        latest.write_bytes(data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1:])
    else:
        latest.write_bytes(b"not a zip at all")
    ckpt = store.load_latest()
    assert ckpt is not None and ckpt.model_meta == {"n_steps": 1}
    assert skipped == [latest]
    with pytest.raises(StateError):
        read_checkpoint(latest)
    summaries = summarize_checkpoints(tmp_path)
    assert [s["valid"] for s in summaries] == [True, False]


def test_all_corrupt_is_an_error_and_empty_is_none(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, keep=3)
    assert store.load_latest() is None
    write_one(store, 1).write_bytes(b"junk")
    with pytest.raises(CheckpointError):
        store.load_latest()


def test_no_pickle_object_arrays_refused(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, keep=3)
    with pytest.raises(CheckpointError):
        store.write(model_arrays={"bad": np.array([object()], dtype=object)}, model_meta=None,
                    positions={}, sink_positions={}, counters={}, config_hash="h")
    assert store.paths() == []


def test_pickled_array_in_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint-000000000001.npz"
    np.savez(path, **{"model.x": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(StateError):
        read_checkpoint(path)


def test_stale_temp_files_removed(tmp_path: Path) -> None:
    stale = tmp_path / ".checkpoint-000000000003.npz.tmp-999"
    stale.write_bytes(b"partial")
    CheckpointStore(tmp_path, keep=1)
    assert not stale.exists()
