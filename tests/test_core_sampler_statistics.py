"""`Sampler` draws follow the exact law: the suite's statistical audit, its error rates stated.

Policy (docs/statistical-policy.md): fixed seeds; false-alarm rate ``POLICY_ALPHA = 1e-8`` per
test, guaranteed by the finite-sample bound of `dsi_ref.audit.statistical` (not the asymptotic
chi-square quantile); power computed *before* sampling against a named alternative — the exact
law of the zoo's ``residual-from-p`` mutant on the same models — and required to be ≥ 0.999; a
negative control checks that the same audit, on samples of that mutant, rejects. The sample is
twice the smallest that reaches that power (`required_samples`: 464 here; the stated miss at
twice that, the G test's exact miss or a proven bound on it, is below 1e-15), as for the zoo's
negative controls in ``dsi_ref.backends.hf.assisted``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import dsi_ref as dr
from dsi_ref.audit.statistical import (
    POLICY_ALPHA,
    Alternative,
    achieved_power,
    required_samples,
    statistical_audit,
)
from dsi_ref.audit.zoo import MUTANTS

TARGET = dr.TableLM.random(3, 1, seed=11, name="bigram-target")
DRAFTER = dr.TableLM.random(3, 1, seed=12, name="bigram-drafter")
N_TOKENS = 3
MUTANT = MUTANTS["residual-from-p"]


def _sampler(decoder: Callable[..., dr.Run]) -> Callable[[int], tuple[int, ...]]:
    def sample(seed: int) -> tuple[int, ...]:
        return decoder(TARGET, DRAFTER, (), N_TOKENS, dr.Sampler(seed), lookahead=2).tokens
    return sample


@pytest.mark.statistical(alpha=1e-8 + 1e-15)  # POLICY_ALPHA; the control's miss ~1e-15
def test_sampled_speculative_follows_the_exact_target_law() -> None:
    law = dr.target_distribution(TARGET, (), N_TOKENS)
    wrong = dr.exact_distribution(
        lambda rng: MUTANT.decoder(TARGET, DRAFTER, (), N_TOKENS, rng, lookahead=2).tokens)
    assert dr.total_variation(wrong, law) > 0
    alternative = Alternative.of_law(wrong, "residual-from-p")
    needed = required_samples(law, alternative, alpha=POLICY_ALPHA, power=0.999)
    assert needed is not None
    assert needed == 464  # as the module docstring states
    n_samples = 2 * needed
    power = achieved_power(law, alternative, n_samples, alpha=POLICY_ALPHA)
    assert power >= 1 - 1e-15, f"the audit is underpowered against residual-from-p: {power:.4f}"

    report = statistical_audit(_sampler(dr.speculative), law, n_samples,
                               alternative=alternative, power=0.999, seed=1)
    assert report.verdict == "lossless", str(report)

    # negative control: the same audit rejects the mutant's samples
    control = statistical_audit(_sampler(MUTANT.decoder), law, n_samples,
                                alternative=alternative, power=0.999, seed=2)
    assert control.verdict == "lossy", str(control)
