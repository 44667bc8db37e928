"""Tests that pin `dsi_ref.audit.statistical` exactly, so that mutants of it fail (issue #13,
item 7): every validation error (class and whole message), the pooling of tiny dyadic laws cell by
cell, the threshold, the power and the sample sizes against values computed here independently
(closed forms, scipy), every verdict branch of `audit_counts`, the report's text, and the
pass-through of every option of `statistical_audit`.

No test here decides on a random sample: the counts are given, the samplers are point masses or
functions of their seed compared with `audit_counts` on the same seeds, and the simulated
rejection rate is compared with the decisions of `audit_counts` on the same multinomial draws.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from fractions import Fraction as F
from typing import Any

import numpy as np
import pytest
from scipy import optimize, stats

from dsi_ref.audit.statistical import (
    POLICY_ALPHA,
    POLICY_MISS,
    Alternative,
    Pooling,
    Residual,
    StatisticalReport,
    achieved_power,
    audit_counts,
    g_statistic,
    laws_tv,
    pool_cells,
    rejection_rate,
    required_samples,
    sample_seeds,
    statistical_audit,
)
from dsi_ref.audit.statistical.design import (
    critical_value as _critical,
)
from dsi_ref.audit.statistical.design import (
    log_tail_bound as _log_tail_bound,
)
from dsi_ref.audit.statistical.report import _label, _mean_abs_dev
from dsi_ref.base.errors import InvalidAuditError, NondeterministicProgramError, UnderpoweredError

# A dyadic law: every n * p and every sum below is exact in binary floating point.
DYADIC = {"a": F(1, 2), "b": F(1, 4), "c": F(1, 8), "d": F(1, 16), "e": F(1, 32), "f": F(1, 32)}
POINT = {"a": F(1)}  # one outcome: one cell, df 0; TV power is 1 - (1 - eps)^n in closed form


def _raises(cls: type[Exception], message: str, fn: Callable[[], object]) -> Exception:
    """``fn()`` raises exactly ``cls`` (not a subclass or a parent) with exactly ``message``."""
    with pytest.raises(cls, match=re.escape(message)) as info:
        fn()
    assert type(info.value) is cls
    assert str(info.value) == message
    return info.value


def _close(a: float, b: float, rel: float = 1e-12) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


def _crit_ref(df: int, alpha: float) -> float:
    """Twice the root ``x > df`` of ``-x + df (1 + ln(x / df)) = ln alpha`` (Agrawal's bound)."""
    x = optimize.brentq(lambda x: -x + df * (1 + math.log(x / df)) - math.log(alpha),
                        float(df), 1e6, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    return 2.0 * float(x)


def _bound_p(g: float, df: int) -> float:
    """The finite-sample p-value bound at ``G = g``: ``e^{-x} (e x / df)^df``, ``x = g / 2``."""
    x = g / 2
    return 1.0 if x <= df else math.exp(-x) * (math.e * x / df) ** df


def _point_power(eps: float, n: int) -> float:
    return 1.0 - (1.0 - eps) ** n


def _point_needed(eps: float, power: float) -> int:
    """Smallest ``n`` with ``1 - (1 - eps)^n >= power`` (the point law's TV power)."""
    n = 1
    while _point_power(eps, n) < power:
        n += 1
    return n


def _x_up(crit: float, n: int) -> float:
    """The threshold on ``n KL`` the power computations count a rejection at (the documented
    slack ``x (1 + 1e-9) + 1e-14 n`` over ``x = crit / 2``)."""
    return crit / 2 * (1 + 1e-9) + 1e-14 * n


def _nkl(counts: Any, probs: Any) -> float:
    """``n KL(counts / n ‖ probs)``, straight from its definition."""
    n = sum(counts)
    return math.fsum(c * math.log(c / (n * p)) for c, p in zip(counts, probs, strict=True) if c)


def _law_power_ref(probs: list[float], q: list[float], outside: float, n: int,
                   crit: float) -> float:
    """``1 - (1 - t)^n P_q[n KL < x]``, summing scipy's multinomial pmf over every count vector
    of the cells (``q`` renormalised inside the support)."""
    x = _x_up(crit, n)
    inside = [v / math.fsum(q) for v in q]
    miss = []
    for head in itertools.product(range(n + 1), repeat=len(probs) - 1):
        if sum(head) <= n:
            counts = [*head, n - sum(head)]
            if _nkl(counts, probs) < x:
                miss.append(float(stats.multinomial.pmf(counts, n, inside)))
    return 1.0 - (1.0 - outside) ** n * math.fsum(miss)


def _tv_power_ref(probs: tuple[float, ...], hidden: float, n: int, eps: float,
                  crit: float) -> float:
    """The TV bound of the module docstring, written out plainly: ``M(d)``, the largest
    ``P[Bin(n, π + d) < m_hi(π)]`` over the masses ``π <= 1 - d`` of the sets of cells, with
    ``m_hi`` found by scanning the counts; then ``max((1 - top)^n, max_j (1 - t_j)^n
    M(ε - H - t_{j+1}))`` over 8 equal steps of ``[0, top]``, ``top = min(ε - H, ln(1/M(ε - H))
    / n)``."""
    x = _x_up(crit, n)
    pis = sorted({math.fsum(s) for r in range(1, len(probs))
                  for s in itertools.combinations(probs, r)})

    def m_hi(pi: float) -> int:
        return next((m for m in range(math.ceil(n * pi), n + 1)
                     if _nkl([m, n - m], [pi, 1 - pi]) >= x), n + 1)

    def big_m(d: float) -> float:
        if d <= 0:
            return 1.0
        return max((float(stats.binom.cdf(m_hi(pi) - 1, n, min(pi + d, 1.0)))
                    for pi in pis if pi <= 1 - d), default=0.0)

    d0 = eps - hidden
    if d0 <= 0:
        return 0.0
    m0 = big_m(d0)
    top = d0 if m0 <= 0 else min(d0, -math.log(m0) / n)
    steps = [top * j / 8 for j in range(9)]
    miss = (1 - top) ** n
    for t_a, t_b in itertools.pairwise(steps):
        miss = max(miss, (1 - t_a) ** n * big_m(d0 - t_b))
    return 1.0 - miss


# -- constants ----------------------------------------------------------------------------------


def test_policy_constants() -> None:
    assert POLICY_ALPHA == 1e-8
    assert POLICY_MISS == 1e-9


# -- reference laws -----------------------------------------------------------------------------


@pytest.mark.parametrize(("law", "message"), [
    ({}, "reference law must be a non-empty mapping outcome -> probability"),
    ([0.5, 0.5], "reference law must be a non-empty mapping outcome -> probability"),
    ({"a": "1"}, "reference law: probability of 'a' is '1'; need a finite number >= 0"),
    ({"a": True}, "reference law: probability of 'a' is True; need a finite number >= 0"),
    ({"a": math.inf}, "reference law: probability of 'a' is inf; need a finite number >= 0"),
    ({"a": math.nan}, "reference law: probability of 'a' is nan; need a finite number >= 0"),
    ({"a": F(-1, 2), "b": F(3, 2)},
     "reference law: probability of 'a' is Fraction(-1, 2); need a finite number >= 0"),
    ({"a": 0.5, "b": 0.5 + 2e-9},
     "reference law: probabilities sum to 1.0000000020000002, not 1 (tolerance 1e-9); pass the "
     "whole law"),
    ({"a": 0.5, "b": 0.5 - 2e-9},
     "reference law: probabilities sum to 0.9999999980000001, not 1 (tolerance 1e-9); pass the "
     "whole law"),
    ({"a": F(1, 2)},
     "reference law: probabilities sum to 0.5, not 1 (tolerance 1e-9); pass the whole law"),
])
def test_a_reference_that_is_not_a_law_is_refused_with_its_message(law: Any, message: str) -> None:
    _raises(InvalidAuditError, message, lambda: pool_cells(law, 10))


def test_a_law_within_the_tolerance_ints_and_zero_probabilities_are_accepted() -> None:
    # 5e-10 off is inside the 1e-9 tolerance; an int probability is a number; a zero drops out
    p = pool_cells({"a": 0.5, "b": 0.5 + 5e-10}, 10)
    assert p.support == frozenset({"a", "b"})
    p = pool_cells({"z": 0, "a": 1}, 10)
    assert p == Pooling((("a",),), (1.0,), 0.0, 5.0, frozenset({"a"}))


@pytest.mark.montecarlo(alpha=0, reason="rejection_rate is only called to check its argument "
                        "errors, raised before anything is drawn")
def test_every_caller_names_the_law_it_checks() -> None:
    bad = {"a": F(1, 2)}
    tail = ": probabilities sum to 0.5, not 1 (tolerance 1e-9); pass the whole law"
    _raises(InvalidAuditError, "reference law" + tail,
            lambda: audit_counts({"a": 1}, bad, on_underpowered="report"))
    _raises(InvalidAuditError, "reference law" + tail,
            lambda: statistical_audit(lambda s: "a", bad, 10))
    rng = np.random.default_rng(0)
    _raises(InvalidAuditError, "reference law" + tail,
            lambda: rejection_rate(POINT, bad, 10, 2, rng))
    _raises(InvalidAuditError, "true law" + tail, lambda: rejection_rate(bad, POINT, 10, 2, rng))


# -- Alternative --------------------------------------------------------------------------------


def test_alternative_describes_itself() -> None:
    assert Alternative.tv(0.1).describe() == "every law at TV >= 0.1"
    assert Alternative.tv(0.25).describe() == "every law at TV >= 0.25"
    assert Alternative.tv(1e-5).describe() == "every law at TV >= 1e-05"
    assert Alternative.tv(1).describe() == "every law at TV >= 1"
    assert Alternative.of_law({"a": 1.0}).describe() == "the law of a wrong law"
    assert Alternative.of_law({"a": 1.0}, "mutant-x").describe() == "the law of mutant-x"
    assert Alternative(law={"a": 1.0}).describe() == "the law of "
    alt = Alternative.tv(0.3)
    assert (alt.epsilon, alt.law, alt.name) == (0.3, None, "")
    law = {"a": F(1, 2), "b": F(1, 2)}
    alt = Alternative.of_law(law, "m")
    assert (alt.epsilon, alt.law, alt.name) == (None, law, "m")
    assert alt.law is not law  # a copy: the caller's dict may change later


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Alternative(), "an Alternative needs exactly one of epsilon or law"),
    (lambda: Alternative(epsilon=0.1, law={"a": 1.0}),
     "an Alternative needs exactly one of epsilon or law"),
    (lambda: Alternative.tv(0.0), "epsilon must lie in (0, 1], got 0.0"),
    (lambda: Alternative.tv(0), "epsilon must lie in (0, 1], got 0"),
    (lambda: Alternative.tv(-0.1), "epsilon must lie in [0, 1], got -0.1"),
    (lambda: Alternative.tv(1.5), "epsilon must lie in [0, 1], got 1.5"),
    (lambda: Alternative.tv(math.nan), "epsilon must be finite, got nan"),
    (lambda: Alternative.tv("0.1"), "epsilon must be a number, got '0.1'"),  # type: ignore[arg-type]
    (lambda: Alternative.of_law([("a", 1.0)]),  # type: ignore[arg-type]
     "alternative law must be a mapping outcome -> probability, got [('a', 1.0)]"),
    (lambda: Alternative.of_law({"a": 0.5}, "m"),
     "alternative law m: probabilities sum to 0.5, not 1 (tolerance 1e-9); pass the whole law"),
    (lambda: Alternative(law={"a": 0.5}),
     "alternative law: probabilities sum to 0.5, not 1 (tolerance 1e-9); pass the whole law"),
    (lambda: Alternative(law={}),
     "alternative law must be a non-empty mapping outcome -> probability"),
])
def test_a_bad_alternative_is_refused_with_its_message(make: Callable[[], object],
                                                       message: str) -> None:
    _raises(InvalidAuditError, message, make)


