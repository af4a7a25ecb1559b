"""A checkpoint folder the service cannot write: ``streamkm run`` refuses
to start before writing any output, on a read-only and on a full file system.

As root, ``chmod`` does not stop writes, so the folders are real tmpfs mounts (read-only, or
small and filled up). Mounting needs root (CAP_SYS_ADMIN): elsewhere the tests are skipped.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.service_process import blob_rows, cli, service_config, write_jsonl

pytestmark = pytest.mark.integration


def _mount_tmpfs(target: Path, options: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[list[Path]]:
    mounted: list[Path] = []
    yield mounted
    for target in mounted:
        subprocess.run(["umount", str(target)], check=False)


def test_read_only_checkpoint_folder_refuses_before_any_output(tmp_path: Path,
                                                               mounts: list[Path]) -> None:
    folder = tmp_path / "ro"
    _mount_tmpfs(folder, "ro,size=1m")
    mounts.append(folder)
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(300))
    config = service_config(tmp_path, data)
    proc = cli("run", "-c", str(config), env={"STREAMKM_CHECKPOINT__DIR": str(folder / "ck")})
    assert proc.returncode == 2
    assert proc.stderr == (
        f"streamkm: error: checkpoint.dir '{folder / 'ck'}' is not writable (its existing "
        f"parent '{folder}'): the file system is read-only: set [checkpoint] dir or "
        f"STREAMKM_CHECKPOINT__DIR to a writable folder\n")
    assert not (tmp_path / "out").exists()


def _fill(folder: Path) -> None:
    with open(folder / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def _full_folder_and_config(tmp_path: Path, mounts: list[Path]) -> tuple[Path, Path]:
    """A full 256 KiB tmpfs and a configuration of 300 records (folder, config file)."""
    folder = tmp_path / "full"
    _mount_tmpfs(folder, "size=256k")
    mounts.append(folder)
    _fill(folder)
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(300))
    return folder, service_config(tmp_path, data)


def test_full_checkpoint_folder_refuses_before_any_output(tmp_path: Path,
                                                          mounts: list[Path]) -> None:
    folder, config = _full_folder_and_config(tmp_path, mounts)
    proc = cli("run", "-c", str(config), env={"STREAMKM_CHECKPOINT__DIR": str(folder)})
    assert proc.returncode == 2
    assert proc.stderr == (
        f"streamkm: error: checkpoint.dir '{folder}' is not writable: the file system is "
        f"full: set [checkpoint] dir or STREAMKM_CHECKPOINT__DIR to a writable folder\n")
    assert not (tmp_path / "out").exists()


def test_service_without_its_first_checkpoint_writes_no_output(tmp_path: Path,
                                                               mounts: list[Path]) -> None:
    """Past the preflight (the disk filled up in between), the runtime still refuses."""
    from prometheus_client import CollectorRegistry

    from streamkm.app.service import Service
    from streamkm.config.schema import load_config
    from streamkm.exceptions import CheckpointError

    folder, config_file = _full_folder_and_config(tmp_path, mounts)
    config = load_config(config_file, env={"STREAMKM_CHECKPOINT__DIR": str(folder)})
    service = Service(config, registry=CollectorRegistry())
    with pytest.raises(CheckpointError, match="cannot write the initial checkpoint"):
        service.start()
    assert (tmp_path / "out" / "assignments.jsonl").stat().st_size == 0
    assert not list(folder.glob("checkpoint-*"))
