"""The audit's sections for block and tree verification (issue #14): ``block`` (SI), ``block-dsi``
(DSI with maximal blocks against each scheduler class) and ``tree`` (every tree rule on three
trees). Each must pass as committed and fail on a wrong rule or a wrong claim."""

from __future__ import annotations

import json
from collections.abc import Sequence
from fractions import Fraction as F
from pathlib import Path

import pytest

from dsi_ref import cli
from dsi_ref.audit.suite import default_suite
from dsi_ref.base.models import Number
from dsi_ref.base.randomness import Randomness
from dsi_ref.commands.audit import select_sections
from dsi_ref.commands.sections.core import (
    MAXIMAL_BLOCK_CLAIMS,
    block_dsi_section,
    block_section,
    tree_section,
)
from dsi_ref.decoders.tree import TreeRule
from dsi_ref.decoders.verification import BlockVerification


def test_the_sections_are_part_of_a_plain_audit() -> None:
    names = [s.name for s in select_sections()]
    assert {"block", "block-dsi", "tree"} <= set(names)
    assert names.index("schedulers") < names.index("block") < names.index("zoo")


def test_quick_block_section_passes_and_reports_exact_expected_accepted_drafts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "audit.json"
    code = cli.main(["audit", "--quick", "--section", "block", "--no-progress", "--json",
                     str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "LOSSY" not in text and "PASS: 1/1 sections passed" in text
    [section] = json.loads(out.read_text())
    rows = {row["model"]: row for row in section["rows"]}
    assert section["name"] == "block" and len(rows) == len(default_suite())
    assert all(row["verdict"] == "lossless" and row["TV"] == "0" for row in rows.values())
    # p == q: every draft is accepted by both rules; N = 4 with lookahead 2 is a window of 2
    # drafts and a bonus, then a window of 0 drafts (room for the last token): 2 accepted drafts
    assert rows["p==q"]["E[accepted] block"] == rows["p==q"]["E[accepted] token-level"] == (
        "2 (2.0000)")
    # the bigram pair: block accepts strictly more than token-level
    assert F(rows["bigram"]["E[accepted] block"].split()[0]) > F(
        rows["bigram"]["E[accepted] token-level"].split()[0])


class _UnadjustedResidual(BlockVerification):
    """Block verification whose correction ignores the accepted prefix's weight."""

    def correction(self, weight: Number, target_row: Sequence[Number],
                   draft_row: Sequence[Number], rng: Randomness, context: tuple[int, ...]) -> int:
        return super().correction(1, target_row, draft_row, rng, context)


def test_a_wrong_block_rule_fails_the_block_section() -> None:
    section = block_section(quick=True, progress=False, rule=_UnadjustedResidual())
    assert not section.ok
    assert any(row[4] == "LOSSY" and F(row[3]) > 0 for row in section.rows)


class _NoResidualUpdate(TreeRule):
    """Every sibling tested against the same p (the zoo's tree-no-residual-update)."""

    name = "no-residual-update"

    def update(self, target: Sequence[Number], proposal: Sequence[Number],
               token: int) -> list[Number]:
        return list(target)


def test_tree_section_passes_for_a_rule_and_fails_for_a_wrong_one() -> None:
    good = tree_section(quick=True, progress=False, rules=("rrs", "greedy"))
    assert good.ok and [(row[0], row[1]) for row in good.rows] == [
        ((2,), "rrs"), ((2,), "greedy"), ((2, 1), "rrs"), ((2, 1), "greedy")]
    assert all(row[5] == "lossless" for row in good.rows)
    bad = tree_section(quick=True, progress=False, rules=(_NoResidualUpdate(),))
    assert not bad.ok and all(row[5] == "LOSSY" for row in bad.rows)


def test_block_dsi_section_verdicts_and_their_check_both_ways() -> None:
    # claims wrong both ways (oblivious claimed lossy, adaptive claimed lossless): the verdicts
    # must be the documented ones and each mismatch must fail the section (the random and
    # content-aware classes run in the full audit)
    section = block_dsi_section(quick=True, progress=False, claims=frozenset({"adaptive"}),
                                classes=("oblivious", "adaptive"))
    assert not section.ok
    rows = {row[0]: row for row in section.rows}
    assert rows["oblivious"][1:3] == ("lossy", "lossless") and rows["oblivious"][4] == "-"
    assert rows["adaptive"][1:3] == ("lossless", "LOSSY")
    # the adaptive witness is the documented instance: the frontier task or the window's task
    assert rows["adaptive"][4].startswith("random(3,2) seeds 0/40 N=3")
    assert "frontier" in rows["adaptive"][4]
    assert "oblivious" in MAXIMAL_BLOCK_CLAIMS and "adaptive" not in MAXIMAL_BLOCK_CLAIMS