def test_the_smallest_and_largest_epsilon_are_accepted() -> None:
    assert Alternative.tv(1e-300).epsilon == 1e-300
    assert Alternative.tv(1.0).epsilon == 1.0


def test_an_alternative_law_changed_after_construction_is_checked_again_by_name() -> None:
    law = {"a": 0.5, "b": 0.5}
    alt = Alternative(law=law)  # the constructor keeps the caller's dict
    law["b"] = 0.25
    _raises(InvalidAuditError,
            "alternative law: probabilities sum to 0.75, not 1 (tolerance 1e-9); pass the whole "
            "law", lambda: achieved_power({"a": 0.5, "b": 0.5}, alt, 10))


# -- pooling ------------------------------------------------------------------------------------


def test_pooling_of_a_dyadic_law_cell_by_cell() -> None:
    # n p = 20, 10, 5 (exactly min_expected: a cell of its own), 2.5, 1.25, 1.25; the rare ones
    # pooled smallest first (e, f by repr), closing the pool at exactly 5 (with d)
    p = pool_cells(DYADIC, 40)
    assert p == Pooling((("a",), ("b",), ("c",), ("e", "f", "d")), (0.5, 0.25, 0.125, 0.125),
                        0.125 - 0.03125, 5.0, frozenset("abcdef"))
    assert p.df == 3
    assert p.pooled_outcomes == 3
    assert type(p.min_expected) is float


def test_pooling_with_a_remainder_joins_the_last_pool() -> None:
    law = {"a": 0.5, "b": 0.125, "c": 0.125, "d": 0.125, "e": 0.0625, "f": 0.0625}
    # n p = 10 | 2.5, 2.5, 2.5, 1.25, 1.25: e, f, b, c close a pool at 7.5 >= 6; d is left over
    p = pool_cells(law, 20, min_expected=6)
    assert p.cells == (("a",), ("e", "f", "b", "c", "d"))
    assert p.probs == (0.5, 0.5)
    assert p.hidden_mass == 0.5 - 0.0625
    assert p.min_expected == 6.0
    assert (p.df, p.pooled_outcomes) == (1, 5)


def test_pooling_with_a_remainder_and_no_pool_joins_the_least_likely_big_cell() -> None:
    law = {"a": 0.5, "b": 0.375, "c": 0.0625, "d": 0.0625}
    # n p = 16, 12 | 2, 2: c, d reach 4 < 5, no pool closes
    p = pool_cells(law, 32)
    assert p.cells == (("a",), ("b", "c", "d"))
    assert p.probs == (0.5, 0.5)
    assert p.hidden_mass == 0.5 - 0.0625
    assert (p.pooled_outcomes, p.df) == (3, 1)


def test_pooling_when_every_outcome_is_rare_is_one_cell() -> None:
    p = pool_cells({"a": 0.5, "b": 0.25, "c": 0.25}, 4)
    assert p == Pooling((("b", "c", "a"),), (1.0,), 0.75, 5.0, frozenset("abc"))
    assert (p.df, p.pooled_outcomes) == (0, 3)


def test_pooling_of_two_rare_outcomes_and_ties_broken_by_repr() -> None:
    # frequent ties sorted by repr, most likely first; the rare pair pooled in ascending order
    law = {"y": 0.375, "x": 0.375, "w": 0.125, "v": 0.0625, "u": 0.0625}
    p = pool_cells(law, 16, min_expected=2)  # n p = 6, 6, 2 | 1, 1
    assert p.cells == (("x",), ("y",), ("w",), ("u", "v"))
    assert p.hidden_mass == 0.0625
    assert p.pooled_outcomes == 2
    assert p.df == 3


def test_pooling_min_expected_default_and_its_boundary() -> None:
    law = {"a": 0.5, "b": 0.5}
    assert pool_cells(law, 10).cells == (("a",), ("b",))  # n p = 5 = the default 5.0
    assert pool_cells(law, 10, min_expected=5.0000001).cells == (("a", "b"),)
    assert pool_cells(law, 9).cells == (("a", "b"),)
    assert pool_cells(law, 10, min_expected=1e-300).cells == (("a",), ("b",))


def test_the_docstring_example_of_pooling() -> None:
    p = pool_cells({"a": 0.5, "b": 0.49, "c": 0.006, "d": 0.004}, 1000)
    assert p.cells == (("a",), ("b",), ("c", "d"))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: pool_cells(POINT, 0), "n_samples must be an int >= 1, got 0"),
    (lambda: pool_cells(POINT, 2.0),  # type: ignore[arg-type]
     "n_samples must be an int >= 1, got 2.0"),
    (lambda: pool_cells(POINT, 10, min_expected=0), "min_expected must be > 0, got 0"),
    (lambda: pool_cells(POINT, 10, min_expected=-1.0), "min_expected must be > 0, got -1.0"),
])
def test_bad_pooling_parameters_are_refused_with_their_message(call: Callable[[], object],
                                                              message: str) -> None:
    _raises(InvalidAuditError, message, call)


def test_pool_labels() -> None:
    assert _label(("a",)) == "'a'"
    assert _label(((0, 1),)) == "(0, 1)"
    assert _label(("a", "b")) == "pool of 2 ('a', 'b', ...)"
    assert _label(("a", "b", "c")) == "pool of 3 ('a', 'b', ...)"


