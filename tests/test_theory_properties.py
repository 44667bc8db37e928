"""Property tests (hypothesis) of the theorems' conclusions, evaluated exactly on random rational
``(a, c, k)``: a numeric check of what z3 proves symbolically, over the same domain."""

from __future__ import annotations

from fractions import Fraction as F

from hypothesis import given
from hypothesis import strategies as st

import theory

rates = st.fractions(min_value=0, max_value=1, max_denominator=20)
costs = st.fractions(min_value=0, max_value=1, max_denominator=20).filter(lambda x: x > 0)
lookaheads = st.integers(min_value=1, max_value=8)


@given(rates, costs, lookaheads)
def test_paper_model_dsi_is_never_slower_than_si_or_nonsi(a: F, c: F, k: int) -> None:
    d = theory.dsi_paper_latency_per_token(a, c, k)
    si = theory.si_latency_per_token(a, c, k)
    assert d <= 1 and d <= si
    if a < 1:
        assert d < si
    assert d <= theory.dsi_paper_latency_per_token_nomin(a, c, k)


@given(rates, costs, lookaheads)
def test_sign_identity_holds_exactly(a: F, c: F, k: int) -> None:
    delta = theory.si_delta(a, c, k)
    s_k, s_k1 = theory.geometric_sum(a, 0, k), theory.geometric_sum(a, 0, k - 1)
    si = theory.si_latency_per_token(a, c, k)
    assert theory.dsi_paper_latency_per_token_nomin(a, c, k) - si == -delta * a**k / (s_k1 * s_k)
    assert si - 1 == -delta / s_k


@given(rates, costs, lookaheads)
def test_event_model_renewal_limit_is_never_slower(a: F, c: F, k: int) -> None:
    event = theory.dsi_event_latency_per_token(a, c, k)
    assert event <= 1 and event <= theory.si_latency_per_token(a, c, k)
    assert event <= theory.dsi_paper_latency_per_token_nomin(a, c, k)


@given(rates, costs)
def test_si_best_lookahead_is_a_local_minimum_below_the_bound(a: F, c: F) -> None:
    best = theory.si_best_lookahead(a, c)
    if best is None:
        assert a == 1 and c < 1
        return
    f = [theory.si_latency_per_token(a, c, k) for k in range(1, best + 2)]
    assert f[best - 1] <= f[best] and (best == 1 or f[best - 2] > f[best - 1])
    bound = theory.si_lookahead_bound(a, c)
    assert bound is not None and best <= bound


@given(rates, costs, lookaheads, st.integers(min_value=1, max_value=12))
def test_finite_n_latencies_lie_between_the_obvious_bounds(a: F, c: F, k: int, n: int) -> None:
    si = theory.si_expected_latency(a, c, k, n)
    assert n / (k + 1) <= si <= n * (k * c + 1)       # at most k + 1 tokens per iteration
    if c <= 1:
        event = theory.dsi_event_expected_latency(a, c, k, n)
        assert 0 < event <= n                          # a commit at least every target forward
