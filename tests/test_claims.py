"""The claims registry: every docs verdict is a row, every lossy row's witness is lossy, and the
attack search finds no instance that refutes a lossless row (small budget here, large under
``-m slow``)."""

from __future__ import annotations

import dataclasses
import re
from fractions import Fraction as F
from pathlib import Path
from typing import Any

import pytest

from dsi_ref.audit.schedulers import CONTAINED_IN, SCHEDULER_CLASSES
from dsi_ref.claims import CLAIMS, DSI_RULES, LATENCY_CLAIMS, check_instance, dsi_claim
from dsi_ref.claims.attack import LARGE, SMALL, Budget, attack, lossless_dsi_claims
from dsi_ref.claims.registry import MAXIMAL_RANDOM_FIRST_FOUND, InstanceWitness
from dsi_ref.claims.render import TABLES, render_table, rewrite, stale_blocks, stray_verdicts

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_docs_verdict_is_a_registry_row() -> None:
    assert not stray_verdicts(DOCS), "verdicts stated outside the registry's tables:\n" + "\n".join(
        stray_verdicts(DOCS))
    assert not stale_blocks(DOCS), ("stale generated tables (python -m dsi_ref.claims --write): "
                                    + ", ".join(stale_blocks(DOCS)))
    used = {m.group(1) for page in DOCS.glob("*.md")
            for m in re.finditer(r"<!-- claims:([\w-]+) begin", page.read_text())}
    assert used == set(TABLES), f"tables rendered nowhere: {set(TABLES) - used}"


def test_the_scan_flags_a_handwritten_verdict_and_a_stale_table(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("| rule | random |\n|---|---|\n| `block` | lossless |\n")
    assert [s.split(":")[0] for s in stray_verdicts(tmp_path)] == ["a.md"]
    (tmp_path / "a.md").write_text("```text\n| x | lossless |\n```\n")  # an example's output
    assert stray_verdicts(tmp_path) == []
    stale = "<!-- claims:dsi begin -->\n| `block` | lossless |\n<!-- claims:dsi end -->\n"
    (tmp_path / "b.md").write_text(stale)
    assert stale_blocks(tmp_path) == ["b.md: dsi"] and stray_verdicts(tmp_path) == []
    (tmp_path / "b.md").write_text(rewrite(stale))
    assert stale_blocks(tmp_path) == []


def test_dsi_has_a_row_per_rule_and_class_and_rows_are_consistent() -> None:
    keys = [c.key for c in CLAIMS]
    assert len(keys) == len(set(keys)), "a claim is stated twice"
    for rule in DSI_RULES:
        for cls in SCHEDULER_CLASSES:
            claim = dsi_claim(rule.label, cls)
            assert (claim.verdict == "lossy") == (claim.witness is not None)
    # a class that contains a lossy class is lossy too, along the exact order of the classes
    # (CONTAINED_IN: oblivious and random are both in adaptive, which is in content-aware, and
    # neither of the two contains the other; before issue 34 this read the column order as a
    # chain)
    for rule in DSI_RULES:
        for smaller, larger in CONTAINED_IN:
            if dsi_claim(rule.label, smaller).verdict == "lossy":
                assert dsi_claim(rule.label, larger).verdict == "lossy", (rule, smaller, larger)
    with pytest.raises(ValueError, match="witness"):
        dataclasses.replace(dsi_claim("greedy", "random"), verdict="lossy")


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.witness is not None],
                         ids=lambda c: f"{c.decoder}-{c.rule}-{c.scheduler_class}")
def test_every_lossy_row_has_a_witness_that_is_lossy(claim: Any) -> None:
    finding = claim.witness.check()
    assert not finding.lossless, f"{claim.key}: the witness is lossless now: {finding}"
    assert finding.tv is None or finding.tv > 0


@pytest.mark.parametrize("first_found", [False, True], ids=["registry witness", "first found"])
def test_the_maximal_random_witness_is_lossy_only_with_eos_and_random_costs(
        first_found: bool) -> None:
    """The registry's witness (shrunk by the search: TV 1/72) and the instance that first
    refuted the row (issue 23's: TV about 2e-3) are lossless without EOS, with either constant
    cost, and with fixed windows."""
    witness = dsi_claim("block, maximal windows", "random").witness
    assert isinstance(witness, InstanceWitness)
    inst = MAXIMAL_RANDOM_FIRST_FOUND if first_found else witness.instance
    finding = check_instance("random", inst)
    if first_found:
        assert finding.tv is not None and F(1, 1000) < finding.tv < F(1, 100)  # about 2e-3
    else:
        assert finding.tv == F(1, 72)
    no_eos = dataclasses.replace(inst, eos=None)
    assert check_instance("random", no_eos).lossless
    for cost, _ in inst.target_latency:
        constant = dataclasses.replace(inst, target_latency=((cost, F(1)),))
        assert check_instance("oblivious", constant).lossless
    fixed = dataclasses.replace(inst, block_windows="fixed")
    assert check_instance("random", fixed).lossless


