"""`theory`'s closed forms, each checked against a second computation inside sympy: sums over the
probability mass functions (sympy ``Sum``, infinite where the law is), brute-force scans instead
of the thresholds, and the finite-N recurrences against their renewal limits."""

from __future__ import annotations

import doctest
import functools
from fractions import Fraction as F
from typing import Any

import pytest
import sympy

import theory
import theory.dsi_latency
import theory.si_latency
import theory.symbols
from theory import a, c

A_GRID = [F(0), F(1, 5), F(1, 2), F(9, 10)]
C_GRID = [F(1, 10), F(1, 3), F(1, 2), F(9, 10), F(1)]
K_GRID = [1, 2, 3, 5]
m = sympy.Symbol("m", integer=True, nonnegative=True)


@pytest.mark.parametrize("module", [theory.si_latency, theory.dsi_latency, theory.symbols],
                         ids=lambda mod: mod.__name__)
def test_docstring_examples_give_the_documented_exact_values(module: Any) -> None:
    failures, attempted = doctest.testmod(module, verbose=False)
    assert attempted > 0 and failures == 0


@pytest.mark.parametrize("k", range(1, 7))
def test_si_expected_tokens_is_the_mean_of_the_accepted_pmf(k: int) -> None:
    pmf = theory.si_accepted_pmf(a, k)
    assert sympy.expand(sum(pmf)) == 1
    mean = sympy.expand(sum((j + 1) * p for j, p in enumerate(pmf)))
    assert sympy.expand(theory.si_expected_tokens(a, k) - mean) == 0


@pytest.mark.parametrize("k", range(1, 7))
def test_si_closed_forms_equal_the_papers_rational_form(k: int) -> None:
    symbolic_k = theory.si_expected_tokens(a, theory.k)       # sympy's piecewise Sum
    assert sympy.simplify(symbolic_k.subs(theory.k, k) - theory.si_expected_tokens(a, k)) == 0
    paper = (k * c + 1) * (1 - a) / (1 - a ** (k + 1))
    assert sympy.simplify(theory.si_latency_per_token(a, c, k) - paper) == 0
    delta = sum(a**j for j in range(1, k + 1)) - k * c
    assert sympy.expand(theory.si_delta(a, c, k) - delta) == 0


@pytest.mark.parametrize(("a_", "c_", "k"), [(F(1, 3), F(1, 5), 3), (F(4, 5), F(1, 10), 2)])
def test_si_finite_n_increments_converge_to_the_renewal_limit(a_: F, c_: F, k: int) -> None:
    t_40 = theory.si_expected_latency(a_, c_, k, 40)
    t_39 = theory.si_expected_latency(a_, c_, k, 39)
    assert abs(float(t_40 - t_39 - theory.si_latency_per_token(a_, c_, k))) < 1e-3


def test_si_finite_n_symbolic_in_a_and_c_matches_numeric() -> None:
    symbolic = theory.si_expected_latency(a, c, 3, 5)
    for a_, c_ in [(F(1, 3), F(1, 5)), (F(9, 10), F(1))]:
        assert symbolic.subs({a: a_, c: c_}) == theory.si_expected_latency(a_, c_, 3, 5)


R = sympy.Symbol("R", positive=True)
T = sympy.Symbol("T", integer=True, nonnegative=True)


@functools.cache
def _geometric_tails() -> tuple[Any, Any]:
    """``Σ_{m≥T} (1 − R) R^m`` and ``Σ_{m≥T} (1 − R) R^m m``, summed once by sympy (symbolic R,
    T), then evaluated by substitution: the second computation of every geometric tail below."""
    tail0 = sympy.Sum((1 - R) * R ** (m + T), (m, 0, sympy.oo)).doit()
    tail1 = sympy.Sum((1 - R) * R ** (m + T) * (m + T), (m, 0, sympy.oo)).doit()
    return tail0, tail1


def _tail(r: Any, t: int, linear: Any, constant: Any) -> Any:
    """``Σ_{m≥t} (1 − r) r^m (linear·m + constant)`` via the sympy sums."""
    tail0, tail1 = _geometric_tails()
    values = {R: r, T: t}
    return linear * tail1.subs(values) + constant * tail0.subs(values)


def _segment_expectation(a_: F, k: int, linear: Any, constant: Any) -> Any:
    """``E[linear(j)·M + constant(j)]`` over the paper model's segment law (M, A = j)."""
    a_s = sympy.Rational(a_)
    r = a_s**k
    return sympy.simplify(sum(a_s**j * (1 - a_s) / (1 - r) * _tail(r, 0, linear(j), constant(j))
                               for j in range(k)))


