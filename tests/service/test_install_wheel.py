"""The install section of docs/operations.md works: build the wheel with ``python -m build``,
install it in a fresh virtual environment (dependencies from pip's configured indexes),
run ``streamkm --version`` and a 10-second ``streamkm demo``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamkm import __version__

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _source_tree(target: Path) -> Path:
    """The committed files of the checkout (what a fresh clone holds)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src, dst = REPO / name, target / name
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    return target


def test_wheel_installs_in_fresh_venv_and_runs_demo(tmp_path: Path) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("needs a git checkout to list the source files")
    source = _source_tree(tmp_path / "src")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"),
                    str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("streamkm-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    version = subprocess.run([str(venv / "bin" / "streamkm"), "--version"], env=env,
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert version.stdout.strip() == f"streamkm {__version__}", version.stderr
    demo = subprocess.run([str(venv / "bin" / "streamkm"), "demo", "--duration", "10",
                           "--metrics-port", "0", "--state-dir", str(tmp_path / "demo")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "stopped:" in demo.stdout and (tmp_path / "demo" / "assignments.jsonl").exists()
    # the installed package is the wheel's, not the checkout's
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import streamkm, streamkm_connectors; print(streamkm.__file__)"],
                           env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert str(venv) in where.stdout, where.stderr
