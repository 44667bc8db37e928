"""transformers' static ensemble verification (``assistant_ensemble_weight``, 5.25) audited.

transformers 5.25 verifies assisted generation's drafts against ``v = w · p + (1 − w) · q``
instead of the target's ``p`` when ``assistant_ensemble_weight = w`` is set (DIVERSE, arXiv
2604.07622): lossy by design, "at the cost of controlled distributional bias". dsi-ref writes the
rule once (`dsi_ref.decoders.ensemble`: `EnsembleVerification`, and transformers' greedy path
`GreedyEnsembleVerification`) and computes the exact law of SI with it; here the same matrix cell
as `dsi_ref.backends.hf.generators` (the toy bigram pair, ``num_assistant_tokens = 2``) is run
with the option (sampled at ``w = 1/2``; greedy at ``w = 1/4``) and audited twice:

* against the target's law (the cell's `reference_law`): **lossy**, with the power stated
  against dsi-ref's exact law of the cell (`ensemble_model_law`);
* against dsi-ref's exact law of the cell: **lossless** at the stated power, which says that
  the rule as dsi-ref writes it is the law transformers samples.
"""

from __future__ import annotations

from fractions import Fraction

from transformers import GenerationConfig

from ...audit.ensemble import ensemble_law
from ...audit.exact import Law, exact_distribution, total_variation
from ...audit.statistical import (
    POLICY_ALPHA,
    POLICY_MISS,
    Alternative,
    StatisticalReport,
    statistical_audit,
)
from ...decoders.ensemble import GreedyEnsembleVerification
from ...decoders.speculative import speculative
from .assisted import single_thread
from .generators import Cell, Settings, cell_sampler, reference_law, toy_pair

__all__ = ["ENSEMBLE_CELLS", "ENSEMBLE_LOOKAHEAD", "ENSEMBLE_WEIGHT", "GREEDY_ENSEMBLE_PROMPT",
           "GREEDY_ENSEMBLE_WEIGHT", "audit_ensemble_cell",
           "ensemble_model_law", "ensemble_supported"]

#: The weight of the sampled ensemble cell.
ENSEMBLE_WEIGHT = Fraction(1, 2)
#: The greedy ensemble cell: a weight and a prompt where ``argmax v`` leaves the target's greedy
#: path (at ``w = 1/2`` every greedy path of the toys stays on it).
GREEDY_ENSEMBLE_WEIGHT = Fraction(1, 4)
GREEDY_ENSEMBLE_PROMPT = (1, 0)
#: The drafts per window of the cells (``num_assistant_tokens``, as the matrix wires it).
ENSEMBLE_LOOKAHEAD = 2
#: The ensemble cells: assisted generation, sampled and greedy, ``w = 1/2``.
ENSEMBLE_CELLS: tuple[Cell, ...] = (
    Cell("AssistedCandidateGenerator", True, Settings(), ensemble_weight=ENSEMBLE_WEIGHT),
    Cell("AssistedCandidateGenerator", False, Settings(), prompt=GREEDY_ENSEMBLE_PROMPT,
         ensemble_weight=GREEDY_ENSEMBLE_WEIGHT),
)


def ensemble_supported() -> bool:
    """Whether the installed transformers has ``assistant_ensemble_weight`` (5.25 on)."""
    return hasattr(GenerationConfig(), "assistant_ensemble_weight")


def ensemble_model_law(cell: Cell) -> Law:
    """dsi-ref's exact law of an ensemble cell: SI (``ENSEMBLE_LOOKAHEAD`` drafts a window) with
    `EnsembleVerification` (sampled) or `GreedyEnsembleVerification` (greedy) at the cell's
    weight, on the matrix's toy pair."""
    if cell.ensemble_weight is None or cell.settings != Settings():
        raise ValueError(f"{cell.name}: not an ensemble cell with plain settings")
    target, drafter = toy_pair()
    if cell.do_sample:
        return ensemble_law(target, drafter, cell.prompt, cell.max_new_tokens,
                            ENSEMBLE_LOOKAHEAD, cell.ensemble_weight)
    rule = GreedyEnsembleVerification(cell.ensemble_weight)
    return exact_distribution(
        lambda rng: tuple(speculative(target, drafter, cell.prompt, cell.max_new_tokens, rng,
                                      ENSEMBLE_LOOKAHEAD, verify=rule, record=False).tokens))


def audit_ensemble_cell(cell: Cell, against: str, *, epsilon: float = 0.2,
                        alpha: float = POLICY_ALPHA, seed: int = 0) -> StatisticalReport:
    """Audit an ensemble cell ``against="target"`` (the processed target's law; the power is
    stated against `ensemble_model_law`, at least ``1 − POLICY_MISS``) or ``against="model"``
    (`ensemble_model_law`; power 0.99 against every law at TV ≥ ``epsilon``)."""
    if not ensemble_supported():
        raise RuntimeError(f"transformers {GenerationConfig.__module__} has no "
                           "assistant_ensemble_weight (added in 5.25)")
    model = ensemble_model_law(cell)
    if against == "target":
        law = reference_law(cell)
        if total_variation(model, law) == 0:
            raise ValueError(f"{cell.name}: its exact law is the target's; nothing to flag")
        alternative = Alternative.of_law(model, "dsi-ref's ensemble law")
        power = 1 - POLICY_MISS
    elif against == "model":
        law, alternative, power = model, Alternative.tv(epsilon), 0.99
    else:
        raise ValueError(f"against must be 'target' or 'model', got {against!r}")
    sampler = cell_sampler(cell)
    with single_thread():
        return statistical_audit(sampler, law, alternative=alternative, alpha=alpha,
                                 power=power, seed=seed)
