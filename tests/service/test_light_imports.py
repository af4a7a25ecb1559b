"""What the fast paths import: ``import streamkm`` and the commands that build no model
load neither scikit-learn, scipy nor numba; the first use of an estimator does.

Each case runs in a fresh interpreter with ``-X importtime``, which lists every module
the process imported, so the check sees exactly what a user's command loads.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("sklearn", "scipy", "numba")


def _imported(*args: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Top-level packages imported by ``python -X importtime ARGS`` and the process."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True,
                          text=True, timeout=120)
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
