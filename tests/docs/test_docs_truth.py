"""The docs state the product as it is: every repository file they name exists, and no text
of the project (docs, docstrings, comments, test names) tells how the work was organised or
where it was run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "benchmarks").glob("*.md")), *sorted(REPO.glob("*.md"))]
DOCS = sorted(set(DOCS))
SOURCES = sorted(path for folder in ("streamkm", "connectors", "tests", "benchmarks", "scripts",
                                     "ops", "examples", ".ci")
                 for path in (REPO / folder).rglob("*")
                 if path.is_file() and path.suffix in {".py", ".sh", ".toml", ".html", ".yml",
                                                       ".yaml", ".json", ".service", ""}
                 and "__pycache__" not in path.parts)

#: a path inside the repository, as the docs write it: a top-level folder, then a file name
#: with an extension (globs and placeholders are not single files, and are skipped)
NAMED_PATH = re.compile(
    r"(?<![\w./-])((?:streamkm|connectors|tests|benchmarks|docs|examples|ops|scripts)"
    r"/[\w./-]*\w\.(?:py|md|toml|sh|jsonl|json|yml|yaml|html|png|service|txt))\b(?!\*)(?:::(\w+))?")

#: words about the making of the project rather than the product
HISTORY = [
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|this|that|"
    r"earlier|previous|last|next|later) session\b",
    r"\bissue \d+\b",
    r"\breview mends?\b",
    r"\brounds? of work\b",
    r"\bother agents?\b",
    r"/work/",
]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_named_repository_file_exists(doc: Path) -> None:
    missing = []
    for rel, test_name in NAMED_PATH.findall(doc.read_text(encoding="utf-8")):
        path = REPO / rel
        if not path.exists():
            missing.append(rel)
        elif test_name and not re.search(rf"def {test_name}\b", path.read_text(encoding="utf-8")):
            missing.append(f"{rel}::{test_name}")
    assert not missing, f"{doc.relative_to(REPO)} names what does not exist: {sorted(set(missing))}"


@pytest.mark.parametrize("path", DOCS + SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_history_of_the_work_and_no_machine_paths(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path == Path(__file__).resolve():
        return
    for pattern in HISTORY:
        match = re.search(pattern, text, re.IGNORECASE)
        assert match is None, (
            f"{path.relative_to(REPO)}: {match.group(0)!r}: docs and code describe the product "
            "as it is; its history lives in git")


def test_the_path_pattern_sees_the_paths_docs_write() -> None:
    found = NAMED_PATH.findall("see `tests/docs/test_docs_truth.py::test_x` and "
                               "streamkm/kernels/_auto.py, not ./.streamkm/demo/stream.jsonl "
                               "or docs/images/streams-*.png")
    assert found == [("tests/docs/test_docs_truth.py", "test_x"),
                     ("streamkm/kernels/_auto.py", "")]