# -- threshold, statistic, power ----------------------------------------------------------------


def test_log_tail_bound_is_zero_up_to_df_and_agrawals_bound_above() -> None:
    assert _log_tail_bound(0.0, 2) == 0.0
    assert _log_tail_bound(1.0, 2) == 0.0
    assert _log_tail_bound(2.0, 2) == 0.0
    for x, df in ((2.5, 2), (10.0, 2), (3.0, 1), (50.0, 7)):
        expected = math.log(math.exp(-x) * (math.e * x / df) ** df)
        assert expected < 0
        assert _close(_log_tail_bound(x, df), expected)


@pytest.mark.parametrize(("df", "alpha"), [(1, 1e-8), (3, 0.01), (2, 0.5), (9, 1e-3)])
def test_critical_value_is_twice_the_root_of_the_bound(df: int, alpha: float) -> None:
    crit = _critical(df, alpha)
    assert _close(crit, _crit_ref(df, alpha), 1e-12)


def test_critical_value_is_infinite_without_degrees_of_freedom() -> None:
    assert _critical(0, 0.01) == math.inf
    assert _critical(-1, 0.01) == math.inf
    assert math.isfinite(_critical(1, 0.01))


def test_g_statistic() -> None:
    g = g_statistic([0, 1, 10, 29], [5.0, 2.0, 15.0, 18.0])
    expected = 2 * (1 * math.log(1 / 2) + 10 * math.log(10 / 15) + 29 * math.log(29 / 18))
    assert _close(g, expected)
    assert g_statistic([3, 7], [3.0, 7.0]) == 0.0
    with pytest.raises(ValueError, match="shorter"):
        g_statistic([1, 2], [1.0])


def test_power_against_a_law_inside_the_support() -> None:
    ref = {"a": 0.5, "b": 0.5}
    alt = Alternative.of_law({"a": 0.625, "b": 0.375})
    for n in (100, 400):
        expected = _law_power_ref([0.5, 0.5], [0.625, 0.375], 0.0, n, _crit_ref(1, 1e-3))
        assert 0.01 < expected < 0.99
        assert _close(achieved_power(ref, alt, n, alpha=1e-3), expected, 1e-9)


def test_power_against_a_law_whose_outcomes_share_a_pool() -> None:
    # cells (a,), (b,), (c,), (e, f, d) at n = 40; the alternative moves half of c's mass into
    # the pool, where d and f add up
    alt = Alternative.of_law({"a": 0.5, "b": 0.25, "c": 0.0625, "d": 0.0625, "f": 0.125})
    expected = _law_power_ref([0.5, 0.25, 0.125, 0.125], [0.5, 0.25, 0.0625, 0.1875], 0.0, 40,
                              _crit_ref(3, 0.01))
    assert 1e-4 < expected < 0.99
    assert _close(achieved_power(DYADIC, alt, 40, alpha=0.01), expected, 1e-9)


def test_power_against_a_law_with_mass_outside_the_support() -> None:
    ref = {"a": 0.5, "b": 0.5}
    # in the cells: Q = (0.5, 0.375); outside: 0.0625 + 0.0625 (two impossible outcomes); both
    # parts detect, and the power combines them: 1 - (1 - t)^n P[G misses]
    alt = Alternative.of_law({"a": 0.5, "b": 0.375, "y": 0.0625, "z": 0.0625})
    for n in (10, 40, 400):
        expected = _law_power_ref([0.5, 0.5], [0.5, 0.375], 0.125, n, _crit_ref(1, 0.01))
        assert _close(achieved_power(ref, alt, n, alpha=0.01), expected, 1e-9)
        assert expected > _point_power(0.125, n) or expected == 1.0


def test_power_against_a_law_entirely_outside_the_support_is_one() -> None:
    assert achieved_power({"a": 0.5, "b": 0.5}, Alternative.of_law({"z": 1.0}), 3) == 1.0
    assert achieved_power(POINT, Alternative.of_law({"z": 1.0}), 1) == 1.0


def test_tv_power_of_one_cell_is_the_chance_of_an_impossible_outcome() -> None:
    for eps, n in ((0.5, 1), (0.5, 3), (0.1, 10), (0.05, 90)):
        assert _close(achieved_power(POINT, Alternative.tv(eps), n), _point_power(eps, n))
    assert achieved_power(POINT, Alternative.tv(1.0), 1) == 1.0
    # one pooled cell hides H = 0.75 of TV: only eps - H can be put outside the support
    law = {"a": 0.5, "b": 0.25, "c": 0.25}
    assert _close(achieved_power(law, Alternative.tv(0.875), 4), _point_power(0.125, 4))
    assert achieved_power(law, Alternative.tv(0.5), 4) == 0.0


@pytest.mark.parametrize(("law", "n", "eps", "alpha"), [
    ({"a": 0.5, "b": 0.5}, 1000, 0.1, 1e-6),
    ({"a": 0.5, "b": 0.5}, 200, 0.05, 0.01),
    (DYADIC, 40, 0.3, 0.01),
    (DYADIC, 40, 0.1, 0.01),
    (DYADIC, 200, 0.2, 1e-4),
])
def test_tv_power_is_the_documented_bound(law: dict[str, Any], n: int,
                                                          eps: float, alpha: float) -> None:
    pooling = pool_cells(law, n)
    expected = _tv_power_ref(pooling.probs, pooling.hidden_mass, n, eps,
                             _crit_ref(pooling.df, alpha))
    got = achieved_power(law, Alternative.tv(eps), n, alpha=alpha)
    assert _close(got, expected, 1e-9)


def test_tv_power_docstring_value() -> None:
    assert round(achieved_power({(0,): 0.5, (1,): 0.5}, Alternative.tv(0.1), 1000, alpha=1e-6),
                 3) == 0.66


def test_tv_power_when_every_deviation_can_hide_in_a_pool_is_zero() -> None:
    # all of eps can hide in the pool (H = 0.375 >= eps), even at the smallest alpha
    law = {"a": 0.5, "b": 0.25, "c": 0.125, "d": 0.125}
    assert pool_cells(law, 40, min_expected=12).hidden_mass == 0.375
    assert achieved_power(law, Alternative.tv(0.25), 40, alpha=1e-320, min_expected=12) == 0.0
    assert achieved_power(law, Alternative.tv(0.375), 40, alpha=1e-320, min_expected=12) == 0.0
    assert achieved_power(law, Alternative.tv(0.5), 40, alpha=0.1, min_expected=12) > 0.0


def test_tv_power_of_many_cells_is_the_branch_and_bound_over_the_interval() -> None:
    # 13 cells: the sup over sets of cells is taken over the whole interval of their masses, so
    # the bound is at most the one over the sets' masses, and the branch and bound is within 1 %
    # (or one binomial term) of the sup over a fine grid of the interval
    law = {i: (1 + i / 12) / 19.5 for i in range(13)}
    assert math.isclose(math.fsum(law.values()), 1.0)
    n, eps, alpha = 2000, 0.1, 1e-3
    pooling = pool_cells(law, n)
    assert len(pooling.cells) == 13 and pooling.hidden_mass == 0.0
    got = achieved_power(law, Alternative.tv(eps), n, alpha=alpha)
    crit = _crit_ref(12, alpha)
    subsets = _tv_power_ref(pooling.probs[:8], 0.0, n, eps, crit)  # some of the sets' masses
    assert 0.05 < got <= subsets
    x = _x_up(crit, n)
    p_min = min(pooling.probs)
    grid = np.linspace(p_min, 1 - eps, 2001)[:, None]
    m = np.arange(n + 1)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        nkl = (np.where(m > 0, m * np.log(m / (n * grid)), 0.0)
               + np.where(m < n, (n - m) * np.log((n - m) / (n * (1 - grid))), 0.0))
    reaches = (m >= n * grid) & (nkl >= x)
    m_hi = np.where(reaches.any(axis=1), reaches.argmax(axis=1), n + 1)
    grid_miss = float(stats.binom.cdf(m_hi - 1, n, grid[:, 0] + eps).max())
    assert 1 - got >= grid_miss * (1 - 1e-9)  # the grid's sup is below the true sup
    assert 1 - got <= 1.2 * grid_miss  # and the true sup is close to the grid's


def test_tv_power_saturated_at_one() -> None:
    # the power saturates: 1 - e^-900 is 1.0 in floats, but whether scipy
    # returns it as 1.0 or one ulp below is its business, not this test's
    assert achieved_power({"a": 0.5, "b": 0.5}, Alternative.tv(0.5), 10_000) >= 1 - 1e-12


