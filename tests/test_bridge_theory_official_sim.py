"""Bridge: the official offline simulator's DSI semantics (docs/paper.md, "DSI in the official
offline simulator"), hand-coded here as a tiny seeded Monte Carlo, against `theory`'s renewal
limits.

The simulator draws windows of ``k`` drafts, each accepted i.i.d. with probability ``a``; a
segment is the fully accepted windows plus the first window with a rejection; it yields
(accepted drafts) + 1 tokens and is charged ``min(drafts·c + 1, tokens)``. The per-token latency
is estimated by the renewal-reward ratio ``Σ charge / Σ tokens`` over independent segments.

Statistical policy: fixed seeds; the estimate must lie within 6 standard errors (delta method)
of the closed form, a two-sided false-alarm rate of about 2e-9 per check under the normal
approximation (32 000 segments). Power: each configuration is chosen so that the closed form
*without* the min (the paper's upper bound) lies more than 8 standard errors away at 20 000
segments, so more than 10 at 32 000 (x sqrt(1.6)); a simulator or formula that dropped the min
would then fail with probability above 0.9999 (Phi(10 - 6)), as at 4 SE and 20 000 segments.
"""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

import theory

pytestmark = pytest.mark.montecarlo(alpha=2e-9)  # per check: a two-sided Z_MAX-SE bound
SEGMENTS = 32_000
Z_MAX = 6.0
POWER_GAP = 8.0


def official_segments(a: float, c: float, k: int, n_segments: int, rng: np.random.Generator,
                      *, use_min: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Charges and token counts of ``n_segments`` segments of the official simulator."""
    charges = np.empty(n_segments)
    tokens = np.empty(n_segments)
    for s in range(n_segments):
        drafts = made = 0
        while True:
            accepted = rng.random(k) < a          # one window: k drafts, i.i.d. Bernoulli(a)
            drafts += k
            if accepted.all():
                made += k                          # fully accepted window: k tokens
                continue
            made += int(np.argmin(accepted)) + 1   # accepted prefix + the correction token
            break
        speculative = drafts * c + 1               # drafting, plus the last verification
        charges[s] = min(speculative, made) if use_min else speculative
        tokens[s] = made
    return charges, tokens


def ratio_and_se(charges: np.ndarray, tokens: np.ndarray) -> tuple[float, float]:
    """Renewal-reward estimate of cost per token and its delta-method standard error."""
    ratio = charges.sum() / tokens.sum()
    residual = charges - ratio * tokens
    se = residual.std(ddof=1) / (np.sqrt(len(tokens)) * tokens.mean())
    return float(ratio), float(se)


CONFIGS = [(F(1, 2), F(1, 2), 3, 11), (F(7, 10), F(3, 10), 2, 12), (F(3, 10), F(1, 4), 4, 13),
           (F(9, 10), F(1, 5), 4, 14)]


@pytest.mark.parametrize(("a", "c", "k", "seed"), CONFIGS)
def test_official_simulator_monte_carlo_matches_the_renewal_limit_with_the_min(
        a: F, c: F, k: int, seed: int) -> None:
    charges, tokens = official_segments(float(a), float(c), k, SEGMENTS,
                                        np.random.default_rng(seed))
    ratio, se = ratio_and_se(charges, tokens)
    with_min = float(theory.dsi_paper_latency_per_token(a, c, k))
    without_min = float(theory.dsi_paper_latency_per_token_nomin(a, c, k))
    assert abs(without_min - with_min) > POWER_GAP * se, "configuration has too little power"
    assert abs(ratio - with_min) < Z_MAX * se, (ratio, with_min, se)


@pytest.mark.parametrize(("a", "c", "k", "seed"), CONFIGS[:2])
def test_official_simulator_without_the_min_matches_the_papers_upper_bound(
        a: F, c: F, k: int, seed: int) -> None:
    charges, tokens = official_segments(float(a), float(c), k, SEGMENTS,
                                        np.random.default_rng(seed), use_min=False)
    ratio, se = ratio_and_se(charges, tokens)
    assert abs(ratio - float(theory.dsi_paper_latency_per_token_nomin(a, c, k))) < Z_MAX * se


def test_mean_tokens_per_segment_is_one_over_one_minus_a() -> None:
    """E[M k + A + 1] = 1/(1 − a): the identity behind L1 (DSI never slower than non-SI)."""
    a = 0.6
    _, tokens = official_segments(a, 0.5, 3, SEGMENTS, np.random.default_rng(15))
    se = tokens.std(ddof=1) / np.sqrt(len(tokens))
    assert abs(tokens.mean() - 1 / (1 - a)) < Z_MAX * se
