"""The ``theorems`` section of ``dsi-ref audit`` and the ``dsi-ref theorems`` sub-command."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest
import sympy

import dsi_ref.commands.sections.theorems as section_module
from dsi_ref.cli import audit_sections, main
from proofs import THEOREMS, Theorem, by_name

pytestmark = pytest.mark.smt
FAST = ("event_draft_ready", "event_draft_ready_c_above_1", "sp_requirement_sufficient")


def test_theorems_section_is_registered_in_the_audit() -> None:
    assert "theorems" in [s.name for s in audit_sections()]


def test_section_passes_with_expected_verdicts_and_shows_counterexamples(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(section_module, "THEOREMS", tuple(by_name(n) for n in FAST))
    section = section_module.theorems_section(progress=False)
    assert section.ok
    assert [row[0] for row in section.rows] == list(FAST)
    assert [row[3] for row in section.rows] == ["PROVED", "REFUTED", "PROVED"]
    assert "c=" in section.rows[1][5]


def test_section_fails_when_a_verdict_is_not_the_expected_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    a = sympy.Symbol("a", real=True)
    false_claim = Theorem("false_claim", "a ≤ 1 for every a", "symbolic",
                          lambda k: [sympy.Le(0, a)], lambda k: sympy.Le(a, 1))
    monkeypatch.setattr(section_module, "THEOREMS", (false_claim,))
    section = section_module.theorems_section(progress=False)
    assert not section.ok and section.rows[0][3] == "REFUTED"


def test_dsi_ref_theorems_subcommand_prints_the_table() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        status = main(["theorems", "--no-times", "--no-progress", "--theorem", FAST[0]])
    assert status == 0
    assert FAST[0] in out.getvalue() and "PROVED" in out.getvalue()
    assert len(THEOREMS) >= 19