def test_achieved_power_defaults_are_policy_alpha_and_min_expected_5() -> None:
    alt = Alternative.tv(0.3)
    # at n = 160, e and f expect exactly 5: cells of their own only for min_expected <= 5
    default = achieved_power(DYADIC, alt, 160)
    pooling = pool_cells(DYADIC, 160, 5.0)
    assert pooling.df == 5
    expected = _tv_power_ref(pooling.probs, pooling.hidden_mass, 160, 0.3, _crit_ref(5, 1e-8))
    assert 0.05 < expected < 0.99
    assert _close(default, expected, 1e-9)
    assert default != achieved_power(DYADIC, alt, 160, min_expected=6.0)


@pytest.mark.montecarlo(alpha=0, reason="rejection_rate is only called to check its argument "
                        "errors, raised before anything is drawn")
@pytest.mark.parametrize(("alpha", "message"), [
    (0, "alpha must lie in (0, 1), got 0"),
    (1, "alpha must lie in (0, 1), got 1"),
    (0.0, "alpha must lie in (0, 1), got 0.0"),
    (1.5, "alpha must lie in (0, 1), got 1.5"),
    (True, "alpha must lie in (0, 1), got True"),
    ("0.1", "alpha must lie in (0, 1), got '0.1'"),
    (None, "alpha must lie in (0, 1), got None"),
])
def test_a_bad_alpha_is_refused_by_every_entry_point(alpha: Any, message: str) -> None:
    alt = Alternative.tv(0.5)
    _raises(InvalidAuditError, message, lambda: achieved_power(POINT, alt, 10, alpha=alpha))
    _raises(InvalidAuditError, message, lambda: required_samples(POINT, alt, alpha=alpha))
    _raises(InvalidAuditError, message,
            lambda: audit_counts({"a": 1}, POINT, alternative=alt, alpha=alpha))
    _raises(InvalidAuditError, message,
            lambda: statistical_audit(lambda s: "a", POINT, 10, alternative=alt, alpha=alpha))
    _raises(InvalidAuditError, message,
            lambda: rejection_rate(POINT, POINT, 10, 2, np.random.default_rng(0), alpha=alpha))


@pytest.mark.parametrize("power", [0, 1, 1.0, -0.5, False])
def test_a_bad_power_is_refused_by_name(power: Any) -> None:
    alt = Alternative.tv(0.5)
    message = f"power must lie in (0, 1), got {power!r}"
    _raises(InvalidAuditError, message, lambda: required_samples(POINT, alt, power=power))
    _raises(InvalidAuditError, message,
            lambda: audit_counts({"a": 1}, POINT, alternative=alt, power=power))
    _raises(InvalidAuditError, message,
            lambda: statistical_audit(lambda s: "a", POINT, 10, alternative=alt, power=power))


def test_alpha_and_power_accept_fractions_and_values_near_the_ends() -> None:
    alt = Alternative.tv(0.5)
    half: Any = F(1, 2)  # the signature says float; a Fraction is accepted too
    assert achieved_power(POINT, alt, 1, alpha=half) == 0.5
    assert achieved_power(POINT, alt, 1, alpha=1e-300) == 0.5
    assert required_samples(POINT, alt, power=half) == 1


# -- sample sizes -------------------------------------------------------------------------------


