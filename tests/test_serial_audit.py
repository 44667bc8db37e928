"""Engines that do not reproduce a seed (`dsi_ref.audit.serial`): declared so, they are audited
for their law and for independence from the previous sample instead of being refused; hidden
state that carries one sample into the next is caught; an undeclared one is still refused; and a
lossy sampler is reported lossy whether or not it is seeded."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

import dsi_ref as dr
from dsi_ref.audit.serial import independence_check
from dsi_ref.audit.statistical import (
    POLICY_ALPHA,
    POLICY_MISS,
    Alternative,
    achieved_power,
    required_samples,
    statistical_audit,
)
from dsi_ref.backends.harness import EngineUnderTest, audit_engine
from dsi_ref.base.errors import InvalidParameterError, NondeterministicProgramError

HALF = Fraction(1, 2)
TARGET = dr.TableLM.context_free((HALF, HALF))
LAW = dr.target_distribution(TARGET, (), 2)  # four outcomes, 1/4 each
EPSILON = 0.2


def _unseeded() -> EngineUnderTest:
    """Correct, but its randomness is not the seed's: a fresh system generator per sample."""
    system = random.SystemRandom()

    def sample(seed: int) -> tuple[int, ...]:
        return (system.randrange(2), system.randrange(2))

    return EngineUnderTest(sample, TARGET, (), 2, name="unseeded",
                           reproducible=False, why_not_reproducible="system randomness")


def _replaying(share: float = 0.8) -> EngineUnderTest:
    """Hidden state: with probability ``share`` it returns its previous sample again (the
    marginal law stays the target's; consecutive samples are dependent)."""
    rng = random.Random(7)
    last: list[tuple[int, ...]] = []

    def sample(seed: int) -> tuple[int, ...]:
        out = last[-1] if last and rng.random() < share else (rng.randrange(2),
                                                                rng.randrange(2))
        last.append(out)
        return out

    return EngineUnderTest(sample, TARGET, (), 2, name="replaying",
                           reproducible=False, why_not_reproducible="a cache of earlier outputs")


@pytest.mark.statistical(alpha=POLICY_ALPHA)  # alpha / 2 for the law, alpha / 2 for independence
def test_a_declared_unseeded_engine_is_audited_not_refused() -> None:
    report = audit_engine(_unseeded(), epsilon=EPSILON)
    assert report.verdict == "lossless", report
    assert report.power >= 0.99
    assert report.reproduced is not None and report.reproduced[1] == 10
    assert "no dependence found" in report.independence


@pytest.mark.statistical(alpha=POLICY_MISS)  # a negative control: the miss rate, checked below
def test_hidden_state_that_keeps_the_marginal_law_is_caught() -> None:
    report = audit_engine(_replaying(), epsilon=EPSILON)
    assert report.verdict == "lossy", report
    assert "dependent" in report.independence
    # the power behind POLICY_MISS: after a sample that starts with 0, the law is 0.8 times
    # the target given a first 0 plus 0.2 times the target (TV 0.4 from it), and likewise after
    # a 1; the two groups share the n - 1 draws, so one holds at least (n - 1) // 2 of them,
    # and each group is tested at alpha / 4 (alpha / 2 over two groups)
    group = {(0, 0): 0.45, (0, 1): 0.45, (1, 0): 0.05, (1, 1): 0.05}
    n = required_samples(LAW, Alternative.tv(EPSILON), alpha=POLICY_ALPHA / 2, power=0.99)
    assert n is not None and report.n_samples == n
    power = achieved_power(LAW, Alternative.of_law(group), (n - 1) // 2, alpha=POLICY_ALPHA / 4)
    assert power >= 1 - POLICY_MISS


@pytest.mark.statistical(alpha=0, reason="no verdict is read: the refusal comes first")
def test_an_undeclared_unseeded_engine_is_still_refused() -> None:
    system = random.SystemRandom()
    with pytest.raises(NondeterministicProgramError, match="not a function of its seed"):
        statistical_audit(lambda s: (system.randrange(2), system.randrange(2)), LAW,
                          alternative=Alternative.tv(EPSILON), alpha=POLICY_ALPHA)


@pytest.mark.statistical(alpha=POLICY_MISS)  # a negative control: a point mass is far off
def test_a_lossy_unseeded_sampler_is_lossy_with_its_reproduction_share() -> None:
    system = random.SystemRandom()
    report = statistical_audit(lambda s: (0, system.randrange(2)), LAW,
                               alternative=Alternative.tv(EPSILON), alpha=POLICY_ALPHA)
    assert report.verdict == "lossy"
    assert report.reproduced is None or report.reproduced[0] < report.reproduced[1]


def test_independence_check_splits_alpha_over_the_groups() -> None:
    outcomes = [(a, b) for a in range(2) for b in range(2)] * 100
    report = independence_check(outcomes, LAW, alpha=1e-6, epsilon=EPSILON)
    assert report.groups == 2
    assert report.alpha == 1e-6
    # a cycle through the four outcomes: after (0, x) always (0, x+1) or (1, 0): dependent
    assert report.rejected


def test_not_reproducible_needs_a_reason() -> None:
    with pytest.raises(InvalidParameterError, match="why_not_reproducible"):
        EngineUnderTest(lambda s: (0,), TARGET, (), 1, reproducible=False)
    with pytest.raises(InvalidParameterError, match="target or law"):
        EngineUnderTest(lambda s: (0,), None, (), 1)
