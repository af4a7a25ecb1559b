"""The runnable code blocks of README.md and docs/*.md run, and must not fail.

A fenced ````` ```python ````` block is runnable when the line right above its fence is the
HTML comment ``<!-- test: run -->`` (invisible on GitHub). Other blocks are sketches and are
never run. A runnable block with ``>>>`` prompts is a doctest (its printed output must
match); one without is executed as a script (it must not raise; ``assert`` in it checks).
Blocks run in a fresh namespace, in a temporary working directory, so files they write
vanish. Keep them fast and in-process (this module is ``unit``).
"""

from __future__ import annotations

import doctest
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- test: run -->"
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@dataclass(frozen=True)
class CodeBlock:
    """A runnable block: its code and where it is (``file:line`` of its first code line)."""

    code: str
    where: str

    @property
    def is_doctest(self) -> bool:
        return re.search(r"(?m)^\s*>>> ", self.code) is not None


def runnable_blocks(text: str, name: str) -> list[CodeBlock]:
    """The ```` ```python ```` blocks of a Markdown ``text`` marked with :data:`MARKER`."""
    blocks = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].removesuffix("\n").rsplit("\n", 1)[-1]
        if before.strip() == MARKER:
            line = text.count("\n", 0, match.start(1)) + 1
            blocks.append(CodeBlock(match.group(1), f"{name}:{line}"))
    return blocks


def run_block(block: CodeBlock) -> None:
    """Run ``block`` in the current directory; raises (or fails the test) when it is wrong."""
    if block.is_doctest:
        test = doctest.DocTestParser().get_doctest(block.code, {"__name__": "__main__"},
                                                   block.where, block.where, 0)
        report: list[str] = []
        results = doctest.DocTestRunner(optionflags=OPTIONS).run(test, out=report.append)
        if results.failed:
            pytest.fail(f"{block.where}: {results.failed} example(s) failed:\n"
                        + "".join(report), pytrace=False)
        return
    exec(compile(block.code, block.where, "exec"), {"__name__": "__main__"})


def documentation_blocks() -> list[CodeBlock]:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return [block for path in files
            for block in runnable_blocks(path.read_text(), str(path.relative_to(REPO)))]


BLOCKS = documentation_blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_runnable_documentation_block(block: CodeBlock, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_block(block)


SAMPLE = f"""# Title

```python
undefined_name  # a sketch: never run
```

{MARKER}
```python
x = 2
assert x + 1 == 3
```

Text.
{MARKER}

```python
also_not_run  # the marker must be right above the fence
```

{MARKER}
```python
>>> 6 * 7
42
```
"""


def test_only_marked_blocks_are_collected() -> None:
    blocks = runnable_blocks(SAMPLE, "SAMPLE.md")
    assert [b.where for b in blocks] == ["SAMPLE.md:9", "SAMPLE.md:22"]
    assert [b.is_doctest for b in blocks] == [False, True]
    for block in blocks:
        run_block(block)


@pytest.mark.parametrize(("code", "error"), [
    ("assert 1 + 1 == 3\n", AssertionError),
    ("import streamkm\nstreamkm.no_such_thing\n", AttributeError),
    (">>> 1 + 1\n3\n", pytest.fail.Exception),
])
def test_a_wrong_block_fails(code: str, error: type[BaseException]) -> None:
    with pytest.raises(error):
        run_block(CodeBlock(code, "wrong.md:1"))
