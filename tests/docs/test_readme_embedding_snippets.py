"""The README's "With scikit-learn" and "With River" snippets run as written (doctest).

A stop-gap until the project's generic README-code-block test lands: it extracts the
```python blocks of these two sections only.
"""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

README = Path(__file__).resolve().parents[2] / "README.md"


def _section_blocks(title: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^#{{1,3}} )", text, re.M | re.S)
    assert match, f"README has no section {title!r}"
    return re.findall(r"```python\n(.*?)```", match.group(1), re.S)


@pytest.mark.parametrize("title", ["With scikit-learn", "With River"])
def test_readme_snippet_runs(title):
    if title == "With River":
        pytest.importorskip("river")
    blocks = _section_blocks(title)
    assert blocks, f"no python block in README section {title!r}"
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for i, block in enumerate(blocks):
        test = parser.get_doctest(block, {}, f"README {title} #{i}", str(README), 0)
        assert test.examples, f"README section {title!r} block {i} has no >>> examples"
        result = runner.run(test)
        assert result.failed == 0, f"README section {title!r} block {i} failed (output above)"
