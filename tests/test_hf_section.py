"""The ``hf`` section of ``dsi-ref audit``: registered on the top floor, and reporting itself
skipped (with the reason) when torch or transformers is missing. Its content is exercised by
``tests/test_hf_assisted_audit.py`` (the same functions); running it whole is ``dsi-ref audit
--section hf``."""

from __future__ import annotations

import pytest

from dsi_ref import cli
from dsi_ref.commands.audit import TOP_SECTIONS
from dsi_ref.commands.sections import hf as hf_audit


def test_hf_section_is_part_of_the_audit() -> None:
    assert "hf" in [s.name for s in TOP_SECTIONS]
    assert "hf" in [s.name for s in cli.audit_sections()]


def test_hf_section_reports_itself_skipped_with_the_reason_without_transformers(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(hf_audit, "_missing", lambda: ["transformers"])
    section = hf_audit.hf_section(quick=True, progress=False)
    assert section.ok
    assert [row[-2] for row in section.rows] == ["skipped"]
    assert any("transformers not installed" in note and "dsi-ref[torch]" in note
               for note in section.notes)
    assert cli.main(["audit", "--section", "hf", "--quick", "--no-progress"]) == 0
    assert "skipped: transformers not installed" in capsys.readouterr().out


def test_hf_section_is_opt_in_and_added_by_the_flag() -> None:
    plain = [s.name for s in cli.select_sections()]
    assert "hf" not in plain and {"decoders", "dsi", "zoo", "theorems"} <= set(plain)
    assert [s.name for s in cli.select_sections(hf=True)] == [*plain, "hf"]
    assert [s.name for s in cli.select_sections(["zoo"], hf=True)] == ["zoo", "hf"]


def test_audit_section_hf_runs_the_hf_section_only(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(hf_audit, "_missing", lambda: ["torch"])
    assert cli.main(["audit", "--section", "hf", "--hf", "--quick", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "skipped: torch not installed" in out
    assert "1/1 sections passed" in out
