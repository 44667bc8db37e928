"""transformers' static ensemble verification (``assistant_ensemble_weight``, 5.25) against
dsi-ref's exact law of the rule (`dsi_ref.backends.hf.ensemble`).

Error rates (docs/statistical-policy.md): a "lossless" assertion has false-alarm rate
``POLICY_ALPHA`` = 1e-8; a "lossy" assertion misses with probability <= ``POLICY_MISS`` = 1e-9
(its power is stated against dsi-ref's exact law of the cell, computed before sampling)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("torch")
pytest.importorskip("transformers")

from dsi_ref.audit.exact import total_variation
from dsi_ref.audit.statistical import POLICY_ALPHA, POLICY_MISS
from dsi_ref.backends.hf.ensemble import (
    ENSEMBLE_CELLS,
    audit_ensemble_cell,
    ensemble_model_law,
    ensemble_supported,
)
from dsi_ref.backends.hf.generators import reference_law

pytestmark = [pytest.mark.torch,
              pytest.mark.skipif(not ensemble_supported(),
                                 reason="this transformers has no assistant_ensemble_weight")]
SAMPLED, GREEDY = ENSEMBLE_CELLS


def test_the_cells_exact_laws_are_off_the_target() -> None:
    assert total_variation(ensemble_model_law(SAMPLED), reference_law(SAMPLED)) > 0.2
    assert total_variation(ensemble_model_law(GREEDY), reference_law(GREEDY)) == 1


@pytest.mark.statistical(alpha=POLICY_ALPHA + POLICY_MISS)
def test_the_greedy_ensemble_path_is_the_rule_dsi_ref_computes() -> None:
    report = audit_ensemble_cell(GREEDY, "model")
    assert report.verdict == "lossless", report
    flagged = audit_ensemble_cell(GREEDY, "target")
    assert flagged.verdict == "lossy" and flagged.power >= 1 - POLICY_MISS, flagged


@pytest.mark.statistical(alpha=POLICY_MISS)
def test_the_sampled_ensemble_cell_is_flagged_against_the_target() -> None:
    report = audit_ensemble_cell(SAMPLED, "target")
    assert report.power >= 1 - POLICY_MISS
    assert report.verdict == "lossy", report


@pytest.mark.slow
@pytest.mark.statistical(alpha=POLICY_ALPHA)
def test_the_sampled_ensemble_cell_follows_the_law_dsi_ref_computes() -> None:
    report = audit_ensemble_cell(SAMPLED, "model")
    assert report.power >= 0.99
    assert report.verdict == "lossless", report