def _bisect_reference(ok: Callable[[int], bool], max_samples: int) -> int | None:
    """The documented search: double from 16 until ``ok`` (None past ``max_samples``), then
    bisect down to a gap of 0.5 % of the upper end."""
    hi = 16
    while not ok(hi):
        if hi >= max_samples:
            return None
        hi = min(2 * hi, max_samples)
    lo = hi // 2 if hi > 16 else 0
    while hi - lo > max(1, hi // 200):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if mid > 0 and ok(mid) else (mid, hi)
    return hi


@pytest.mark.parametrize(("eps", "power", "needed"), [
    (0.5, 0.99, 7), (0.05, 0.99, 90), (1.0, 0.99, 1), (0.5, 0.5, 1), (0.5, 0.75, 2),
    (0.25, 0.9, 9),
])
def test_required_samples_is_the_smallest_n_below_400(eps: float, power: float,
                                                      needed: int) -> None:
    assert _point_needed(eps, power) == needed  # the closed form agrees with the table
    assert required_samples(POINT, Alternative.tv(eps), power=power) == needed


@pytest.mark.parametrize(("eps", "power"), [
    (0.005, 0.99), (0.001, 0.999), (0.0003, 0.9),
    (1 - 0.01 ** (1 / 398.5), 0.99),  # needs 399: the search stops at a gap of 2 = 400 // 200
])
def test_required_samples_above_400_has_half_a_percent_resolution(eps: float,
                                                                  power: float) -> None:
    expected = _bisect_reference(lambda n: _point_power(eps, n) >= power, 10**9)
    assert expected is not None
    got = required_samples(POINT, Alternative.tv(eps), power=power)
    assert got == expected
    assert got >= _point_needed(eps, power) > got - max(1, got // 200) - 1


def test_required_samples_default_power_is_0_99() -> None:
    assert required_samples(POINT, Alternative.tv(0.05)) == _point_needed(0.05, 0.99) == 90


def test_required_samples_stops_at_max_samples() -> None:
    alt = Alternative.tv(0.05)  # needs 90
    assert required_samples(POINT, alt, max_samples=90) == 90
    assert required_samples(POINT, alt, max_samples=89) is None
    assert required_samples(POINT, alt, max_samples=80) is None
    assert required_samples(POINT, alt, max_samples=64) is None
    assert required_samples(POINT, alt, max_samples=16) is None
    assert required_samples(POINT, alt, max_samples=1) is None
    assert required_samples(POINT, Alternative.tv(0.5), max_samples=16) == 7


def test_required_samples_default_bound_is_a_billion() -> None:
    # needs ln(100) / 3e-9 = 1.535e9 > 10**9 samples
    assert required_samples(POINT, Alternative.tv(3e-9)) is None
    assert required_samples(POINT, Alternative.tv(3e-9), max_samples=2 * 10**9) is not None


def test_required_samples_passes_alpha_and_min_expected_to_the_power() -> None:
    alt = Alternative.tv(0.3)

    def smallest(alpha: float, min_expected: float) -> int | None:
        return _bisect_reference(lambda n: achieved_power(DYADIC, alt, n, alpha=alpha,
                                                          min_expected=min_expected) >= 0.9,
                                 10**9)

    n = required_samples(DYADIC, alt, alpha=0.01, power=0.9, min_expected=20.0)
    assert n == smallest(0.01, 20.0)
    assert n != smallest(0.01, 5.0)
    assert n != smallest(1e-8, 20.0)


# -- the report ---------------------------------------------------------------------------------


def _report(**changes: Any) -> StatisticalReport:
    fields: dict[str, Any] = {
        "verdict": "lossy", "n_samples": 100, "statistic": 12.3456, "df": 2, "p_value": 0.001234,
        "alpha": 1e-8, "critical_value": 45.678, "alternative": "every law at TV >= 0.1",
        "power": 0.98765432, "required_power": 0.99, "needed_samples": 100, "cells": 3,
        "outcomes": 4,
        "pooled_outcomes": 2, "hidden_mass": 0.01, "impossible": ((("z",), 3), ("y", 1)),
        "residuals": (Residual("'a'", 40, 50.0, -2.0),
                   Residual("pool of 2 ('b', 'c', ...)", 60, 50.0, 2.004)),
        "empirical_tv": 0.123456, "noise_tv": 0.0456789, "asymptotic_p_value": 0.0020891}
    fields.update(changes)
    return StatisticalReport(**fields)


HEAD = ("G = 12.35 (df 2, p <= 0.00123, asymptotic p 0.00209, alpha 1e-08, critical 45.68) "
        "from 100 samples over 3 cells (4 outcomes, 2 pooled); power 0.987654 against every law "
        "at TV >= 0.1 (required 0.99); empirical TV 0.1235 (noise level 0.0457)")


def test_report_text_with_impossible_outcomes_and_residuals() -> None:
    assert str(_report()) == "\n".join([
        "LOSSY: " + HEAD,
        "  impossible outcome ('z',) seen 3 times (probability 0 under the reference)",
        "  impossible outcome 'y' seen 1 times (probability 0 under the reference)",
        "  cell 'a': observed 40, expected 50.0, standardised residual -2.00",
        "  cell pool of 2 ('b', 'c', ...): observed 60, expected 50.0, standardised residual "
        "+2.00",
    ])


def test_report_text_without_impossible_outcomes_or_residuals() -> None:
    assert str(_report(verdict="lossless", impossible=(), residuals=())) == "LOSSLESS: " + HEAD
    assert str(_report(verdict="inconclusive", impossible=(), residuals=())) == \
        "INCONCLUSIVE: " + HEAD
    text = str(_report(impossible=(), residuals=(Residual("'a'", 1, 0.25, 0.0),),
                       statistic=math.inf, p_value=0.0, critical_value=math.inf,
                       required_power=0.999, asymptotic_p_value=math.nan))
    assert text.split("\n") == [
        "LOSSY: G = inf (df 2, p <= 0, asymptotic p nan, alpha 1e-08, critical inf) from 100 "
        "samples over 3 cells (4 outcomes, 2 pooled); power 0.987654 against every law at "
        "TV >= 0.1 (required 0.999); empirical TV 0.1235 (noise level 0.0457)",
        "  cell 'a': observed 1, expected 0.2, standardised residual +0.00"]


def test_report_defaults_and_properties() -> None:
    r = _report()
    assert (r.seed, r.seconds, r.counts) == (None, 0.0, {})
    assert math.isnan(_report(asymptotic_p_value=math.nan).asymptotic_p_value)
    lossy, lossless, inconclusive = (_report(verdict=v) for v in
                                     ("lossy", "lossless", "inconclusive"))
    assert (lossy.rejected, lossless.rejected, inconclusive.rejected) == (True, False, False)
    assert (bool(lossy), bool(lossless), bool(inconclusive)) == (False, True, False)
    assert r.samples_per_second == 0.0
    assert _report(seconds=0.5).samples_per_second == 200.0
    assert _report(seconds=4.0).samples_per_second == 25.0
    assert "counts" not in repr(_report(counts={"a": 1}))
    assert "hidden_mass=0.01" in repr(r)
    assert _report(counts={"a": 1}) != _report(counts={"a": 2})


# -- audit_counts: every branch and every field -------------------------------------------------


def test_audit_counts_of_a_dyadic_law_every_field() -> None:
    counts: dict[Hashable, int] = {"a": 22, "b": 9, "c": 4, "d": 3, "e": 1, "f": 1}
    alt = Alternative.tv(0.3)
    r = audit_counts(counts, DYADIC, alternative=alt, alpha=0.01, on_underpowered="report",
                     seed=7, seconds=2.0)
    observed, expected = [22, 9, 4, 5], [20.0, 10.0, 5.0, 5.0]
    g = 2 * (22 * math.log(22 / 20) + 9 * math.log(9 / 10) + 4 * math.log(4 / 5))
    crit = _crit_ref(3, 0.01)
    power = _tv_power_ref((0.5, 0.25, 0.125, 0.125), 0.09375, 40, 0.3, crit)
    assert power < 0.99
    assert r.verdict == "inconclusive"
    assert (r.n_samples, r.df, r.cells, r.outcomes, r.pooled_outcomes) == (40, 3, 4, 6, 3)
    assert _close(r.statistic, g)
    assert _close(r.p_value, _bound_p(g, 3))
    assert r.p_value == 1.0  # G / 2 < df: the bound is vacuous
    assert _close(r.asymptotic_p_value, float(stats.chi2.sf(g, 3)))
    assert (r.alpha, r.required_power, r.alternative) == (0.01, 0.99, "every law at TV >= 0.3")
    assert _close(r.critical_value, crit)
    assert _close(r.power, power, 1e-6)
    assert r.needed_samples == required_samples(DYADIC, alt, alpha=0.01, power=0.99)
    assert r.needed_samples is not None and r.needed_samples > 40
    assert r.hidden_mass == 0.09375
    assert r.impossible == ()
    labels = ["'a'", "'b'", "'c'", "pool of 3 ('e', 'f', ...)"]
    probs = [0.5, 0.25, 0.125, 0.125]
    res = [(o - e) / math.sqrt(e * (1 - p)) for o, e, p in zip(observed, expected, probs,
                                                                strict=True)]
    order = [0, 2, 1, 3]  # by |residual|: 0.63, 0.48, 0.37, 0
    assert [(x.cell, x.observed, x.expected) for x in r.residuals] == \
        [(labels[i], observed[i], expected[i]) for i in order]
    for x, i in zip(r.residuals, order, strict=True):
        assert _close(x.residual, res[i]) if res[i] else x.residual == 0.0
    tv = 0.5 * sum(abs(counts[o] / 40 - float(p)) for o, p in DYADIC.items())
    assert _close(r.empirical_tv, tv)
    noise = 0.5 * sum(math.sqrt(2 * float(p) * (1 - float(p)) / (math.pi * 40))
                      for p in DYADIC.values())
    assert _close(r.noise_tv, noise)
    assert (r.seed, r.seconds, r.counts) == (7, 2.0, counts)
    assert r.counts is not counts


def test_audit_counts_top_keeps_the_largest_residuals() -> None:
    counts: dict[Hashable, int] = {"a": 22, "b": 9, "c": 4, "d": 3, "e": 1, "f": 1}
    kw: dict[str, Any] = {"alternative": Alternative.tv(0.3), "on_underpowered": "report"}
    assert [x.cell for x in audit_counts(counts, DYADIC, top=2, **kw).residuals] == ["'a'", "'c'"]
    assert audit_counts(counts, DYADIC, top=0, **kw).residuals == ()
    assert len(audit_counts(counts, DYADIC, top=4, **kw).residuals) == 4


def test_audit_counts_default_top_is_5() -> None:
    law = {k: F(1, 8) for k in "abcdefgh"}
    # 80 draws, 10 expected in each cell: deviations -8, -5, -1, 0, 1, 3, 4, 6
    counts: dict[Hashable, int] = dict(zip("abcdefgh", (2, 5, 9, 10, 11, 13, 14, 16), strict=True))
    r = audit_counts(counts, law, alternative=Alternative.tv(0.5), on_underpowered="report")
    assert [x.cell for x in r.residuals] == ["'a'", "'h'", "'b'", "'g'", "'f'"]


def test_audit_counts_rejects_a_large_statistic() -> None:
    law = {"a": 0.5, "b": 0.5}
    r = audit_counts({"a": 100}, law, alternative=Alternative.tv(0.5), alpha=0.01)
    g = 2 * 100 * math.log(2)
    assert r.verdict == "lossy" and r.rejected
    assert r.power >= 0.99
    assert r.needed_samples == 100
    assert _close(r.statistic, g)
    assert _close(r.p_value, _bound_p(g, 1))
    assert 0 < r.p_value < 0.01
    assert _close(r.asymptotic_p_value, float(stats.chi2.sf(g, 1)))
    assert r.impossible == ()
    assert _close(r.empirical_tv, 0.5)
    assert [(x.cell, x.observed, x.expected) for x in r.residuals] == \
        [("'a'", 100, 50.0), ("'b'", 0, 50.0)]
    assert _close(r.residuals[0].residual, 10.0)
    assert _close(r.residuals[1].residual, -10.0)


def test_audit_counts_keeps_a_statistic_below_the_threshold() -> None:
    law = {"a": 0.5, "b": 0.5}
    r = audit_counts({"a": 60, "b": 40}, law, alternative=Alternative.tv(0.5), alpha=0.01)
    g = 2 * (60 * math.log(1.2) + 40 * math.log(0.8))
    assert r.verdict == "lossless" and bool(r)
    assert g < _crit_ref(1, 0.01)
    assert _close(r.statistic, g)
    assert _close(r.p_value, _bound_p(g, 1))


def test_audit_counts_impossible_outcomes_reject_and_are_listed_most_frequent_first() -> None:
    law = {"a": F(1, 2), "b": F(1, 2), "w": F(0)}
    counts: dict[Hashable, int] = {"a": 10, "b": 6, "w": 1, "y": 3, "x": 0}
    r = audit_counts(counts, law, alternative=Alternative.tv(0.5), on_underpowered="report")
    assert r.verdict == "lossy"
    assert r.impossible == (("y", 3), ("w", 1))  # by count, not by outcome
    assert (r.statistic, r.p_value, r.asymptotic_p_value) == (math.inf, 0.0, 0.0)
    assert r.outcomes == 2
    # 20 draws: |10/20 - 1/2| + |6/20 - 1/2| + 3/20 + 1/20
    assert _close(r.empirical_tv, 0.5 * (0.0 + 0.2 + 0.15 + 0.05))
    assert [(x.cell, x.observed) for x in r.residuals] == [("'b'", 6), ("'a'", 10)]
    assert r.counts == counts


def test_audit_counts_of_a_point_law() -> None:
    r = audit_counts({"a": 7}, POINT, alternative=Alternative.tv(0.5))
    assert r.verdict == "lossless" and bool(r) and not r.rejected
    assert (r.statistic, r.df, r.p_value, r.asymptotic_p_value) == (0.0, 0, 1.0, 1.0)
    assert r.critical_value == math.inf
    assert _close(r.power, _point_power(0.5, 7))
    assert (r.needed_samples, r.cells, r.outcomes, r.pooled_outcomes) == (7, 1, 1, 0)
    assert r.residuals == (Residual("'a'", 7, 7.0, 0.0),)
    assert (r.empirical_tv, r.noise_tv, r.hidden_mass) == (0.0, 0.0, 0.0)
    r = audit_counts({"a": 7, "z": 1}, POINT, alternative=Alternative.tv(0.5))
    assert r.verdict == "lossy" and r.impossible == (("z", 1),)
    assert r.asymptotic_p_value == 1.0
    assert _close(r.empirical_tv, 0.125)


def test_audit_counts_power_exactly_at_the_requirement_is_enough() -> None:
    # one draw against TV 0.5 has power 1 - 0.5 = 0.5 exactly
    r = audit_counts({"a": 1}, POINT, alternative=Alternative.tv(0.5), power=0.5)
    assert r.power == 0.5
    assert r.verdict == "lossless"
    assert (r.required_power, r.needed_samples) == (0.5, 1)


def test_audit_counts_underpowered_raises_with_the_needed_size() -> None:
    err = _raises(UnderpoweredError,
                  "3 samples detect every law at TV >= 0.5 with power 0.875 < the required 0.99: "
                  "the audit cannot declare the decoder lossless; about 7 samples are needed (or "
                  "state a larger epsilon / a lower power)",
                  lambda: audit_counts({"a": 3}, POINT, alternative=Alternative.tv(0.5)))
    assert isinstance(err, UnderpoweredError)
    assert (err.n_samples, err.power, err.required_power, err.needed_samples) == \
        (3, 0.875, 0.99, _point_needed(0.5, 0.99))


def test_audit_counts_underpowered_reports_inconclusive_with_the_needed_size() -> None:
    r = audit_counts({"a": 3}, POINT, alternative=Alternative.tv(0.5), on_underpowered="report")
    assert r.verdict == "inconclusive"
    assert not r and not r.rejected
    assert r.power == 0.875
    assert r.needed_samples == 7
    # an underpowered rejection is still a rejection
    r = audit_counts({"a": 3, "z": 1}, POINT, alternative=Alternative.tv(0.5),
                     on_underpowered="report")
    assert r.verdict == "lossy"


def test_audit_counts_defaults() -> None:
    # default alternative: TV 0.1; default power 0.99; default alpha POLICY_ALPHA; defaults of
    # seed and seconds
    n = _point_needed(0.1, 0.99)
    r = audit_counts({"a": n}, POINT)
    assert (r.alternative, r.required_power, r.alpha) == ("every law at TV >= 0.1", 0.99, 1e-8)
    assert (r.seed, r.seconds, r.verdict) == (None, 0.0, "lossless")
    _raises(UnderpoweredError,
            f"{n - 1} samples detect every law at TV >= 0.1 with power "
            f"{_point_power(0.1, n - 1):.4g} < the required 0.99: the audit cannot declare the "
            f"decoder lossless; about {n} samples are needed (or state a larger epsilon / a lower "
            "power)", lambda: audit_counts({"a": n - 1}, POINT))
    # default min_expected 5: at 10 draws of (1/2, 1/2) each outcome is a cell of its own
    r = audit_counts({"a": 5, "b": 5}, {"a": 0.5, "b": 0.5}, alternative=Alternative.tv(0.5),
                     on_underpowered="report")
    assert (r.cells, r.df) == (2, 1)
    assert _close(r.critical_value, _crit_ref(1, 1e-8))


def test_audit_counts_passes_min_expected_to_the_pooling_and_the_needed_size() -> None:
    alt = Alternative.tv(0.3)
    # n p = 20 | 10, 5, 2.5, 1.25, 1.25: with min_expected 20 the five rare ones make one pool
    counts: dict[Hashable, int] = {"a": 20, "b": 10, "c": 5, "d": 3, "e": 1, "f": 1}
    r = audit_counts(counts, DYADIC, alternative=alt, alpha=0.01, min_expected=20,
                     on_underpowered="report")
    assert (r.cells, r.df, r.pooled_outcomes, r.hidden_mass) == (2, 1, 5, 0.5 - 0.03125)
    assert r.residuals == (Residual("'a'", 20, 20.0, 0.0),
                           Residual("pool of 5 ('e', 'f', ...)", 20, 20.0, 0.0))
    assert r.needed_samples == required_samples(DYADIC, alt, alpha=0.01, min_expected=20)
    assert r.needed_samples != required_samples(DYADIC, alt, alpha=0.01)


def test_audit_counts_needed_size_uses_the_required_power() -> None:
    alt = Alternative.tv(0.3)
    r = audit_counts({"a": 20, "b": 20}, DYADIC, alternative=alt, alpha=0.01, power=0.9,
                     on_underpowered="report")
    assert r.verdict == "lossy"  # b is far too frequent; still underpowered, with its size
    assert r.needed_samples == required_samples(DYADIC, alt, alpha=0.01, power=0.9)
    assert r.needed_samples != required_samples(DYADIC, alt, alpha=0.01, power=0.99)


def test_audit_counts_of_one_cell_whose_probability_is_not_exactly_one() -> None:
    # within the 1e-9 tolerance the one cell has probability 1 - 5e-10: G > 0 with df 0, and
    # the bound is vacuous (p = 1) without dividing by df
    law = {"a": 0.5, "b": 0.5 - 5e-10}
    r = audit_counts({"a": 2, "b": 2}, law, alternative=Alternative.tv(0.5),
                     on_underpowered="report", min_expected=10)
    assert (r.cells, r.df, r.verdict) == (1, 0, "inconclusive")
    assert r.statistic > 0
    assert (r.p_value, r.asymptotic_p_value, r.critical_value) == (1.0, 1.0, math.inf)


def test_audit_counts_needed_size_uses_alpha() -> None:
    law = {"a": 0.5, "b": 0.5}
    alt = Alternative.tv(0.2)
    r = audit_counts({"a": 5, "b": 5}, law, alternative=alt, alpha=0.01,
                     on_underpowered="report")
    assert r.needed_samples == required_samples(law, alt, alpha=0.01)
    assert r.needed_samples != required_samples(law, alt)


@pytest.mark.parametrize(("kwargs", "counts", "message"), [
    ({"alternative": 0.1}, {"a": 1},
     "alternative must be an Alternative (Alternative.tv(epsilon) or Alternative.of_law(law)), "
     "got 0.1"),
    ({"seed": -1}, {"a": 1}, "seed must be an int >= 0 (a seed), got -1"),
    ({"seed": 1.0}, {"a": 1}, "seed must be an int >= 0 (a seed), got 1.0"),
    ({"min_expected": 0}, {"a": 1}, "min_expected must be finite and > 0, got 0"),
    ({"min_expected": "5"}, {"a": 1}, "min_expected must be a number, got '5'"),
    ({"top": -1}, {"a": 1}, "top must be an int >= 0, got -1"),
    ({"top": 2.0}, {"a": 1}, "top must be an int >= 0, got 2.0"),
    ({"on_underpowered": "warn"}, {"a": 1},
     "on_underpowered must be one of ('raise', 'report'), got 'warn'"),
    ({}, [("a", 1)], "counts must be a mapping outcome -> int number of draws"),
    ({}, {"a": 1.0}, "counts must be a mapping outcome -> int number of draws"),
    ({}, {"a": True}, "counts must be a mapping outcome -> int number of draws"),
    ({}, {"a": 0}, "n_samples must be an int >= 1, got 0"),
    ({}, {}, "n_samples must be an int >= 1, got 0"),
    ({}, {"a": 5, "b": -1}, "counts must be >= 0"),
])
def test_audit_counts_refuses_bad_arguments_with_their_message(kwargs: dict[str, Any],
                                                               counts: Any, message: str) -> None:
    _raises(InvalidAuditError, message,
            lambda: audit_counts(counts, POINT, **{"on_underpowered": "report", **kwargs}))


def test_audit_counts_accepts_numpy_counts_and_seed_zero() -> None:
    counts: dict[Hashable, Any] = {"a": np.int64(7)}
    r = audit_counts(counts, POINT, alternative=Alternative.tv(0.5), seed=0, top=0)
    assert (r.verdict, r.n_samples, r.seed, r.residuals) == ("lossless", 7, 0, ())


def test_mean_abs_dev_normal_approximation() -> None:
    assert _close(_mean_abs_dev(40, 0.25), math.sqrt(2 * 0.25 * 0.75 / (math.pi * 40)))
    assert _mean_abs_dev(10, 1.0) == 0.0


# -- sample seeds -------------------------------------------------------------------------------


def test_sample_seeds_are_64_bit_words_of_the_seed_sequence() -> None:
    words = np.random.SeedSequence(7).generate_state(5, dtype=np.uint64)
    seeds = sample_seeds(7, 5)
    assert seeds == [int(w) for w in words]
    assert all(type(s) is int for s in seeds)
    assert max(seeds) >= 2**32
    assert sample_seeds(7, 1) == seeds[:1]


# -- statistical_audit --------------------------------------------------------------------------


@pytest.mark.statistical(alpha=0, reason="the samplers are point masses: every seed gives the "
                         "same counts, so the verdict cannot depend on the draw")
def test_statistical_audit_of_point_masses() -> None:
    r = statistical_audit(lambda s: "a", POINT, 7, alternative=Alternative.tv(0.5))
    assert (r.verdict, r.n_samples, r.counts, r.seed) == ("lossless", 7, {"a": 7}, 0)
    r = statistical_audit(lambda s: "z", POINT, 7, alternative=Alternative.tv(0.5))
    assert (r.verdict, r.impossible) == ("lossy", (("z", 7),))
    # the sample size chosen for the power when none is given
    r = statistical_audit(lambda s: "a", POINT, alternative=Alternative.tv(0.5))
    assert (r.verdict, r.n_samples) == ("lossless", _point_needed(0.5, 0.99))
    r = statistical_audit(lambda s: "a", POINT, alternative=Alternative.tv(0.5), power=0.5)
    assert (r.verdict, r.n_samples, r.power) == ("lossless", 1, 0.5)
    # default alternative TV >= 0.1
    n = _point_needed(0.1, 0.99)
    r = statistical_audit(lambda s: ["a"][0], POINT, determinism_checks=0)
    assert (r.verdict, r.n_samples, r.alternative) == ("lossless", n, "every law at TV >= 0.1")
    # underpowered, reported: inconclusive
    r = statistical_audit(lambda s: "a", POINT, 3, alternative=Alternative.tv(0.5),
                          on_underpowered="report")
    assert (r.verdict, r.needed_samples) == ("inconclusive", 7)
    # power exactly at the requirement is enough
    r = statistical_audit(lambda s: "a", POINT, 1, alternative=Alternative.tv(0.5), power=0.5)
    assert r.verdict == "lossless"


def test_statistical_audit_is_audit_counts_of_the_seeded_samples() -> None:
    """Every option reaches `audit_counts` and the sample is drawn at `sample_seeds(seed, n)`:
    an identity for every seed (the verdict itself is not asserted)."""
    law = {(i,): F(1, 8) for i in range(8)}

    def sample(s: int) -> list[int]:
        return [s % 8]  # a function of the seed; a list becomes a tuple outcome

    kw: dict[str, Any] = {"alternative": Alternative.tv(0.45), "alpha": 0.01, "power": 0.9,
                              "min_expected": 7.0, "top": 2, "on_underpowered": "report"}
    r = statistical_audit(sample, law, 50, seed=3, **kw)
    counts: Counter[Hashable] = Counter((s % 8,) for s in sample_seeds(3, 50))
    assert r.counts == counts
    assert r.seconds > 0
    assert dataclasses.replace(r, seconds=0.0) == audit_counts(counts, law, seed=3, **kw)
    assert len(r.residuals) == 2
    # defaults: seed 0, power 0.99, min_expected 5.0, top 5, alpha POLICY_ALPHA
    # (40 draws: n p = 5 = min_expected, eight cells, five residuals shown)
    r = statistical_audit(sample, law, 40, alternative=Alternative.tv(0.45),
                          on_underpowered="report")
    assert (r.cells, len(r.residuals)) == (8, 5)
    counts = Counter((s % 8,) for s in sample_seeds(0, 40))
    assert dataclasses.replace(r, seconds=0.0) == audit_counts(
        counts, law, alternative=Alternative.tv(0.45), alpha=1e-8, power=0.99, min_expected=5.0,
        top=5, on_underpowered="report", seed=0)


def test_statistical_audit_sizes_the_sample_with_every_option() -> None:
    alt = Alternative.tv(0.3)
    kw: dict[str, Any] = {"alpha": 0.01, "power": 0.9, "min_expected": 20.0}
    n = required_samples(DYADIC, alt, **kw)
    assert n is not None
    for other in (dict(kw, alpha=1e-8), dict(kw, power=0.99), dict(kw, min_expected=5.0)):
        assert required_samples(DYADIC, alt, **other) != n
    r = statistical_audit(lambda s: "ab"[s % 2], DYADIC, alternative=alt, **kw)
    assert r.n_samples == n


def test_statistical_audit_seconds_is_the_sampling_time() -> None:
    start = time.perf_counter()
    r = statistical_audit(lambda s: "a", POINT, 7, alternative=Alternative.tv(0.5))
    elapsed = time.perf_counter() - start
    assert 0 < r.seconds <= elapsed
    assert r.samples_per_second == 7 / r.seconds


def test_statistical_audit_progress_wraps_the_seeds() -> None:
    seen: list[list[int]] = []

    def progress(seeds: Iterable[int]) -> Iterable[int]:
        seen.append(list(seeds))
        return seen[-1][:3]  # what the wrapper yields is what is sampled

    drawn: list[int] = []

    def sample(s: int) -> str:
        drawn.append(s)
        return "a"

    r = statistical_audit(sample, POINT, 7, alternative=Alternative.tv(0.5), seed=5,
                          progress=progress, determinism_checks=0, on_underpowered="report")
    assert seen == [sample_seeds(5, 7)]
    assert drawn == sample_seeds(5, 3)
    assert r.n_samples == 3


def test_statistical_audit_refuses_an_underpowered_plan_before_sampling() -> None:
    calls: list[int] = []

    def sample(s: int) -> str:
        calls.append(s)
        return "a"

    err = _raises(UnderpoweredError,
                  "3 samples detect every law at TV >= 0.5 with power 0.875 < the required 0.99: "
                  "the audit cannot declare the decoder lossless; about 7 samples are needed (or "
                  "state a larger epsilon / a lower power)",
                  lambda: statistical_audit(sample, POINT, 3, alternative=Alternative.tv(0.5)))
    assert calls == []
    assert isinstance(err, UnderpoweredError)
    assert (err.n_samples, err.power, err.required_power, err.needed_samples) == (3, 0.875, 0.99, 7)
    # the needed size is computed with the audit's alpha and min_expected
    alt = Alternative.tv(0.3)
    kw: dict[str, Any] = {"alpha": 0.01, "power": 0.9, "min_expected": 20.0}
    with pytest.raises(UnderpoweredError) as info:
        statistical_audit(sample, DYADIC, 10, alternative=alt, **kw)
    needed = required_samples(DYADIC, alt, **kw)
    assert info.value.needed_samples == needed
    for other in (dict(kw, alpha=1e-8), dict(kw, power=0.99), dict(kw, min_expected=5.0)):
        assert required_samples(DYADIC, alt, **other) != needed
    assert calls == []
    # the power before sampling is computed with the audit's min_expected
    assert achieved_power(DYADIC, alt, 180, alpha=0.01, min_expected=20.0) < 0.9
    assert achieved_power(DYADIC, alt, 180, alpha=0.01, min_expected=5.0) >= 0.9
    with pytest.raises(UnderpoweredError):
        statistical_audit(sample, DYADIC, 180, alternative=alt, **kw)
    assert calls == []


def test_statistical_audit_when_no_sample_size_reaches_the_power() -> None:
    err = _raises(UnderpoweredError,
                  "0 samples detect every law at TV >= 3e-09 with power 0 < the required 0.99: the "
                  "audit cannot declare the decoder lossless; no sample size up to the search "
                  "bound reaches it (or state a larger epsilon / a lower power)",
                  lambda: statistical_audit(lambda s: "a", POINT, alternative=Alternative.tv(3e-9)))
    assert isinstance(err, UnderpoweredError)
    assert (err.n_samples, err.power, err.needed_samples) == (0, 0.0, None)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: statistical_audit("a", POINT, 7),  # type: ignore[arg-type]
     "sample_fn must be a function seed -> outcome, got 'a'"),
    (lambda: statistical_audit(lambda s: "a", POINT, 7, seed=-1),
     "seed must be an int >= 0 (a seed), got -1"),
    (lambda: statistical_audit(lambda s: "a", POINT, 7, seed=None),  # type: ignore[arg-type]
     "seed must be an int >= 0 (a seed), got None"),
    (lambda: statistical_audit(lambda s: "a", POINT, 7, progress=5),  # type: ignore[arg-type]
     "progress must be a function wrapping the seed iterator, got 5"),
    (lambda: statistical_audit(lambda s: "a", POINT, 7,
                               alternative="tv"),  # type: ignore[arg-type]
     "alternative must be an Alternative (Alternative.tv(epsilon) or Alternative.of_law(law)), "
     "got 'tv'"),
    (lambda: statistical_audit(lambda s: "a", POINT, 7, top=-1), "top must be an int >= 0, got -1"),
    (lambda: statistical_audit(lambda s: "a", POINT, 7, min_expected=-1.0),
     "min_expected must be finite and > 0, got -1.0"),
    (lambda: statistical_audit(lambda s: "a", POINT, 7,
                               on_underpowered="no"),  # type: ignore[arg-type]
     "on_underpowered must be one of ('raise', 'report'), got 'no'"),
    (lambda: statistical_audit(lambda s: "a", POINT, 0), "n_samples must be an int >= 1, got 0"),
    (lambda: statistical_audit(lambda s: "a", POINT, 7, alternative=Alternative.tv(0.5),
                               determinism_checks=-1),
     "determinism_checks must be an int >= 0, got -1"),
    (lambda: statistical_audit(lambda s: {"a": 1}, POINT, 7, alternative=Alternative.tv(0.5)),
     "sample_fn returned an unhashable value {'a': 1} (dict); return a tuple of tokens (e.g. "
     "run.tokens), a list or an array"),
])
def test_statistical_audit_refuses_bad_arguments_with_their_message(call: Callable[[], object],
                                                                    message: str) -> None:
    _raises(InvalidAuditError, message, call)


