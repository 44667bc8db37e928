"""The llama.cpp findings against the code that wrote them (the default run; no llama.cpp needed).

benchmarks/llama_findings.py stores one section per llama-cpp-python release in
benchmarks/findings (``llama-cpp-VERSION.md``), composed into docs/engine-findings.md. Here: the
locked release has its section, the section's cells are the current matrix's (a full run), every
row's sample size and power are what the plan states for that cell (recomputed from the exact
reference law, no sampling), its expected verdict is its path's, and every ``llama-speculative``
row's exact TV is the predicted law's (recomputed).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dsi_ref.audit.statistical import POLICY_ALPHA, Alternative, achieved_power, laws_tv
from dsi_ref.backends.llama_cpp import models as m
from dsi_ref.backends.llama_cpp.matrix import (
    EPSILON,
    cells,
    planned_samples,
    prompt_ids,
)
from dsi_ref.backends.llama_cpp.sampling import reference_law
from dsi_ref.backends.llama_cpp.whitebox import speculative_example_law

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "locks" / "py311-llama.txt"


def _version() -> str:
    found = re.search(r"^llama-cpp-python==(\S+)", LOCK.read_text(), re.M)
    assert found, LOCK
    return found[1]


def _section() -> str:
    path = ROOT / "benchmarks" / "findings" / f"llama-cpp-{_version()}.md"
    assert path.exists(), f"no findings for the locked llama-cpp-python {_version()}: run " \
        "benchmarks/llama_findings.py --write in .venv-llama"
    return path.read_text()


def _table(text: str, heading: str) -> list[list[str]]:
    """The rows of the first table after ``heading`` (its header and rule left out)."""
    lines = text.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[start + 2:end]]


def test_the_locked_release_has_a_full_section_of_the_current_matrix() -> None:
    text = _section()
    assert "Full run" in text and "Unexpected verdicts" not in text
    rows = _table(text, "### Cells")
    assert [r[1] for r in rows] == [c.name for c in cells()]
    assert all(r[0] == _version() for r in rows)
    assert "## llama-cpp-python " + _version() in text


@pytest.mark.statistical(alpha=0, reason="recomputes the plan and the power the page states "
                         "from the exact reference law; nothing is sampled")
def test_every_row_states_the_plan_of_its_cell() -> None:
    by_name = {c.name: c for c in cells()}
    laws: dict[object, dict[tuple[int, ...], float]] = {}
    powers: dict[object, float] = {}
    for row in _table(_section(), "### Cells"):
        cell = by_name[row[1]]
        assert row[2] in {f"**{cell.spec.expected}**"}, row
        assert row[3] == cell.spec.expected
        n = int(row[7])
        assert n == planned_samples(cell)
        key = (cell.sampler, cell.n_tokens)
        if key not in laws:
            laws[key] = reference_law(m.target_model(), prompt_ids(), cell.n_tokens,
                                      cell.sampler).law
        if (key, n) not in powers:
            powers[(key, n)] = achieved_power(laws[key], Alternative.tv(EPSILON), n,
                                              alpha=POLICY_ALPHA)
        assert row[6] == f"{powers[(key, n)]:.6f}", (row[1], row[6], powers[(key, n)])


def test_the_predicted_losses_are_the_whitebox_laws() -> None:
    by_name = {c.name: c for c in cells()}
    rows = _table(_section(), "### `llama-speculative` against its predicted law")
    assert rows and all(by_name[r[1]].spec.mode == "speculative" for r in rows)
    cells_rows = {r[1]: r for r in _table(_section(), "### Cells")}
    assert {r[1] for r in rows} == {c.name for c in cells() if c.spec.mode == "speculative"}
    drafters = {"near": m.near_drafter(), "independent": m.independent_drafter()}
    for row in rows:
        cell = by_name[row[1]]
        law, _ = speculative_example_law(m.target_model(), drafters[cell.drafter], prompt_ids(),
                                         cell.n_tokens, cell.sampler, cell.k)
        ref = reference_law(m.target_model(), prompt_ids(), cell.n_tokens, cell.sampler).law
        assert row[2] == f"{laws_tv(law, ref):.4f}", row
        n = int(cells_rows[row[1]][7])
        power = achieved_power(ref, Alternative.of_law(law), n, alpha=POLICY_ALPHA)
        assert row[3] == f"{power:.6f}" and power >= 0.99, (row, power)



def test_the_reference_laws_support_does_not_depend_on_float_rounding() -> None:
    """A token the sampler chain removes has probability exactly 0, whatever the last bits of the
    logits: the laws of the filtered samplers keep the same outcomes when every logit moves by a
    few ulps (another CPU's float kernels), so the sample size planned from them stays the same.
    ``1 - sum(live)`` once left an outcome of probability 5e-17 on one CPU and none on another,
    and changed the plans of 27 cells."""
    weights = m.target_model().weights()
    filtered = {c.sampler: c.n_tokens for c in cells()
                if c.sampler.top_p < 1 or c.sampler.min_p > 0 or c.sampler.typical_p < 1}
    assert filtered
    for sampler, n_tokens in filtered.items():
        base = reference_law(m.target_model(), prompt_ids(), n_tokens, sampler).law
        for ulps in (1, 3, 7):
            def moved(tokens: tuple[int, ...], ulps: int = ulps) -> np.ndarray:
                row: np.ndarray = m.forward(m.target_model(), tokens, weights)[-1]
                return row * (1 + ulps * 2.0**-52)
            law = reference_law(m.target_model(), prompt_ids(), n_tokens, sampler, moved).law
            assert law.keys() == base.keys(), (sampler.name, ulps, law.keys() ^ base.keys())
