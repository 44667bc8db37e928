"""Engines that do not reproduce a seed (`dsi_ref.audit.serial`): declared so, they are audited
for their law and for serial dependence at lags 1..8 instead of being refused; an engine that
copies the output of the request 1 to 8 before is caught at the audit's own sample size, with
the power stated; a law too close to a point mass for the stated power is "not checked" and the
verdict inconclusive; an undeclared one is still refused; and a lossy sampler is reported lossy
whether or not it is seeded."""

from __future__ import annotations

import random
import re
from fractions import Fraction

import pytest

import dsi_ref as dr
from dsi_ref.audit.serial import disjoint_pairs, serial_check
from dsi_ref.audit.statistical import (
    POLICY_ALPHA,
    POLICY_MISS,
    Alternative,
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
    # the power behind POLICY_MISS: the replaying engine copies the previous output with
    # probability 0.8; the serial check states its power against that copy probability at the
    # audit's sample size (its outcomes are not read for the power)
    n = required_samples(LAW, Alternative.tv(EPSILON), alpha=POLICY_ALPHA / 2, power=0.99)
    assert n is not None and report.n_samples == n
    stated = serial_check([()] * n, LAW, alpha=POLICY_ALPHA / 2, copy_probability=0.8)
    assert stated.power >= 1 - POLICY_MISS


BIGRAM = dr.TableLM.random(4, 1, seed=3)   # 24 outcomes of 3 tokens, the largest 11/32


def _copying(lag: int, target: dr.TableLM = BIGRAM, n: int = 3) -> EngineUnderTest:
    """Hidden state: with probability 1/2 it returns the output of the request ``lag`` before
    (the marginal law stays the target's: a copy of a sample of it)."""
    rng = random.Random(lag)
    outputs: list[tuple[int, ...]] = []

    def sample(seed: int) -> tuple[int, ...]:
        copy = len(outputs) >= lag and rng.random() < 0.5
        out = outputs[-lag] if copy else tuple(dr.autoregressive(target, (), n,
                                                                 dr.Sampler(seed)).tokens)
        outputs.append(out)
        return out

    return EngineUnderTest(sample, target, (), n, name=f"copies lag {lag}", reproducible=False,
                           why_not_reproducible="a cache of earlier outputs")


@pytest.mark.statistical(alpha=8e-12)  # 8 negative controls, each missed w.p. <= 1e-12
@pytest.mark.parametrize("lag", range(1, 9))
def test_a_copy_of_the_output_lag_requests_before_is_flagged_at_every_lag(lag: int) -> None:
    report = audit_engine(_copying(lag), epsilon=EPSILON)
    assert report.verdict == "lossy", report
    assert "dependent" in report.independence, report.independence
    found = re.search(r"power (\S+) against a copy of the output 8 or fewer requests before "
                      r"with probability >= 0.5", report.independence)
    assert found is not None, report.independence
    law = dr.target_distribution(BIGRAM, (), 3)
    stated = serial_check([()] * report.n_samples, law, alpha=POLICY_ALPHA / 2)
    assert found[1] == f"{stated.power:.6f}" and stated.power >= 1 - 1e-12


@pytest.mark.statistical(alpha=POLICY_ALPHA)
def test_a_law_too_close_to_a_point_mass_is_not_checked_and_not_lossless() -> None:
    """With the target at (9/10, 1/10) a copy changes an outcome rarely: at the audit's sample
    size the check cannot state its power, says so, and the verdict is inconclusive."""
    skewed = dr.TableLM.context_free((Fraction(9, 10), Fraction(1, 10)))

    def sample(seed: int) -> tuple[int, ...]:
        return tuple(dr.autoregressive(skewed, (), 2, dr.Sampler(seed)).tokens)

    engine = EngineUnderTest(sample, skewed, (), 2, name="correct, declared unseeded",
                             reproducible=False, why_not_reproducible="declared for the test")
    report = audit_engine(engine, epsilon=EPSILON)
    assert "NOT CHECKED" in report.independence, report.independence
    assert report.verdict == "inconclusive", report


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


def test_serial_check_splits_alpha_over_the_lags_and_finds_a_cycle() -> None:
    outcomes = [(a, b) for a in range(2) for b in range(2)] * 100
    report = serial_check(outcomes, LAW, alpha=1e-6)
    assert report.lags == 8 and report.alpha == 1e-6
    # a cycle through the four outcomes: the output 4 (and 8) requests before, always
    assert report.rejected and report.worst_lag in (4, 8)
    with pytest.raises(ValueError, match="lags"):
        serial_check(outcomes, LAW, alpha=1e-6, lags=0)


def test_disjoint_pairs_use_every_sample_at_most_once() -> None:
    for n in range(0, 40):
        for lag in range(1, 9):
            pairs = disjoint_pairs(n, lag)
            used = [i for pair in pairs for i in pair]
            assert len(used) == len(set(used)) and all(0 <= i < n for i in used)
            assert all(j - i == lag for i, j in pairs)
            assert len(pairs) >= (n - lag) // 2   # about half the samples are paired


def test_a_point_mass_needs_no_serial_check() -> None:
    point = {(0, 0): Fraction(1)}
    report = serial_check([(0, 0)] * 50, point, alpha=1e-6)
    assert report.checked and not report.rejected


def test_not_reproducible_needs_a_reason() -> None:
    with pytest.raises(InvalidParameterError, match="why_not_reproducible"):
        EngineUnderTest(lambda s: (0,), TARGET, (), 1, reproducible=False)
    with pytest.raises(InvalidParameterError, match="target or law"):
        EngineUnderTest(lambda s: (0,), None, (), 1)
