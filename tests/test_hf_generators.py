"""The audit matrix over Hugging Face's candidate generators (``dsi_ref.backends.hf.generators``).

Fast (default run): every greedy cell (a point mass: 21 draws give power 0.99 against every law
at TV >= 0.2), the matrix's shape (every one of the eight generators has cells or a stated
reason), and the white-box check of universal speculative decoding (the verifier is told a
permuted draft law unless ``get_vocab()`` iterates in id order: exact, no sampling). Slow: every
sampled cell at TV >= 0.2, and universal SD's lossy cells confirmed black-box on their first
token at power 1 - 1e-9 against 9/10 of the white-box TV. Each "lossless" assertion has
false-alarm rate ``POLICY_ALPHA`` = 1e-8, each "lossy" one a miss rate ``POLICY_MISS`` = 1e-9
(docs/statistical-policy.md). The verdicts are for the installed ``transformers`` version (in
every failure message).
"""

from __future__ import annotations

import os
from fractions import Fraction

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from dsi_ref.audit.statistical import POLICY_ALPHA, POLICY_MISS  # noqa: E402
from dsi_ref.backends.hf.generators import (  # noqa: E402
    CELLS,
    FAST_CELLS,
    GENERATORS,
    ID_VOCAB_ORDER,
    NOT_DRIVEN,
    Cell,
    audit_cell,
    cell_sampler,
    counting_acceptance,
    reference_law,
    usd_draft_check,
    usd_first_token_audit,
)

pytestmark = pytest.mark.torch
VERSION = f"transformers {transformers.__version__}, torch {torch.__version__}"
GREEDY = [c for c in FAST_CELLS if not c.do_sample]


def test_every_generator_has_cells_or_a_reason() -> None:
    import transformers.generation.candidate_generator as cg

    installed = {n for n in dir(cg) if n.endswith("Generator") and n != "CandidateGenerator"}
    new = installed - set(GENERATORS)
    assert not new, f"new generators in {VERSION}: {new}"
    driven = {c.generator for c in CELLS}
    assert driven.isdisjoint(NOT_DRIVEN)
    assert driven | set(NOT_DRIVEN) == set(GENERATORS)
    assert all(len(why) > 80 for why in NOT_DRIVEN.values())


def test_greedy_references_are_the_processed_targets_argmax_and_differ_from_a_wrong_one() -> None:
    cell = GREEDY[0]
    (sequence,) = reference_law(cell)
    assert len(sequence) == cell.max_new_tokens
    other = Cell(cell.generator, False, cell.settings, prompt=(0, 1))
    assert reference_law(other) != reference_law(cell)  # the prompt matters: not a constant


def test_a_sampler_is_a_function_of_its_seed() -> None:
    sample = cell_sampler(next(c for c in CELLS if c.do_sample))
    assert sample(3) == sample(3)
    assert len({sample(s) for s in range(12)}) > 1  # it does sample


@pytest.mark.statistical(alpha=8e-8)  # eight greedy cells at POLICY_ALPHA
def test_greedy_cells_are_lossless_at_stated_power() -> None:
    assert len(GREEDY) == 8
    for cell in GREEDY:
        result = audit_cell(cell, epsilon=0.2)
        assert result.alpha is not None and result.alpha <= POLICY_ALPHA
        assert result.power is not None and result.power >= 0.99
        assert result.verdict == "lossless", f"{cell.name} ({VERSION}):\n{result.report}"


USD = "UniversalSpeculativeDecodingGenerator"
#: Universal SD's cells with the pinned, non-id ``get_vocab()`` order: lossy (HF's bug).
USD_LOSSY = [c for c in CELLS if c.generator == USD and c.vocab_order != ID_VOCAB_ORDER]