@pytest.mark.parametrize("a_", [F(1, 5), F(1, 2), F(9, 10)])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_paper_model_target_only_and_speculative_means_by_summing_the_segment_law(
        a_: F, k: int) -> None:
    c_ = sympy.Rational(1, 3)
    target_only = _segment_expectation(a_, k, lambda j: k, lambda j: j + 1)
    speculative = _segment_expectation(a_, k, lambda j: k * c_, lambda j: k * c_ + 1)
    assert (1 - a_) * target_only == 1                      # E[V] = 1/(1 − a)
    assert (1 - a_) * speculative == theory.dsi_paper_latency_per_token_nomin(a_, c_, k)


def _min_by_scanning(a_: F, c_: F, k: int) -> Any:
    """Per-token paper-model DSI with the min: find each threshold by scanning m (no ceiling
    formula), then sum the explicit head and the sympy geometric tail."""
    a_s, c_s = sympy.Rational(a_), sympy.Rational(c_)
    r = a_s**k
    total = sympy.Integer(0)
    for j in range(k):
        start = next((t for t in range(200) if (t + 1) * k * c_s + 1 <= t * k + j + 1), None)
        if start is None:  # the speculative cost never wins (c = 1): target-only throughout
            total += a_s**j * (1 - a_s) / (1 - r) * _tail(r, 0, k, j + 1)
            continue
        head = sum(((1 - r) * r**mm * (mm * k + j + 1) for mm in range(start)), sympy.Integer(0))
        tail = _tail(r, start, k * c_s, k * c_s + 1)
        total += a_s**j * (1 - a_s) / (1 - r) * (head + tail)
    return sympy.simplify((1 - a_s) * total)


@pytest.mark.parametrize("a_", [F(1, 5), F(1, 2), F(9, 10)])
@pytest.mark.parametrize("c_", [F(1, 10), F(1, 3), F(9, 10), F(1)])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_paper_model_min_closed_form_equals_the_scanned_sum(a_: F, c_: F, k: int) -> None:
    assert theory.dsi_paper_latency_per_token(a_, c_, k) == _min_by_scanning(a_, c_, k)


@pytest.mark.parametrize("a_", A_GRID + [F(1)])
@pytest.mark.parametrize("c_", C_GRID)
@pytest.mark.parametrize("k", K_GRID)
def test_paper_model_lemmas_l1_l2_l3_hold_exactly(a_: F, c_: F, k: int) -> None:
    """The lemmas the z3 proofs assume about the min (proofs.theorems, method "lemmas")."""
    d = theory.dsi_paper_latency_per_token(a_, c_, k)
    assert d <= 1                                                         # L1
    assert d <= theory.dsi_paper_latency_per_token_nomin(a_, c_, k)      # L2
    if a_ > 0 and c_ < 1:
        assert d < 1                                                      # L3


def test_paper_model_min_symbolic_in_a_matches_numeric_and_tends_to_c_at_a_1() -> None:
    c_, k = sympy.Rational(1, 3), 2
    symbolic = theory.dsi_paper_latency_per_token(a, c_, k)
    for a_ in (F(1, 5), F(1, 2), F(9, 10)):
        assert symbolic.subs(a, a_) == theory.dsi_paper_latency_per_token(a_, c_, k)
    assert sympy.limit(symbolic, a, 1, "-") == c_ == theory.dsi_paper_latency_per_token(1, c_, k)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("c_", [F(1, 10), F(1, 2), F(1)])
def test_event_commit_offset_is_the_recursion_far_from_the_end(k: int, c_: F) -> None:
    offsets = theory.dsi_event_commit_offsets(k, c_, 60)
    for g in range(40):
        assert offsets[g] == theory.dsi_event_commit_offset(g, k, c_)


@pytest.mark.parametrize("a_", [F(1, 5), F(1, 2), F(9, 10)])
@pytest.mark.parametrize("c_", [F(1, 10), F(1, 3), F(9, 10)])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_event_renewal_limit_by_summing_the_geometric_rejection_position(
        a_: F, c_: F, k: int) -> None:
    a_s = sympy.Rational(a_)
    # G = q k + j: P(q) = (1 − a^k) a^(k q) (a sympy tail), P(j) = a^j (1 − a)/(1 − a^k)
    mean_d = sum(a_s**j * (1 - a_s) / (1 - a_s**k)
                 * _tail(a_s**k, 0, k * sympy.Rational(c_), 1 + min(j, k * c_))
                 for j in range(k))
    assert theory.dsi_event_latency_per_token(a_, c_, k) == sympy.simplify((1 - a_s) * mean_d)
    if k * c_ <= 1:
        assert theory.dsi_event_latency_per_token(a_, c_, k) == \
            (1 - a_s) + a_s * k * c_ / sum(a_s**j for j in range(k))