def _flaky(bad_seed: int) -> Callable[[int], tuple[int, ...]]:
    """A sampler that gives (0,) for every seed, except (1,) when ``bad_seed`` is drawn again."""
    calls: Counter[int] = Counter()

    def sample(s: int) -> tuple[int, ...]:
        calls[s] += 1
        return (1,) if s == bad_seed and calls[s] > 1 else (0,)

    return sample


def _determinism_message(seed: int) -> str:
    return (f"sample_fn is not a function of its seed: seed {seed} gave (0,), then (1,) when drawn "
            "again after the sample; draw from a generator seeded from the seed (e.g. "
            "numpy.random.default_rng(seed)), not from a global or unseeded one")


def test_statistical_audit_draws_the_first_seeds_again() -> None:
    law = {(0,): F(1)}
    alt = Alternative.tv(0.5)
    seeds = sample_seeds(0, 12)
    # default 10 checks: the 10th seed is drawn again, the 11th is not
    err = _raises(NondeterministicProgramError, _determinism_message(seeds[9]),
                  lambda: statistical_audit(_flaky(seeds[9]), law, 12, alternative=alt))
    assert isinstance(err, NondeterministicProgramError)
    assert err.source == "sample_fn"
    r = statistical_audit(_flaky(seeds[10]), law, 12, alternative=alt)
    assert r.counts == {(0,): 12}
    # 1 check: the first seed only
    _raises(NondeterministicProgramError, _determinism_message(seeds[0]),
            lambda: statistical_audit(_flaky(seeds[0]), law, 12, alternative=alt,
                                      determinism_checks=1))
    r = statistical_audit(_flaky(seeds[1]), law, 12, alternative=alt, determinism_checks=1)
    assert r.counts == {(0,): 12}
    r = statistical_audit(_flaky(seeds[0]), law, 12, alternative=alt, determinism_checks=0)
    assert r.counts == {(0,): 12}


