"""The install section of docs/operations.md works: build the wheel with ``python -m build``,
install it with pip in a fresh virtual environment, run ``streamkm --version`` and a
10-second ``streamkm demo``. The wheel is built once for the module, by the README's own
build lines in a fresh clone with the system's ``python3`` (a fresh build environment, as a
user makes it), and both tests use that build. The demo is the first run of that install:
it says, in one line, that it compiles the numba kernels (into the install's own cache), and
the next run, which loads them from there, says nothing.

The fresh environment sees, besides what pip installs there, exactly the distributions the
wheel's own ``Requires-Dist`` names (recursively, the versions of this test's environment,
linked in through a ``.pth`` directory instead of unpacked again: pip checks them against the
wheel's version bounds and installs the wheel only). A dependency missing from
``pyproject.toml`` fails the demo; resolving the dependencies from the package index is what
``scripts/test.sh``'s own ``pip install`` does on every run."""

from __future__ import annotations

import email
import os
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from streamkm import __version__

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
#: What the first run of an install says on stderr (:mod:`streamkm.cli`).
COMPILE_NOTICE = "streamkm: first run of this install: compiling the numba kernels"


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


def _requirement_closure(wheel: Path) -> list[metadata.Distribution]:
    """The installed distributions the wheel requires, recursively (extras not taken)."""
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        pending = email.message_from_bytes(zf.read(meta)).get_all("Requires-Dist") or []
    seen: dict[str, metadata.Distribution] = {}
    while pending:
        req = Requirement(pending.pop())
        name = canonicalize_name(req.name)
        if name in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        seen[name] = dist = metadata.distribution(req.name)
        pending.extend(dist.requires or [])
    return list(seen.values())


def _link_distributions(dists: list[metadata.Distribution], target: Path) -> Path:
    """A folder of links to the files of ``dists`` (their top-level entries in site-packages
    and their metadata), nothing else."""
    target.mkdir()
    for dist in dists:
        site = Path(dist.locate_file(""))
        tops = {Path(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            if (site / top).exists() and not (target / top).exists():
                (target / top).symlink_to(site / top)
    return target


def _readme_wheel_commands() -> list[str]:
    """The command lines of the README's "build a wheel" block."""
    text = (REPO / "README.md").read_text()
    block = text.split("Or build a wheel once", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def readme_build(tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The README's build lines (those before the wheel's install), as written, in a fresh
    clone, with the system's ``python3`` first on ``PATH`` (on Debian an externally managed
    Python, where ``pip install`` outside a virtual environment is refused); only the build
    environment's folder is moved under the test's own. ``(the build, the clone)``."""
    if not (REPO / ".git").exists():
        pytest.skip("needs a git checkout to list the source files")
    tmp = tmp_path_factory.mktemp("readme-build")
    commands = _readme_wheel_commands()
    install = next(i for i, line in enumerate(commands) if "dist/streamkm-*.whl" in line)
    build = " && ".join(commands[:install]).replace(".build-env", str(tmp / "b"))
    assert build
    source = _source_tree(tmp / "src")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"/usr/bin:/bin:{env.get('PATH', '')}"
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", build], cwd=source, env=env,
                          capture_output=True, text=True, timeout=600)
    return proc, source


def _built_wheel(build: tuple[subprocess.CompletedProcess[str], Path]) -> Path:
    """The wheel :func:`readme_build` wrote (its build asserted successful)."""
    proc, source = build
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (wheel,) = (source / "dist").glob("streamkm-*-py3-none-any.whl")
    return wheel


def test_wheel_installs_in_fresh_venv_and_runs_demo(
        readme_build: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path) -> None:
    wheel = _built_wheel(readme_build)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    deps = _link_distributions(_requirement_closure(wheel), tmp_path / "deps")
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "streamkm-test-deps.pth").write_text(f"{deps}\n")
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    installed = {p.name.split("-")[0] for p in site.glob("*.dist-info")}
    assert installed <= {"streamkm", "pip", "setuptools"}, installed  # the wheel only
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "NUMBA_CACHE_DIR")}
    version = subprocess.run([str(venv / "bin" / "streamkm"), "--version"], env=env,
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert version.stdout.strip() == f"streamkm {__version__}", version.stderr
    demo = subprocess.run([str(venv / "bin" / "streamkm"), "demo", "--duration", "10",
                           "--metrics-port", "0", "--state-dir", str(tmp_path / "demo")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "stopped:" in demo.stdout and (tmp_path / "demo" / "assignments.jsonl").exists()
    assert demo.stderr.count(COMPILE_NOTICE) == 1, demo.stderr[-3000:]
    assert any((site / "streamkm").rglob("*.nbi"))  # the install's cache was filled
    again = subprocess.run([str(venv / "bin" / "streamkm"), "demo", "--duration", "3",
                            "--metrics-port", "0", "--state-dir", str(tmp_path / "demo")],
                           env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode == 0 and "stopped:" in again.stdout, again.stderr[-3000:]
    assert COMPILE_NOTICE not in again.stderr
    # the installed package is the wheel's, not the checkout's
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import streamkm, streamkm_connectors; print(streamkm.__file__)"],
                           env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert str(venv) in where.stdout, where.stderr


def test_readme_wheel_build_works_with_the_system_python(
        readme_build: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    """The README's build lines make the wheel (see :func:`readme_build`)."""
    with zipfile.ZipFile(_built_wheel(readme_build)) as zf:
        assert "streamkm/cli.py" in zf.namelist()
