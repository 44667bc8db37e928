"""docs/theory.md's verdict table is the output of ``python -m proofs --markdown --no-times``
(regenerated here; the test fails when the page is stale)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from proofs import render_markdown, run_all

pytestmark = pytest.mark.smt
PAGE = Path(__file__).resolve().parent.parent / "docs" / "theory.md"
TABLE = re.compile(r"<!-- proofs-table:begin -->\n(.*?)<!-- proofs-table:end -->", re.S)


def test_theory_page_verdict_table_is_the_generated_one() -> None:
    match = TABLE.search(PAGE.read_text())
    assert match, "docs/theory.md lost its proofs-table markers"
    assert match.group(1).strip() == render_markdown(run_all(), times=False).strip()
