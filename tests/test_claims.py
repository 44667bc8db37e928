"""The claims registry: every docs verdict is a row, every lossy row's witness is lossy, and the
attack search finds no instance that refutes a lossless row (small budget here, large under
``-m slow``)."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from fractions import Fraction as F
from pathlib import Path
from typing import Any

import pytest

from dsi_ref.audit.schedulers import CONTAINED_IN, SCHEDULER_CLASSES
from dsi_ref.base.errors import PathLimitError
from dsi_ref.claims import (
    CLAIMS,
    DSI_RULES,
    LATENCY_CLAIMS,
    Finding,
    check_instance,
    dsi_claim,
)
from dsi_ref.claims.attack import (
    COST_SHAPES,
    LARGE,
    SMALL,
    Budget,
    attack,
    draw_instances,
    families_of,
    lossless_dsi_claims,
)
from dsi_ref.claims.registry import MAXIMAL_RANDOM_FIRST_FOUND, InstanceWitness
from dsi_ref.claims.render import (
    TABLES,
    marker_problems,
    prose_verdicts,
    render_table,
    rewrite,
    stale_blocks,
    stray_prose_verdicts,
    stray_verdicts,
)

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_docs_verdict_is_a_registry_row() -> None:
    assert not stray_verdicts(DOCS), "verdicts stated outside the registry's tables:\n" + "\n".join(
        stray_verdicts(DOCS))
    assert not stale_blocks(DOCS), ("stale generated tables (python -m dsi_ref.claims --write): "
                                    + ", ".join(stale_blocks(DOCS)))
    used = {m.group(1) for page in DOCS.glob("*.md")
            for m in re.finditer(r"<!-- claims:([\w-]+) begin", page.read_text())}
    assert used == set(TABLES), f"tables rendered nowhere: {set(TABLES) - used}"


def test_every_prose_verdict_is_a_registry_row_or_an_example() -> None:
    """#34, point 6: a sentence of the docs that states a rule or a decoder lossless or lossy
    carries a claim marker that names registry rows with the verdict they have, or is marked
    as an example (or as stating no verdict). Before, tree-verification.md said "Every rule is
    lossless", while the registry claims the tree (2, 1)."""
    problems = stray_prose_verdicts(DOCS)
    assert not problems, "verdicts in prose that are no registry row:\n" + "\n".join(problems)
    marked = [m for page in DOCS.glob("*.md") for _, _, m in prose_verdicts(page.read_text())]
    assert sum(kind == "claim" for ms in marked for kind, _ in ms) >= 20


def test_the_prose_scan_reads_sentences_markers_and_the_registry(tmp_path: Path) -> None:
    page = tmp_path / "a.md"

    def problems(text: str) -> list[str]:
        page.write_text(text)
        return [p.split(": ", 1)[1] for p in stray_prose_verdicts(tmp_path)]

    assert problems("### Every rule is lossless, exactly\n") == [
        "unmarked: ### Every rule is lossless, exactly"]
    assert problems("Rejection sampling is lossless. It is fast.\n") == [
        "unmarked: Rejection sampling is lossless."]
    assert problems("Rejection sampling is lossless. <!-- claim: speculative/rejection = "
                    "lossless --> It is fast.\n") == []
    assert problems("## Typical is lossy\n\n<!-- claim: speculative/typical = lossy -->\n\n"
                    "Text.\n") == []   # a marker alone after a heading marks the heading
    assert problems("The soft test is lossy on top-k. <!-- example: a zoo mutant -->\n") == []
    assert problems("Call `dr.assert_lossless` on DSI.\n") == []   # inline code is no verdict
    assert problems("The weather is lossless today.\n") == []      # names no rule
    assert problems("```python\n# DSI is lossy\n```\n| DSI | x |\n") == []  # code, tables
    wrong = problems("Block with maximal windows is lossless under random. <!-- claim: "
                     "dsi/block, maximal windows/random = lossless -->\n")
    assert len(wrong) == 1 and wrong[0].startswith(
        "'dsi/block, maximal windows/random = lossless': the registry says ('dsi', "
        "'block, maximal windows', 'random') is lossy")
    assert marker_problems("dsi/no-such-rule/random = lossless") == [
        "'dsi/no-such-rule/random = lossless' names no registry row and verdict"]
    assert marker_problems("dsi/exact_match/* = lossless; speculative/typical = lossy") == []
    assert len(marker_problems("dsi/rejection/* = lossless")) == 1  # content-aware is lossy


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
    """The default run's search: `SMALL` (printed with the families it drew and checked)."""
    report = attack(SMALL)
    with capsys.disabled():
        print(f"\n{report}")
    assert not report.refutations, "\n".join(map(str, report.refutations))
    assert set(report.checked) == {f"{r.label}/{c}" for r, c in lossless_dsi_claims()}
    assert report.skipped == 0 and sum(report.checked.values()) == report.drawn == 75
    classes = [c for _, c in lossless_dsi_claims()]
    assert set(report.families) == set(SMALL.families(classes))
    # an oblivious instance is checked against every rank table: the whole class on it
    oblivious = sum(n for k, n in report.checked.items() if k.endswith("/oblivious"))
    assert report.families["ties every"] == oblivious == 25


