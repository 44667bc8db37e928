"""The audit matrix over Hugging Face's candidate generators (``dsi_ref.backends.hf_generators``).

Fast (default run): every greedy cell (a point mass: 21 draws give power 0.99 against every law
at TV >= 0.2) and the matrix's shape: every one of the eight generators has cells or a stated
reason. Slow: every sampled cell at TV >= 0.2. Each "lossless" assertion has false-alarm rate
``POLICY_ALPHA`` = 1e-8 (docs/statistical-policy.md). The verdicts are for the installed
``transformers`` version (in every failure message).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from dsi_ref.audit.statistical import POLICY_ALPHA  # noqa: E402
from dsi_ref.backends.hf_generators import (  # noqa: E402
    CELLS,
    FAST_CELLS,
    GENERATORS,
    NOT_DRIVEN,
    Cell,
    audit_cell,
    cell_sampler,
    reference_law,
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


SAMPLED = [c for c in CELLS if c.do_sample
           and c.generator != "UniversalSpeculativeDecodingGenerator"]


@pytest.mark.slow
@pytest.mark.statistical(alpha=1e-8)
@pytest.mark.parametrize("cell", SAMPLED, ids=[c.name for c in SAMPLED])
def test_sampled_cells_are_lossless_at_stated_power(cell: Cell) -> None:
    result = audit_cell(cell, epsilon=0.2)
    assert result.power is not None and result.power >= 0.99
    assert result.verdict == "lossless", f"{cell.name} ({VERSION}):\n{result.report}"
