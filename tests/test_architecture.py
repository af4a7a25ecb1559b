"""The package's floors, read from its source: every module imports only from its own floor
or the floors below it (imports inside functions and under ``TYPE_CHECKING`` included), the
core never imports its connectors, and no two modules or packages of ``streamkm`` import each
other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[1] / "streamkm"
FORBIDDEN = ("streamkm_connectors", "kafka")

#: The floors, lowest first. A module belongs to the floor of its longest listed prefix; it
#: may import its own floor and the floors below. ``streamkm`` is the package's front door
#: (its ``__init__``: the lazy public names), above everything; a module at the package root
#: that no floor lists fails the test.
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("ground", ("streamkm._version", "streamkm.exceptions", "streamkm.logs",
                "streamkm.model")),
    ("numba kernels", ("streamkm._numba",)),
    ("engine helpers", ("streamkm._core",)),
    ("kernels", ("streamkm.kernels",)),
    ("batch clustering", ("streamkm.batch",)),
    ("drift", ("streamkm.drift",)),
    ("streaming estimator", ("streamkm.cluster",)),
    ("sketching estimator", ("streamkm.sketch",)),
    ("records in and out", ("streamkm.io", "streamkm.sources", "streamkm.sinks",
                            "streamkm.registry")),
    ("configuration", ("streamkm.config",)),
    ("runtime", ("streamkm.runtime",)),
    ("scale-out", ("streamkm.scaleout",)),
    ("cluster view", ("streamkm.view",)),
    ("application", ("streamkm.app",)),
    ("front door", ("streamkm", "streamkm.__main__", "streamkm.cli", "streamkm.completion",
                    "streamkm.datasets", "streamkm.river")),
]
MAX_LINES = 800


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_statements(path: Path, *, module_level_only: bool, type_checking: bool = True,
                      root: Path = PACKAGE) -> list[tuple[str, tuple[str, ...] | None, int]]:
    """``(module, names, line)`` of each import in ``path``: ``names`` is None for
    ``import module``, the imported names for ``from module import ...`` (relative imports
    resolved). Imports under ``if TYPE_CHECKING:`` count unless ``type_checking`` is false
    (they are not executed but are a dependency all the same)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, tuple[str, ...] | None, int]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if (not type_checking and isinstance(child, ast.If)
                    and "TYPE_CHECKING" in ast.unparse(child.test)):
                for sub in child.orelse:
                    visit(sub, top)
                continue
            if isinstance(child, ast.Import) and (top or not module_level_only):
                found.extend((alias.name, None, child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and (top or not module_level_only):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                found.append((base, tuple(alias.name for alias in child.names), child.lineno))
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Lambda))
            visit(child, inner)

    visit(tree, True)
    return found


def imports(path: Path, *, module_level_only: bool, type_checking: bool = True,
            root: Path = PACKAGE) -> list[tuple[str, int]]:
    """Modules (or names in them) imported by ``path``, with lines: ``from a import b``
    counts as an import of ``a`` and of ``a.b``."""
    found: list[tuple[str, int]] = []
    for base, names, line in import_statements(path, module_level_only=module_level_only,
                                               type_checking=type_checking, root=root):
        found.append((base, line))
        found.extend((f"{base}.{n}", line) for n in names or ())
    return found


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_the_walk_sees_the_whole_package() -> None:
    assert "streamkm.runtime.shell" in MODULES and "streamkm.scaleout.worker" in MODULES
    assert len(MODULES) > 80


def test_core_never_imports_its_connectors_or_kafka() -> None:
    offending = [f"{MODULES[name].relative_to(PACKAGE.parent)}:{line}: {target}"
                 for name in MODULES
                 for target, line in imports(MODULES[name], module_level_only=False)
                 if target.split(".")[0] in FORBIDDEN]
    assert offending == []


def test_the_import_walk_finds_imports_inside_functions(tmp_path: Path) -> None:
    root = tmp_path / "streamkm"
    path = root / "sub" / "x.py"
    path.parent.mkdir(parents=True)
    path.write_text("from . import y\n\ndef f():\n    from kafka.errors import KafkaError\n")
    found = imports(path, module_level_only=False, root=root)
    assert ("kafka.errors", 4) in found and ("streamkm.sub.y", 1) in found
    assert ("kafka.errors", 4) not in imports(path, module_level_only=True, root=root)


def internal_graph(module_level_only: bool, type_checking: bool = False
                   ) -> dict[str, set[str]]:
    """Edges between streamkm's modules; importing ``a.b.c`` also runs ``a`` and ``a.b``."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for target, _line in imports(path, module_level_only=module_level_only,
                                     type_checking=type_checking):
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                dependency = ".".join(parts[:i])
                if dependency in MODULES and dependency != name:
                    graph[name].add(dependency)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return found


def without_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's ``__init__`` re-exporting its submodules is not a dependency of theirs:
    keep a module -> package edge only when the module is outside that package."""
    return {name: {d for d in deps if not name.startswith(d + ".")}
            for name, deps in graph.items()}