@pytest.mark.parametrize("budget", [SMALL, LARGE], ids=["SMALL", "LARGE"])
def test_every_family_a_budget_names_is_drawn_and_nothing_else(budget: Budget) -> None:
    """#34, point 4: the instances `attack` checks (`draw_instances`, here without checking
    them) cover every family the budget names (`Budget.families`, what `Budget.__str__` prints):
    every tie rule, "every" rank table included; costs constant and random on each model and on
    both, with laws of 2 to ``max_points`` points; EOS or none; zeros; ties; every N,
    lookahead and sp_degree up to the budget's; and no family it does not name. Before, the
    default search never drew "every" (0 of 75) nor random costs on both models."""
    drawn = draw_instances(budget)
    classes = [c for _, c in lossless_dsi_claims()]
    assert len(drawn) == budget.examples * len(classes)
    families = Counter(f for _, cls, inst in drawn for f in families_of(cls, inst))
    assert set(families) == set(budget.families(classes))
    for name in ("ties every", "ties first", "ties last", "ties uniform",
                 "costs random on both models", "eos", "zeros", "ties",
                 f"sp_degree={budget.max_sp_degree}", "lookahead=3",
                 f"{budget.max_points}-point cost law"):
        assert families[name] > 0, name
    for _, cls, inst in drawn:  # each claim's instances are in its class
        assert cls != "oblivious" or inst.costs == "constant"
    text = str(budget)
    points = "2" if budget.max_points == 2 else f"2-{budget.max_points}"
    for stated in (f"{budget.examples} instances per lossless claim",
                   f"N 1-{budget.max_new_tokens}", f"lookahead 1-{budget.max_lookahead}",
                   f"sp_degree 1-{budget.max_sp_degree}", f"laws of {points} support points",
                   f"past {budget.max_runs:,} runs", "more than 5% skipped"):
        assert stated in text, stated
    assert draw_instances(budget) == drawn  # seeded: the same instances every run
    assert draw_instances(budget, seed=1) != drawn


def test_a_stratified_parameter_takes_every_value_in_every_claim() -> None:
    """With ``examples`` at least the number of values, every claim draws each value of each
    stratified parameter, whatever the seed."""
    budget = Budget(examples=4, max_new_tokens=3)
    for seed in (0, 1, 2):
        drawn = draw_instances(budget, seed=seed)
        for rule, cls in lossless_dsi_claims():
            mine = [inst for r, c, inst in drawn if (r, c) == (rule, cls)]
            assert {i.max_new_tokens for i in mine} == {1, 2, 3}
            assert {i.sp_degree for i in mine} == {1, 2, 3}
            assert {i.queue for i in mine} == {"fifo", "lifo", "any"}
            assert {i.costs for i in mine} == (
                {"constant"} if cls == "oblivious" else set(COST_SHAPES))


