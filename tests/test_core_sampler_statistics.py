"""`Sampler` draws follow the exact law: one seeded chi-square test, with its error rates stated.

Policy (docs/statistical-policy.md): fixed seeds, false-alarm rate per test ``ALPHA = 1e-8``
(so a suite of up to 100 such tests stays under the 1e-6 budget), power computed before sampling
from the noncentral chi-square against a *named* alternative — the exact law of the zoo's
``residual-from-p`` mutant on the same models — and required to be ≥ 0.999; a negative control
checks that the same test, on samples of that mutant, rejects.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from fractions import Fraction as F
from typing import Any

import pytest
from scipy import stats

import dsi_ref as dr
from dsi_ref.zoo import MUTANTS

ALPHA = 1e-8
N_SAMPLES = 20_000
TARGET = dr.TableLM.random(3, 1, seed=11, name="bigram-target")
DRAFTER = dr.TableLM.random(3, 1, seed=12, name="bigram-drafter")
N_TOKENS = 3


def _pooled_cells(law: dict[Any, F], n: int) -> list[list[Any]]:
    """Outcomes grouped so that every cell expects ≥ 5 samples (smallest first, pooled)."""
    cells: list[list[Any]] = []
    pending: list[Any] = []
    mass = F(0)
    for outcome in sorted(law, key=lambda o: (law[o], o)):
        pending.append(outcome)
        mass += law[outcome]
        if mass * n >= 5:
            cells.append(pending)
            pending, mass = [], F(0)
    if pending:
        cells[-1] += pending
    return cells


def _chi_square(samples: Counter[Any], law: dict[Any, F], n: int) -> tuple[float, int]:
    cells = _pooled_cells(law, n)
    observed = [sum(samples.get(o, 0) for o in cell) for cell in cells]
    expected = [float(sum(law[o] for o in cell)) * n for cell in cells]
    outside = n - sum(observed)  # samples outside the reference support: impossible outcomes
    if outside:
        return float("inf"), len(cells) - 1
    statistic = sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))
    return statistic, len(cells) - 1


def _sample(decoder: Callable[..., dr.Run], n: int, seed: int) -> Counter[tuple[int, ...]]:
    counts: Counter[tuple[int, ...]] = Counter()
    for i in range(n):
        counts[decoder(TARGET, DRAFTER, (), N_TOKENS, dr.Sampler(seed * 10**6 + i),
                       lookahead=2).tokens] += 1
    return counts


def _power_against(alternative: dict[Any, F], law: dict[Any, F], n: int) -> float:
    cells = _pooled_cells(law, n)
    p0 = [float(sum(law[o] for o in c)) for c in cells]
    p1 = [float(sum(alternative.get(o, F(0)) for o in c)) for c in cells]
    noncentrality = n * sum((b - a) ** 2 / a for a, b in zip(p0, p1, strict=True))
    df = len(cells) - 1
    return float(stats.ncx2.sf(stats.chi2.isf(ALPHA, df), df, noncentrality))


@pytest.mark.statistical
def test_sampled_speculative_follows_the_exact_target_law() -> None:
    law = dr.target_distribution(TARGET, (), N_TOKENS)
    mutant = MUTANTS["residual-from-p"]
    alternative = dr.exact_distribution(
        lambda rng: mutant.decoder(TARGET, DRAFTER, (), N_TOKENS, rng, lookahead=2).tokens)
    assert dr.total_variation(alternative, law) > 0
    power = _power_against(alternative, law, N_SAMPLES)
    assert power >= 0.999, f"the test is underpowered against residual-from-p: {power:.4f}"

    statistic, df = _chi_square(_sample(dr.speculative, N_SAMPLES, seed=1), law, N_SAMPLES)
    p_value = float(stats.chi2.sf(statistic, df))
    assert p_value > ALPHA, f"chi2 = {statistic:.1f} on {df} df, p = {p_value:.3g}"

    # negative control: the same test rejects the mutant's samples
    statistic, df = _chi_square(_sample(mutant.decoder, N_SAMPLES, seed=2), law, N_SAMPLES)
    assert stats.chi2.sf(statistic, df) <= ALPHA