# -- rejection_rate -----------------------------------------------------------------------------


SURE = Alternative.of_law({"never": 1.0})  # power 1 at every n: no sample size to search for


def _rate_by_audit(true: dict[str, Any], ref: dict[str, Any], n: int, repeats: int, seed: int,
                   alpha: float, min_expected: float = 5.0) -> float:
    """The share of `audit_counts` rejections over the same multinomial draws.

    `rejection_rate` computes G with numpy (vectorised log, row sums), `audit_counts` with
    ``math.log`` and ``math.fsum``: two computations that agree to ~1e-15 relative, not bit for
    bit. So every draw's G must lie farther than 1e-9 relative from the critical value (or the
    draw be decided by an impossible outcome): then both decide every draw alike, and the rates,
    both k / repeats, are equal exactly."""
    outcomes = list(true)
    draws = np.random.default_rng(seed).multinomial(
        n, [float(true[o]) for o in outcomes], size=repeats)
    rejected = 0
    for row in draws:
        counts: dict[Hashable, int] = {o: int(c) for o, c in zip(outcomes, row, strict=True)}
        report = audit_counts(counts, ref, alternative=SURE, alpha=alpha,
                              min_expected=min_expected, on_underpowered="report")
        assert report.impossible or abs(report.statistic - report.critical_value) > (
            1e-9 * report.critical_value), "a draw's G lies within rounding of the threshold"
        rejected += report.rejected
    return rejected / repeats