def test_attack_finds_a_planted_false_claim_and_counts_no_shrink_replay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The search has teeth: attacked as if lossless, rejection sampling under a content-aware
    scheduler (lossy at N = 1 on many pairs) falls within a small budget, shrunk. The checks
    the shrinking makes are not counted as instances checked (hypothesis's replays were)."""
    import dsi_ref.claims.attack as attack_module

    calls: list[object] = []
    real = attack_module.check_instance

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(attack_module, "check_instance", counted)
    rejection = next(r for r in DSI_RULES if r.label == "rejection")
    report = attack(Budget(examples=10, max_new_tokens=2), claims=[(rejection, "content-aware")])
    assert len(report.refutations) == 1
    found = report.refutations[0]
    assert found.instance.max_new_tokens == 1 and "LOSSY" in str(found)
    assert found.instance.eos is None and found.instance.context == 0
    checked = report.checked["rejection/content-aware"]
    assert 1 <= checked <= 10 and len(calls) > checked  # the shrink's checks are not counted
    assert not check_instance("content-aware", found.instance).lossless


@pytest.mark.slow
def test_attack_large_budget_refutes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """``-m slow``: `LARGE` (the issue's ranges: N <= 4, sp_degree 1-4, laws with 1-3 points)."""
    report = attack(LARGE, progress=True)
    with capsys.disabled():
        print(f"\n{report}")
    assert not report.refutations, "\n".join(map(str, report.refutations))
    classes = [c for _, c in lossless_dsi_claims()]
    assert set(report.families) == set(LARGE.families(classes))


@pytest.mark.slow
def test_attack_finds_the_published_false_claim() -> None:
    """Attacked as if lossless, block DSI with maximal windows under random costs falls on an
    instance the search draws itself (with EOS)."""
    maximal = next(r for r in DSI_RULES if r.label == "block, maximal windows")
    report = attack(Budget(examples=1000, max_new_tokens=3, max_sp_degree=3, max_points=2),
                    claims=[(maximal, "random")])
    assert report.refutations and report.refutations[0].instance.eos is not None


def test_an_instance_past_the_run_limit_is_skipped_and_fails_the_run() -> None:
    """The budget's run limit bounds each exact law; what it skips is counted, never counted
    as checked, and a run that skips more than 5 % of its instances fails."""
    rejection = next(r for r in DSI_RULES if r.label == "rejection")
    with pytest.raises(PathLimitError) as error:
        attack(Budget(examples=3, max_new_tokens=2, max_runs=1), claims=[(rejection, "random")])
    assert str(error.value).startswith(
        "the attack skipped 3 of 3 instances, more than 5%: raise the budget's max_runs or "
        "shrink its ranges\n")
    assert "instances: 3 drawn (seed 0), 0 checked, 3 skipped" in str(error.value)
    assert "past 1 runs of DSI" in str(error.value)


@pytest.mark.parametrize(("skips", "fails"), [(1, False), (2, True)])
def test_skips_are_bounded_at_5_percent(monkeypatch: pytest.MonkeyPatch, skips: int,
                                        fails: bool) -> None:
    """1 of 20 instances skipped (5 %) passes, reported; 2 of 20 fail the run."""
    import dsi_ref.claims.attack as attack_module

    seen: list[object] = []

    def check(scheduler_class: Any, instance: Any, *, max_runs: Any = None) -> Any:
        seen.append(instance)
        if len(seen) <= skips:
            raise PathLimitError("past the limit")
        return Finding(True, F(0)), instance

    monkeypatch.setattr(attack_module, "check_claim", check)
    greedy = next(r for r in DSI_RULES if r.label == "greedy")
    budget = Budget(examples=20)
    if fails:
        with pytest.raises(PathLimitError, match=f"skipped {skips} of 20 instances"):
            attack(budget, claims=[(greedy, "adaptive")])
        return
    report = attack(budget, claims=[(greedy, "adaptive")])
    assert report.skipped == skips and report.checked["greedy/adaptive"] == 20 - skips
