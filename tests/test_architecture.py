"""The package's layering, read from its source: the core never imports its connectors (not
even inside a function) and no two modules of ``streamkm`` import each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[1] / "streamkm"
FORBIDDEN = ("streamkm_connectors", "kafka")


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, *, module_level_only: bool, root: Path = PACKAGE
            ) -> list[tuple[str, int]]:
    """Modules imported by ``path`` (absolute names, relative imports resolved), with lines;
    imports under ``if TYPE_CHECKING:`` are not executed and not counted."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for sub in child.orelse:
                    visit(sub, top)
                continue
            if isinstance(child, ast.Import) and (top or not module_level_only):
                found.extend((alias.name, child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and (top or not module_level_only):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                found.append((base, child.lineno))
                found.extend((f"{base}.{alias.name}", child.lineno) for alias in child.names)
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Lambda))
            visit(child, inner)

    visit(tree, True)
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


def internal_graph(module_level_only: bool) -> dict[str, set[str]]:
    """Edges between streamkm's modules; importing ``a.b.c`` also runs ``a`` and ``a.b``."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for target, _line in imports(path, module_level_only=module_level_only):
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