def test_universal_sd_tells_the_verifier_a_permuted_draft_law_unless_vocab_is_in_id_order(
) -> None:
    for cell in USD_LOSSY[:1]:
        check = usd_draft_check(cell, seeds=range(2))
        assert check.head_order != tuple(sorted(check.head_order))
        assert check.max_tv > 0.5, f"{cell.name} ({VERSION}): fixed upstream?"
        assert check.first_token_tv > Fraction(1, 10), check
    control = usd_draft_check(Cell(USD, True, vocab_order=ID_VOCAB_ORDER), seeds=range(2))
    assert control.head_order == tuple(sorted(control.head_order))
    assert control.max_tv < 1e-9 and control.first_token_tv < Fraction(1, 10**9)


SAMPLED = [c for c in CELLS if c.do_sample and c not in USD_LOSSY]


@pytest.mark.slow
@pytest.mark.statistical(alpha=1e-8)
@pytest.mark.parametrize("cell", SAMPLED, ids=[c.name for c in SAMPLED])
def test_sampled_cells_are_lossless_at_stated_power(cell: Cell) -> None:
    result = audit_cell(cell, epsilon=0.2)
    assert result.power is not None and result.power >= 0.99
    assert result.verdict == "lossless", f"{cell.name} ({VERSION}):\n{result.report}"


@pytest.mark.slow
@pytest.mark.statistical(alpha=POLICY_MISS)  # a negative control: the miss rate
@pytest.mark.parametrize("cell", USD_LOSSY, ids=[c.name for c in USD_LOSSY])
def test_universal_sd_is_lossy_on_its_first_token_at_stated_power(cell: Cell) -> None:
    report = usd_first_token_audit(cell)
    assert report.power >= 1 - POLICY_MISS
    assert report.verdict == "lossy", f"{cell.name} ({VERSION}): fixed upstream?\n{report}"


def test_the_engines_section_is_opt_in_and_named() -> None:
    from dsi_ref import cli

    assert "engines" in [s.name for s in cli.audit_sections()]
    assert "engines" not in [s.name for s in cli.select_sections()]
    assert [s.name for s in cli.select_sections(["engines"])] == ["engines"]


@pytest.mark.statistical(alpha=POLICY_ALPHA)  # one greedy cell's "lossless"
def test_audit_section_engines_quick_runs_greedy_cells_and_the_white_box(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import dsi_ref.backends.hf.generators as gen
    from dsi_ref import cli

    usd = [c for c in CELLS if c.generator == USD]
    monkeypatch.setattr(gen, "CELLS", (GREEDY[0], *usd))
    assert cli.main(["audit", "--section", "engines", "--quick", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert GREEDY[0].name in out and "white box, first token" in out
    assert "not driven" in out and "PASS: 1/1 sections passed" in out
    rows = [line for line in out.splitlines() if line.startswith(USD)]
    assert len(rows) == len(usd) and all("white box" in r for r in rows)  # --quick: no sampling


def test_the_candidates_verified_and_accepted_are_counted_and_the_methods_restored() -> None:
    """`counting_acceptance` counts, through every candidate generator's
    ``update_candidate_strategy``, the candidates ``generate`` verified and accepted; a greedy
    cell whose drafter agrees with the target's greedy path accepts every candidate, and a
    sampled cell some but not all; on exit every method is the released one again."""
    from transformers.generation import candidate_generator as cg

    before = {name: vars(obj)["update_candidate_strategy"] for name, obj in vars(cg).items()
              if isinstance(obj, type) and "update_candidate_strategy" in vars(obj)}
    greedy = next(c for c in GREEDY if c.generator == "AssistedCandidateGenerator"
                  and c.settings.label == "plain")
    sampled = next(c for c in CELLS if c.do_sample and c.generator == greedy.generator
                   and c.settings.label == "plain")
    for cell, full in ((greedy, True), (sampled, False)):
        counts = [0, 0]
        sample = cell_sampler(cell)
        with counting_acceptance(counts):
            for seed in range(40):
                sample(seed)
        drafted, accepted = counts
        assert drafted > 0 and 0 <= accepted <= drafted
        assert (accepted == drafted) is full
    after = {name: vars(obj)["update_candidate_strategy"] for name, obj in vars(cg).items()
             if isinstance(obj, type) and "update_candidate_strategy" in vars(obj)}
    assert after == before
