"""The examples in the docs run: every ```python block of README.md and docs/*.md is executed,
the blocks of one page in order, in one namespace (so a page reads as one session). A ```text
block right after the marker ``<!-- printed by the python block above -->`` is what the last
python block before it prints, verbatim (issue 34: an output shown is an output checked)."""

from __future__ import annotations

import contextlib
import io
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
PRINTED = "<!-- printed by the python block above -->"
#: A python block, or a text block printed by the python block before it.
FENCE = re.compile(rf"^(?P<printed>{PRINTED}\n)?```(?P<kind>python|text)\n(?P<body>.*?)^```$",
                   re.S | re.M)


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
    printed, number = "", 0
    for fence in FENCE.finditer(page.read_text()):
        if fence.group("kind") == "text":
            if fence.group("printed"):
                assert printed == fence.group("body"), (
                    f"{page.name}: the text block after python block {number} is not what it "
                    f"prints; it prints:\n{printed}")
            continue
        number += 1
        block, out = fence.group("body"), io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(block, f"{page.name}[block {number}]", "exec"), namespace)
        except Exception as error:
            raise AssertionError(f"{page.name}, python block {number} failed: {error!r}\n"
                                 f"{block}") from error
        printed = out.getvalue()


def test_every_printed_marker_is_followed_by_a_text_block_after_a_python_block() -> None:
    """A marker the pattern above does not see (a blank line before the fence, a marker
    before anything but a text block) would check nothing: refused."""
    for page in PAGES:
        text = page.read_text()
        marked = [m.start() for m in FENCE.finditer(text) if m.group("printed")]
        assert len(marked) == text.count(PRINTED), page.name
        for at in marked:
            assert "```python" in text[:at], page.name


def test_a_printed_block_that_is_not_what_the_code_prints_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"```python\nprint(1 + 1)\n```\n\n{PRINTED}\n```text\n2\n```\n")
    test_python_examples_in_the_docs_run(page)
    page.write_text(f"```python\nprint(1 + 1)\n```\n\n{PRINTED}\n```text\n3\n```\n")
    with pytest.raises(AssertionError, match="python block 1 is not what it prints"):
        test_python_examples_in_the_docs_run(page)
