"""How the suite runs in parallel (pytest-xdist, ``-n N``): a pytest plugin loaded by
``tests/conftest.py``.

* Groups: a test carrying ``pytest.mark.xdist_group("name")`` runs on the same worker as every
  other test of that group, one after the other. Tests marked ``netns`` form the ``netns``
  group; the tests of a module that defines a module- or class-scoped fixture form one group
  per module (its live stack is built once, not once per worker).
* Alone: a test marked ``alone`` (and every ``netns`` test: its timing bounds hold on a
  quiet machine) runs while the other workers wait (a lock file shared by every test).
* Order: work is handed out in collection order, one test (or group) at a time to whichever
  worker is free; tests marked ``slow`` come first, then the other process tests, then the
  ``unit`` tests (the longest start early, the short ones fill the end), and the tests that
  run alone after all of them.
* Warm-up: hypothesis's Unicode tables are built (and cached under ``.hypothesis/``) once,
  in the controller, before the workers start; :mod:`tests.helpers.numba_warmup` compiles
  the numba kernels into their cache in the background while the workers collect. A part of
  the warm-up that fails is named in the terminal summary (the tests then compile it on
  first use, and the test that uses it shows the error).

xdist's own ``--dist loadgroup`` passes groups by renaming node ids, which pytest >= 9.2
ignores (pytest-xdist issue #1386): here each worker writes its groups to a file the
controller's scheduler reads when every worker has collected.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
_warmup: list[tuple[subprocess.Popen[bytes], Any]] = []

#: Where the workers write ``{node id: group}`` (set by the controller for its workers).
GROUPS_DIR_ENV = "STREAMKM_TEST_GROUPS_DIR"


def _alone(item: pytest.Item) -> bool:
    return bool(item.get_closest_marker("alone") or item.get_closest_marker("netns"))


def _rank(item: pytest.Item) -> int:
    """``slow`` first, then the other process tests, then ``unit``; the tests that run alone
    at the very end (when they start, the other workers are finishing short tests)."""
    if _alone(item):
        return 3
    if item.get_closest_marker("slow"):
        return 0
    return 2 if item.get_closest_marker("unit") else 1


def _uses_own_module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module- or class-scoped fixture defined in its own module."""
    info = getattr(item, "_fixtureinfo", None)
    module = getattr(getattr(item, "module", None), "__name__", None)
    if info is None or module is None:
        return False
    return any(defs[-1].scope in ("class", "module") and defs[-1].func.__module__ == module
               for defs in info.name2fixturedefs.values() if defs)


def group_of(item: pytest.Item) -> str | None:
    """The group ``item`` runs in (``None``: any worker, alone)."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    if item.get_closest_marker("netns"):
        return "netns"
    if _uses_own_module_fixture(item):
        return item.nodeid.split("::")[0]
    return None


def _distributing(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) \
        and not hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)  # before xdist starts the workers in its own hook
def pytest_sessionstart(session: pytest.Session) -> None:
    if not _distributing(session.config):
        return
    from hypothesis.errors import HypothesisSideeffectWarning
    from hypothesis.internal import charmap  # internal API: only a cache warm-up

    with warnings.catch_warnings():  # hypothesis warns of slow plugins: this is the point
        warnings.simplefilter("ignore", HypothesisSideeffectWarning)
        charmap.charmap()
        charmap.intervals_from_codec("utf-8")
    # the workers are started later (session start) and inherit the environment
    os.environ[GROUPS_DIR_ENV] = tempfile.mkdtemp(prefix="streamkm-xdist-groups-")
    errors = tempfile.TemporaryFile()
    _warmup.append((subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.numba_warmup"], cwd=REPO,
        stdout=subprocess.DEVNULL, stderr=errors), errors))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name the warm-up's failed parts (it prints each one's traceback on stderr)."""
    for proc, errors in _warmup:
        if proc.poll() not in (None, 0):
            errors.seek(0)
            terminalreporter.write_sep("-", "numba warm-up failed")
            terminalreporter.write(errors.read().decode(errors="replace"))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _distributing(config) and (folder := os.environ.pop(GROUPS_DIR_ENV, None)):
        shutil.rmtree(folder, ignore_errors=True)
    for proc, errors in _warmup:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        errors.close()
    _warmup.clear()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    folder = os.environ.get(GROUPS_DIR_ENV)
    if not worker or not folder:
        return
    # every worker collects the same items and sorts them alike (the sort is stable)
    items.sort(key=_rank)
    groups = {item.nodeid: group for item in items if (group := group_of(item))}
    tmp = Path(folder) / f".{worker}.json"
    tmp.write_text(json.dumps(groups))
    tmp.replace(Path(folder) / f"{worker}.json")


@pytest.fixture(autouse=True)
def _share_the_machine(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under xdist, a test marked ``alone`` (or ``netns``) runs while no other test runs: it
    holds the machine lock exclusively, every other test holds it shared. A waiting
    exclusive holder keeps the gate, so new shared holders queue behind it."""
    folder = os.environ.get(GROUPS_DIR_ENV)
    if not folder or not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    alone = _alone(request.node)
    with open(Path(folder) / "gate.lock", "a") as gate, \
            open(Path(folder) / "machine.lock", "a") as machine:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Load scheduling by groups (``--dist loadgroup``, set in pyproject's addopts)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FileGroupScheduling(LoadGroupScheduling):
        """``loadgroup`` with the groups the workers wrote (see the module docstring)."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                folder = Path(os.environ[GROUPS_DIR_ENV])
                self.groups = {}
                for path in sorted(folder.glob("gw*.json")):
                    self.groups.update(json.loads(path.read_text()))
            return self.groups.get(nodeid) or super()._split_scope(nodeid)

    return FileGroupScheduling(config, log)