def test_latency_claims_are_the_theorems_and_the_simulator_values() -> None:
    from proofs.theorems import THEOREMS

    names = [c.name for c in LATENCY_CLAIMS]
    assert names[:len(THEOREMS)] == [t.name for t in THEOREMS]
    theory = (DOCS / "theory.md").read_text()
    table = theory.split("<!-- proofs-table:begin -->")[1].split("<!-- proofs-table:end -->")[0]
    for claim in LATENCY_CLAIMS[:len(THEOREMS)]:
        row = next(line for line in table.splitlines()
                   if line.startswith(f"| `{claim.name}` |"))
        assert f"| **{claim.verdict}** |" in row, row
    # the simulator values docs/dsi-semantics.md quotes, recomputed
    page = (DOCS / "dsi-semantics.md").read_text()
    for claim in LATENCY_CLAIMS[len(THEOREMS):]:
        assert claim.compute is not None and claim.value is not None
        assert claim.compute() == claim.value, claim.name
        assert f"{claim.value.numerator}/{claim.value.denominator}" in page


def test_rendered_tables_follow_the_rows() -> None:
    dsi_table = render_table("dsi")
    for rule in DSI_RULES:
        row = next(line for line in dsi_table.splitlines()
                   if line.startswith(f"| `{rule.label}` |"))
        cells = [c.strip() for c in row.split("|")[2:-1]]
        assert [("lossy" if "lossy" in c else "lossless") for c in cells] == [
            dsi_claim(rule.label, cls).verdict for cls in SCHEDULER_CLASSES]


def test_attack_small_budget_refutes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """The default run's search: `SMALL` (printed with the families it covered)."""
    report = attack(SMALL)
    with capsys.disabled():
        print(f"\n{report}")
    assert not report.refutations, "\n".join(map(str, report.refutations))
    assert set(report.checked) == {f"{r.label}/{c}" for r, c in lossless_dsi_claims()}
    assert {"eos", "no-eos", "zeros", "ties", "context-free", "2-gram"} <= set(report.families)


def test_attack_finds_a_planted_false_claim() -> None:
    """The search has teeth: attacked as if lossless, rejection sampling under a content-aware
    scheduler (lossy at N = 1 on many pairs) falls within the small budget, shrunk."""
    rejection = next(r for r in DSI_RULES if r.label == "rejection")
    report = attack(Budget(examples=10, max_new_tokens=2),
                    claims=[(rejection, "content-aware")])
    assert len(report.refutations) == 1
    found = report.refutations[0]
    assert found.instance.max_new_tokens == 1 and "LOSSY" in str(found)


@pytest.mark.slow
def test_attack_large_budget_refutes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """``-m slow``: `LARGE` (the issue's ranges: N <= 4, sp_degree 1-4, laws with 1-3 points)."""
    report = attack(LARGE, progress=True)
    with capsys.disabled():
        print(f"\n{report}")
    assert not report.refutations, "\n".join(map(str, report.refutations))


@pytest.mark.slow
def test_attack_finds_the_published_false_claim() -> None:
    """Attacked as if lossless, block DSI with maximal windows under random costs falls on an
    instance the search draws itself (with EOS)."""
    maximal = next(r for r in DSI_RULES if r.label == "block, maximal windows")
    report = attack(Budget(examples=1000, max_new_tokens=3, max_sp_degree=3, max_points=2),
                    claims=[(maximal, "random")])
    assert report.refutations and report.refutations[0].instance.eos is not None


def test_an_instance_past_the_run_limit_is_skipped_and_counted() -> None:
    """The budget's run limit bounds each exact law; what it skips is counted and reported,
    never counted as checked."""
    rejection = next(r for r in DSI_RULES if r.label == "rejection")
    report = attack(Budget(examples=3, max_new_tokens=2, max_runs=1),
                    claims=[(rejection, "random")])
    assert report.skipped == 3 and not report.checked["rejection/random"]
    assert "skipped (past the run or tie-table limit): 3" in str(report)
    assert "past 1 runs of DSI" in str(report)
