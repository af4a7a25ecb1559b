"""Every ``>>>`` example in a docstring of ``streamkm`` or ``streamkm_connectors`` runs, and
its printed output must match (numpydoc ``Examples`` sections included).

Each module of both packages is imported and searched with :class:`doctest.DocTestFinder`
(module, classes, methods, functions defined there); every docstring with examples is one
test case, named after the object (``pytest -k MiniBatchKernelKMeans``). Examples run in a
copy of their module's globals, with ``ELLIPSIS`` and ``NORMALIZE_WHITESPACE``.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import re
import types

import pytest

import streamkm
import streamkm_connectors

pytestmark = pytest.mark.unit

PACKAGES = (streamkm, streamkm_connectors)
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

#: A numpydoc ``Examples`` section header (the title and its underline).
EXAMPLES_HEADER = re.compile(r"(?m)^\s*Examples\n\s*-{8,}\s*$")


def package_modules() -> list[types.ModuleType]:
    """Every module of :data:`PACKAGES`, imported."""
    modules = []
    for package in PACKAGES:
        modules.append(package)
        prefix = package.__name__ + "."
        for info in pkgutil.walk_packages(package.__path__, prefix):
            modules.append(importlib.import_module(info.name))
    return modules


def find_examples(modules: list[types.ModuleType]) -> dict[str, doctest.DocTest]:
    """``{qualified name: doctest}`` of every docstring with at least one example."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    found: dict[str, doctest.DocTest] = {}
    for module in modules:
        for test in finder.find(module, module.__name__, module=module,
                                globs=vars(module).copy()):
            if test.examples:
                found.setdefault(test.name, test)
    return dict(sorted(found.items()))


def run_examples(test: doctest.DocTest) -> tuple[doctest.TestResults, str]:
    """Run one docstring's examples; the results and the runner's report of failures."""
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    results = runner.run(test, out=report.append, clear_globs=True)
    return results, "".join(report)


EXAMPLES = find_examples(package_modules())


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_docstring_examples_run_and_match(name: str) -> None:
    results, report = run_examples(EXAMPLES[name])
    assert results.attempted > 0
    assert results.failed == 0, f"{results.failed} example(s) of {name} failed:\n{report}"


def public_objects() -> dict[str, object]:
    """The classes and functions the packages' ``__all__`` lists export, by qualified name."""
    out: dict[str, object] = {}
    for module in package_modules():
        for export in getattr(module, "__all__", ()):
            obj = getattr(module, export)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                out.setdefault(f"{obj.__module__}.{obj.__qualname__}", obj)
    return out


def test_every_examples_section_of_a_public_object_is_executed() -> None:
    """An ``Examples`` section written without ``>>>`` prompts would silently run nothing."""
    silent = [name for name, obj in public_objects().items()
              if EXAMPLES_HEADER.search(inspect.getdoc(obj) or "") and name not in EXAMPLES]
    assert not silent, f"Examples sections with no >>> example: {silent}"


def _docstring_test(docstring: str) -> doctest.DocTest:
    return doctest.DocTestParser().get_doctest(docstring, {"np": __import__("numpy")},
                                               "sample", None, 0)


def test_a_wrong_example_fails_and_a_right_one_passes() -> None:
    """The runner used above really compares outputs (this suite cannot pass vacuously)."""
    right = _docstring_test("""
    Examples
    --------
    >>> int(np.arange(3).sum())
    3
    >>> print([1,
    ...        2])
    [1, 2]
    """)
    wrong = _docstring_test("""
    >>> 1 + 1
    3
    """)
    raising = _docstring_test("""
    >>> int("x")
    0
    """)
    assert run_examples(right)[0] == doctest.TestResults(failed=0, attempted=2)
    results, report = run_examples(wrong)
    assert results == doctest.TestResults(failed=1, attempted=1)
    assert "Expected:\n    3\nGot:\n    2" in report
    results, report = run_examples(raising)
    assert results.failed == 1 and "ValueError" in report


def test_examples_of_classes_methods_and_functions_are_found() -> None:
    module = types.ModuleType("sample_module")
    exec('''
class Estimator:
    """An estimator.

    Examples
    --------
    >>> Estimator().fit()
    'fitted'
    """

    def fit(self):
        """Fit.

        >>> 1 + 1
        2
        """
        return "fitted"

    def predict(self):
        """No example here."""


def helper():
    """
    >>> helper()
    """
''', vars(module))
    for obj in vars(module).values():
        if inspect.isclass(obj) or inspect.isfunction(obj):
            obj.__module__ = "sample_module"
    found = find_examples([module])
    assert list(found) == ["sample_module.Estimator", "sample_module.Estimator.fit",
                           "sample_module.helper"]
    assert all(run_examples(test)[0].failed == 0 for test in found.values())