@pytest.mark.montecarlo(alpha=0, reason="identities over the same draws, or certain rates "
                        "(mass outside the support, one cell): true for every seed")
def test_rejection_rate_is_the_share_of_audit_rejections_on_the_same_draws() -> None:
    ref = {"a": 0.5, "b": 0.25, "c": 0.125, "d": 0.0625, "e": 0.0625}
    true = {"a": 0.375, "b": 0.375, "c": 0.125, "d": 0.0625, "e": 0.0625}
    for n, alpha, me in ((40, 0.05, 5.0), (40, 0.2, 2.5), (80, 0.05, 5.0)):
        for seed in (1, 2):
            rate = rejection_rate(true, ref, n, 60, np.random.default_rng(seed), alpha=alpha,
                                  min_expected=me)
            assert rate == _rate_by_audit(true, ref, n, 60, seed, alpha, me)
    # a rare impossible outcome: one draw of it rejects on its own
    leaks = {"a": 0.5, "b": 0.25, "c": 0.125, "d": 0.0625, "e": 0.03125, "z": 0.03125}
    rate = rejection_rate(leaks, ref, 40, 60, np.random.default_rng(4), alpha=1e-8)
    assert rate == _rate_by_audit(leaks, ref, 40, 60, 4, 1e-8)
    assert 0 < rate < 1
    # defaults: alpha POLICY_ALPHA; min_expected 5.0 (n = 40 puts c at exactly 5: a cell of its
    # own, pooled with d and e at 6, and that changes the rate)
    rate = rejection_rate(true, ref, 40, 60, np.random.default_rng(3))
    assert rate == _rate_by_audit(true, ref, 40, 60, 3, 1e-8)
    rate = rejection_rate(true, ref, 40, 60, np.random.default_rng(3), alpha=0.2)
    assert rate == _rate_by_audit(true, ref, 40, 60, 3, 0.2, 5.0)
    assert rate != _rate_by_audit(true, ref, 40, 60, 3, 0.2, 6.0)
    # an outcome outside the support in every draw: always rejected; one cell: never
    leaky = {"a": 0.5, "z": 0.5}
    assert rejection_rate(leaky, ref, 40, 5, np.random.default_rng(0), alpha=0.5) == 1.0
    assert rejection_rate(POINT, POINT, 40, 5, np.random.default_rng(0), alpha=0.5) == 0.0
    assert rejection_rate({"b": 1.0}, {"a": 0.5, "b": 0.5}, 40, 5,
                          np.random.default_rng(0), alpha=0.01) == 1.0


@pytest.mark.montecarlo(alpha=0, reason="rejection_rate is only called to check its argument "
                        "errors, raised before anything is drawn")
def test_rejection_rate_refuses_bad_arguments() -> None:
    rng = np.random.default_rng(0)
    _raises(InvalidAuditError, "n_samples must be an int >= 1, got 0",
            lambda: rejection_rate(POINT, POINT, 0, 5, rng))


# -- laws_tv ------------------------------------------------------------------------------------


def test_laws_tv() -> None:
    assert laws_tv({"a": 0.5, "b": 0.5}, {"a": 0.25, "c": 0.75}) == 0.75
    assert laws_tv({"a": F(1, 2), "b": F(1, 2)}, {"b": F(1, 2), "a": F(1, 2)}) == 0.0
    assert laws_tv({"a": 1.0}, {"b": 1.0}) == 1.0