def test_no_import_cycle_among_modules() -> None:
    assert cycles(without_package_inits(internal_graph(module_level_only=True))) == []


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_even_through_imports_inside_functions() -> None:
    assert cycles(without_package_inits(internal_graph(module_level_only=False))) == []


def test_no_import_cycle_even_through_type_only_imports() -> None:
    assert cycles(without_package_inits(internal_graph(module_level_only=False,
                                                       type_checking=True))) == []


def floor_of(module: str) -> int:
    """Index in :data:`FLOORS` of the longest listed prefix of ``module`` (``streamkm`` names
    the package's ``__init__`` only), -1 for a module no floor lists."""
    best, index = "", -1
    for i, (_name, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            below = prefix != "streamkm" and module.startswith(prefix + ".")
            if (module == prefix or below) and len(prefix) > len(best):
                best, index = prefix, i
    return index


def imported_modules(path: Path, modules: dict[str, Path] = MODULES,
                     root: Path = PACKAGE) -> list[tuple[str, int]]:
    """The modules of ``streamkm`` whose code ``path`` asks for, with lines: ``a.b`` for
    ``import a.b`` or ``from a import b`` when ``a.b`` is a module, else ``a`` (the package
    whose ``__init__`` defines ``b``). The parent packages Python runs on the way are not
    counted: their ``__init__`` re-exports what lies below them."""
    def module_of(target: str) -> str | None:
        parts = target.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in modules:
                return ".".join(parts[:i])
        return None

    found = []
    for base, names, line in import_statements(path, module_level_only=False, root=root):
        for target in ([base] if names is None else
                       [f"{base}.{n}" if f"{base}.{n}" in modules else base for n in names]):
            if (module := module_of(target)) is not None:
                found.append((module, line))
    return found


def upward_imports(modules: dict[str, Path] = MODULES, root: Path = PACKAGE) -> list[str]:
    found = []
    for name, path in modules.items():
        for dependency, line in imported_modules(path, modules, root):
            if floor_of(dependency) > floor_of(name):
                found.append(f"{path.relative_to(root.parent)}:{line}: {name} "
                             f"({FLOORS[floor_of(name)][0]}) imports {dependency} "
                             f"({FLOORS[floor_of(dependency)][0]})")
    return sorted(set(found))


def test_every_module_is_on_a_floor() -> None:
    assert [name for name in MODULES if floor_of(name) < 0] == []
    assert floor_of("streamkm.stray") == -1 and floor_of("streamkm.io.stray") >= 0


def test_no_module_imports_from_a_floor_above_its_own() -> None:
    assert upward_imports() == []


def test_the_floor_check_sees_upward_imports_of_every_kind(tmp_path: Path) -> None:
    root = tmp_path / "streamkm"
    (root / "runtime").mkdir(parents=True)
    (root / "app").mkdir()
    (root / "__init__.py").write_text("")
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "service.py").write_text("from streamkm.runtime import shell\n")
    (root / "runtime" / "__init__.py").write_text("")
    (root / "runtime" / "shell.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from streamkm import app\n"
        "if TYPE_CHECKING:\n    from streamkm.app.service import Service\n"
        "def f():\n    import streamkm.app.service\n")
    modules = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    found = upward_imports(modules, root)
    assert [line.split(":")[1] for line in found] == ["2", "4", "6"], found
    assert all("streamkm.runtime.shell (runtime) imports streamkm.app" in line
               for line in found)


def package_graph() -> dict[str, set[str]]:
    """Edges between the packages (and root modules) of ``streamkm``, every import counted."""
    def package(module: str) -> str:
        path = MODULES[module]
        return module if path.name == "__init__.py" or module.count(".") == 1 else (
            module.rpartition(".")[0])

    graph: dict[str, set[str]] = {}
    for name, deps in internal_graph(module_level_only=False, type_checking=True).items():
        source = package(name)
        graph.setdefault(source, set())
        for dependency in deps:
            if dependency == "streamkm":
                continue  # every module runs the front door's __init__ (lazy, imports nothing)
            target = package(dependency)
            if target != source:
                graph[source].add(target)
    for deps in graph.values():
        for target in deps:
            graph.setdefault(target, set())
    return graph


def test_no_import_cycle_between_packages() -> None:
    graph = package_graph()
    assert "streamkm.runtime" in graph and "streamkm.app" in graph
    assert cycles(graph) == []


def test_no_module_is_longer_than_the_limit() -> None:
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_public_import_paths_name_the_same_objects() -> None:
    import streamkm.io.registry
    import streamkm.io.sinks
    import streamkm.io.sources
    from streamkm import registry, sinks, sources

    for public, defined in ((sources, streamkm.io.sources), (sinks, streamkm.io.sinks),
                            (registry, streamkm.io.registry)):
        assert public.__all__ == defined.__all__
        assert all(getattr(public, n) is getattr(defined, n) for n in defined.__all__)
