"""What the fast paths import: ``import streamkm`` and the commands that build no model
load neither scikit-learn, scipy nor numba; the first use of an estimator does.
``streamkm config check`` and ``config show`` are such commands, with or without a
checkpoint to compare with, and when they refuse a bad ``[model]`` key.

Each case runs in a fresh interpreter with ``-X importtime``, which lists every module
the process imported, so the check sees exactly what a user's command loads.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.service_process import (
    blob_rows,
    run_until_assigned,
    service_config,
    write_jsonl,
)

HEAVY = ("sklearn", "scipy", "numba")


def _imported(*args: str, env: dict[str, str] | None = None
              ) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Top-level packages imported by ``python -X importtime ARGS`` and the process."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names, proc


@pytest.mark.integration
def test_bare_import_loads_no_heavy_library() -> None:
    names, proc = _imported("-c", "import streamkm; print(streamkm.__version__)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "streamkm" in names
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


@pytest.mark.integration
@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["run", "--help"],
                                  ["demo", "--help"], ["config", "check", "--help"],
                                  ["completion", "bash"]],
                         ids=lambda argv: " ".join(argv))
def test_commands_that_build_no_model_load_no_heavy_library(argv: list[str]) -> None:
    names, proc = _imported("-m", "streamkm", *argv)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "argparse" in names
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


def _said(proc: subprocess.CompletedProcess[str]) -> str:
    """What the command wrote to stderr, without ``-X importtime``'s lines."""
    return "\n".join(line for line in proc.stderr.splitlines()
                     if not line.startswith("import time:"))


@pytest.mark.integration
@pytest.mark.parametrize("command", ["check", "show"])
def test_config_commands_without_a_checkpoint_load_no_heavy_library_nor_numpy(
        command: str, tmp_path: Path) -> None:
    config = service_config(tmp_path, tmp_path / "in.jsonl", model='kernel = "heat"')
    names, proc = _imported("-m", "streamkm", "config", command, "-c", str(config))
    assert proc.returncode == 0, _said(proc)
    assert 'kernel = "heat"' in proc.stdout and "n_clusters = 3" in proc.stdout
    if command == "check":
        assert "config OK" in _said(proc)
    assert not names & {*HEAVY, "numpy"}, sorted(names & {*HEAVY, "numpy"})


@pytest.mark.integration
@pytest.mark.parametrize("env, words", [
    ({"STREAMKM_MODEL__TAU": "0"},
     ["config key 'model.tau' has bad value 0: must be an int in the range [1, inf)."]),
    ({"STREAMKM_MODEL__KERNEL": "gaussian"}, ["config key 'model.kernel'", "'gaussian'"]),
    ({"STREAMKM_MODEL__KERNEL_PARAMS": "{n_anchors = 9}"},
     ["config key 'model.kernel_params'", "kernel 'rbf' accepts kernel_params [], got "
                                          "unknown ['n_anchors']"]),
], ids=["tau", "kernel", "kernel_params"])
def test_a_bad_model_key_is_refused_without_loading_a_heavy_library(
        env: dict[str, str], words: list[str], tmp_path: Path) -> None:
    config = service_config(tmp_path, tmp_path / "in.jsonl")
    names, proc = _imported("-m", "streamkm", "config", "check", "-c", str(config), env=env)
    assert proc.returncode == 2, _said(proc)
    for word in words:
        assert word in _said(proc)
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


@pytest.mark.integration
def test_config_commands_with_a_checkpoint_load_no_heavy_library(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(300))
    config = service_config(tmp_path, data)
    run_until_assigned(config, 300)
    assert list((tmp_path / "ck").glob("checkpoint-*"))

    names, show = _imported("-m", "streamkm", "config", "show", "-c", str(config))
    assert show.returncode == 0, _said(show)
    assert "# in use: auto -> " in show.stdout  # read from the checkpoint's model
    assert not names & set(HEAVY), sorted(names & set(HEAVY))

    names, check = _imported("-m", "streamkm", "config", "check", "-c", str(config))
    assert check.returncode == 0 and "config OK" in _said(check), _said(check)
    assert not names & set(HEAVY), sorted(names & set(HEAVY))

    # the refusal of a changed model-defining setting, compared with the checkpoint
    names, refused = _imported("-m", "streamkm", "config", "check", "-c", str(config),
                               env={"STREAMKM_MODEL__N_CLUSTERS": "5"})
    assert refused.returncode == 2, _said(refused)
    assert "model.n_clusters: checkpoint 3, config 5" in _said(refused)
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


@pytest.mark.integration
def test_first_use_of_an_estimator_loads_scikit_learn() -> None:
    names, proc = _imported("-c", "import streamkm; streamkm.MiniBatchKernelKMeans(3)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "sklearn" in names


@pytest.mark.unit
def test_lazy_public_names_are_the_real_objects() -> None:
    import streamkm
    from streamkm.cluster import MiniBatchKernelKMeans
    from streamkm.exceptions import NotFittedError, ParameterError

    assert streamkm.MiniBatchKernelKMeans is MiniBatchKernelKMeans
    assert streamkm.ParameterError is ParameterError
    assert set(streamkm.__all__) <= set(dir(streamkm))
    with pytest.raises(AttributeError, match="no attribute 'MiniBatchKMeans'"):
        _ = streamkm.MiniBatchKMeans


@pytest.mark.unit
def test_sklearn_based_errors_keep_both_parents_and_pickle() -> None:
    import pickle

    from sklearn.exceptions import NotFittedError as SklearnNotFittedError
    from sklearn.utils._param_validation import InvalidParameterError

    from streamkm.exceptions import NotFittedError, ParameterError, StreamkmError

    for parent in (StreamkmError, InvalidParameterError, ValueError, TypeError):
        assert issubclass(ParameterError, parent), parent
    for parent in (StreamkmError, SklearnNotFittedError, AttributeError, ValueError):
        assert issubclass(NotFittedError, parent), parent
    again = pickle.loads(pickle.dumps(ParameterError("n_clusters must be >= 1, got 0")))
    assert type(again) is ParameterError and "got 0" in str(again)
