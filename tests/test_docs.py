"""The examples in the docs run: every ```python block of README.md and docs/*.md is executed,
the blocks of one page in order, in one namespace (so a page reads as one session)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: The false-alarm rate of the pages whose examples decide on a sample (docs/statistical-policy.md):
#: auditing-your-decoder.md, three audits at alpha 1e-8 and a negative control at power 1 - 1e-9;
#: reproducing-the-paper.md, a two-sided 6-SE bound.
DOC_ALPHA = {"auditing-your-decoder.md": 3e-8 + 1e-9, "reproducing-the-paper.md": 2e-9}
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python fences of a markdown page (other fences are not run)."""
    return BLOCK.findall(text)


def test_block_extraction_runs_only_python_fences() -> None:
    page = "```python\nx = 1\n```\n```text\nnot code\n```\n```python\ny = x\n```\n"
    assert python_blocks(page) == ["x = 1\n", "y = x\n"]


@pytest.mark.parametrize("page", [  # pages whose examples sample declare their false-alarm rate
    pytest.param(p, marks=pytest.mark.statistical(alpha=DOC_ALPHA[p.name]))
    if p.name in DOC_ALPHA else p for p in PAGES if python_blocks(p.read_text())],
    ids=lambda p: p.name)
def test_python_examples_in_the_docs_run(page: Path) -> None:
    namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
    for i, block in enumerate(python_blocks(page.read_text())):
        try:
            exec(compile(block, f"{page.name}[block {i + 1}]", "exec"), namespace)
        except Exception as error:
            raise AssertionError(f"{page.name}, python block {i + 1} failed: {error!r}\n"
                                 f"{block}") from error