def test_event_finite_n_increments_converge_to_the_renewal_limit() -> None:
    a_, c_, k = F(1, 2), F(1, 4), 2
    t_30 = theory.dsi_event_expected_latency(a_, c_, k, 30)
    t_29 = theory.dsi_event_expected_latency(a_, c_, k, 29)
    assert abs(float(t_30 - t_29 - theory.dsi_event_latency_per_token(a_, c_, k))) < 1e-6


@pytest.mark.parametrize("a_", [F(0), F(1, 5), F(1, 2), F(4, 5), F(19, 20), F(1)])
@pytest.mark.parametrize("c_", [F(1, 100), F(1, 10), F(1, 2), F(1)])
def test_si_best_lookahead_is_the_brute_force_argmin_and_below_the_bound(a_: F, c_: F) -> None:
    best = theory.si_best_lookahead(a_, c_)
    if a_ == 1 and c_ < 1:
        assert best is None and theory.si_lookahead_bound(a_, c_) is None
        latencies = [theory.si_latency_per_token(a_, c_, kk) for kk in range(1, 30)]
        assert latencies == sorted(latencies, reverse=True)   # decreasing: no finite optimum
        return
    bound = theory.si_lookahead_bound(a_, c_)
    assert best is not None and bound is not None and best <= bound
    latencies = {kk: theory.si_latency_per_token(a_, c_, kk) for kk in range(1, bound + 20)}
    assert latencies[best] == min(latencies.values())
    assert all(latencies[kk] > latencies[best] for kk in range(1, best))   # first minimiser


@pytest.mark.parametrize("c_", [F(1, 10), F(1, 7), F(1, 3), F(1, 2), F(1)])
@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_sp_requirement_is_the_smallest_server_count_covering_one_target_forward(
        c_: F, k: int) -> None:
    smallest = next(s for s in range(1, 100) if s * k * c_ >= 1)
    assert theory.sp_requirement(c_, k) == smallest == theory.event_verification_servers(c_, k)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: theory.si_latency_per_token(F(3, 2), F(1, 2), 2), "a must lie in"),
    (lambda: theory.si_latency_per_token(F(1, 2), F(0), 2), "c must be > 0"),
    (lambda: theory.si_latency_per_token(0.5, F(1, 2), 2), "float"),
    (lambda: theory.si_expected_latency(F(1, 2), F(1, 2), 0, 3), "k must be an integer"),
    (lambda: theory.si_expected_latency(F(1, 2), F(1, 2), 2, -1), "n_tokens"),
    (lambda: theory.dsi_event_expected_latency(F(1, 2), F(3, 2), 2, 3), "c must be <= 1"),
    (lambda: theory.si_best_lookahead(a, F(1, 2)), "numeric"),
])
def test_out_of_domain_arguments_raise_a_named_error(call: Any, message: str) -> None:
    with pytest.raises(theory.TheoryDomainError, match=message):
        call()


@pytest.mark.parametrize("a_", [F(1, 5), F(1, 2), F(9, 10)])
@pytest.mark.parametrize("c_", [F(1, 20), F(1, 5), F(1)])
@pytest.mark.parametrize("servers", [1, 3, 7, 100])
def test_dsi_si_speedup_at_best_lookaheads_is_the_brute_force_ratio(
        a_: F, c_: F, servers: int) -> None:
    ratio, k_si, k_dsi = theory.dsi_si_speedup_at_best_lookaheads(a_, c_, servers, k_max=40)
    si_best = min(theory.si_latency_per_token(a_, c_, kk) for kk in range(1, 60))
    feasible = [kk for kk in range(1, 41) if kk * c_ * servers >= 1]
    dsi_best = min(theory.dsi_paper_latency_per_token(a_, c_, kk) for kk in feasible)
    assert ratio == si_best / dsi_best
    assert theory.si_latency_per_token(a_, c_, k_si) == si_best
    assert theory.sp_requirement(c_, k_dsi) <= servers
    if servers * c_ >= 1:            # k = 1 allowed: DSI beats SI at any lookahead
        assert ratio >= 1
