"""SHA-256 over the checkpoint's JSON metadata: an edited metadata block is
corrupt and a restart falls back to the previous checkpoint; format 1 files still load."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from streamkm._core.state_io import MetaDigestMissing, read_npz, write_npz_atomic
from streamkm.exceptions import StateError
from streamkm.io.checkpoint import CheckpointStore, read_checkpoint

pytestmark = pytest.mark.unit

META = "__meta__.json.npy"


def write_two(folder: Path) -> CheckpointStore:
    store = CheckpointStore(folder, keep=3)
    for offset in (100, 200):
        store.write(model_arrays={"counts": np.array([1, 2])}, model_meta=None,
                    positions={"in.jsonl": {"offset": offset}}, sink_positions={},
                    counters={"records_read": offset}, config_hash="h")
    return store


def edit_meta(path: Path, edit) -> None:
    """Rewrite the metadata entry of an npz with valid zip CRCs (only a digest can tell)."""
    with zipfile.ZipFile(path) as zf:
        entries = {name: zf.read(name) for name in zf.namelist()}
    blob = np.load(io.BytesIO(entries[META]), allow_pickle=False)
    meta = json.loads(blob.tobytes().decode())
    edit(meta)
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8))
    entries[META] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)


def test_edited_metadata_falls_back_to_previous_checkpoint(tmp_path: Path) -> None:
    store = write_two(tmp_path)
    newest = store.paths()[-1]
    edit_meta(newest, lambda m: m["positions"]["in.jsonl"].update(offset=999))
    with pytest.raises(StateError, match="metadata fails its SHA-256 check"):
        read_checkpoint(newest)
    skipped: list[Path] = []
    store.on_corrupt = lambda path, _err: skipped.append(path)
    ckpt = store.load_latest()
    assert skipped == [newest]
    assert ckpt.positions == {"in.jsonl": {"offset": 100}}


def test_removed_digest_in_format_2_is_corrupt(tmp_path: Path) -> None:
    store = write_two(tmp_path)
    newest = store.paths()[-1]
    edit_meta(newest, lambda m: m.pop("__meta_sha256__"))
    with pytest.raises(StateError, match="without its metadata SHA-256"):
        read_checkpoint(newest)
    assert store.load_latest().positions == {"in.jsonl": {"offset": 100}}


def test_format_1_checkpoint_without_digest_still_loads(tmp_path: Path) -> None:
    store = write_two(tmp_path)
    newest = store.paths()[-1]

    def as_format_1(meta: dict) -> None:
        meta.pop("__meta_sha256__")
        meta["format_version"] = 1

    edit_meta(newest, as_format_1)
    ckpt = read_checkpoint(newest)
    assert ckpt.meta["format_version"] == 1
    assert ckpt.positions == {"in.jsonl": {"offset": 200}}


def test_model_files_carry_the_metadata_digest(tmp_path: Path) -> None:
    path = tmp_path / "m.npz"
    write_npz_atomic(path, {"a": np.arange(3)}, {"k": 1.5})
    assert read_npz(path, require_meta_digest=True)[1] == {"k": 1.5}
    edit_meta(path, lambda m: m.update(k=2.5))
    with pytest.raises(StateError, match="fails its SHA-256"):
        read_npz(path)
    edit_meta(path, lambda m: m.pop("__meta_sha256__"))
    assert read_npz(path)[1] == {"k": 2.5}  # no digest: accepted unless required
    with pytest.raises(MetaDigestMissing):
        read_npz(path, require_meta_digest=True)


def test_inspect_reports_edited_metadata(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from streamkm.cli import main

    store = write_two(tmp_path)
    edit_meta(store.paths()[-1], lambda m: m["counters"].update(records_read=5))
    assert main(["checkpoint", "inspect", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "latest valid checkpoint: checkpoint-000000000001.npz" in text
    assert "checkpoint-000000000002.npz  INVALID" in text and "SHA-256" in text
