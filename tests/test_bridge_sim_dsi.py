"""Bridges of the acceptance-level simulator to the token level and to `theory`.

* event model ↔ token-level `dsi_ref.decoders.dsi`: on a context-free target ``p = (a, 1 − a)`` and
  a
  drafter that always drafts token 0 (``q = (1, 0)``, so ``Σ min(p, q) = a`` and every draft is
  accepted with probability ``a``), the exact expected latency of ``dsi`` under the canonical
  schedule equals the event model's, as Fractions;
* SI ↔ token-level `dsi_ref.decoders.speculative`, likewise;
* paper model ↔ `theory` closed forms (finite-N SI recurrence, DSI renewal limit), event model ↔
  `theory.dsi_event_expected_latency` where no task waits.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest
import sympy

import dsi_ref as dr
import theory
from dsi_ref.sim.paper import segment_charges
from dsi_ref.sim.params import SimParams


def constant_acceptance_pair(a: F) -> tuple[dr.FunctionLM, dr.FunctionLM]:
    """Target and drafter, context-free, whose drafts are accepted with probability ``a``."""
    target = dr.FunctionLM(vocab_size=2, probs=lambda prefix: (a, 1 - a))
    drafter = dr.FunctionLM(vocab_size=2, probs=lambda prefix: (F(1), F(0)))
    return target, drafter


def to_fraction(value: object) -> F:
    r = sympy.Rational(value)  # type: ignore[arg-type]
    return F(int(r.p), int(r.q))


# (N, k, SP, c, a, target_first, drafter_first, queue): few servers, enough servers, a drafter
# slower than the target (bonus tokens), prefill on either model, both queue orders
EVENT_CASES = [
    (3, 1, 1, F(1, 2), F(1, 2), None, None, "fifo"),
    (5, 3, 1, F(1, 5), F(1, 3), None, None, "fifo"),
    (4, 2, 2, F(1, 3), F(2, 3), None, None, "fifo"),
    (5, 2, 3, F(1, 4), F(3, 4), None, None, "fifo"),
    (5, 1, 2, F(1, 10), F(4, 5), None, F(5, 2), "lifo"),
    (4, 1, 2, F(3, 2), F(1, 2), None, None, "fifo"),
    (4, 1, 3, F(1, 3), F(2, 3), F(3, 2), F(1, 2), "fifo"),
    (5, 1, 3, F(1, 4), F(3, 4), F(2), F(1, 3), "lifo"),
    (5, 2, 4, F(1, 10), F(4, 5), F(7, 4), None, "fifo"),
]


@pytest.mark.parametrize(("n", "k", "sp", "c", "a", "t1", "d1", "queue"), EVENT_CASES)
def test_event_model_expectation_equals_token_level_dsi_exactly(
        n: int, k: int, sp: int, c: F, a: F, t1: F | None, d1: F | None, queue: str) -> None:
    target, drafter = constant_acceptance_pair(a)
    latency = dr.Latency(drafter=c, target_first=t1, drafter_first=d1)
    token_level = dr.exact_expectation(
        lambda rng: dr.dsi(target, drafter, (), n, rng, lookahead=k, sp_degree=sp,
                           latency=latency, queue=queue).time,  # type: ignore[arg-type]
        scheduler="first")
    event = dr.expected_latency("dsi", c=c, a=a, lookahead=k, n_tokens=n, model="event",
                                sp_degree=sp, queue=queue, target_first=t1, drafter_first=d1)
    assert event == token_level


@pytest.mark.parametrize(("n", "k", "c", "a", "t1", "d1"), [
    (4, 2, F(1, 10), F(3, 5), None, None), (5, 3, F(1, 2), F(1, 3), None, None),
    (5, 1, F(1), F(9, 10), F(3, 2), F(1, 4)), (3, 4, F(1, 3), F(1, 2), None, F(2)),
])
def test_si_expectation_equals_token_level_speculative_exactly(
        n: int, k: int, c: F, a: F, t1: F | None, d1: F | None) -> None:
    target, drafter = constant_acceptance_pair(a)
    latency = dr.Latency(drafter=c, target_first=t1, drafter_first=d1)
    token_level = dr.exact_expectation(
        lambda rng: dr.speculative(target, drafter, (), n, rng, lookahead=k,
                                   latency=latency).time)
    for model in ("paper", "event"):
        assert dr.expected_latency("si", c=c, a=a, lookahead=k, n_tokens=n, model=model,  # type: ignore[arg-type]
                                   target_first=t1, drafter_first=d1) == token_level


@pytest.mark.parametrize(("a", "c", "k", "n"), [
    (F(1, 2), F(1, 10), 2, 9), (F(9, 10), F(1, 20), 5, 30), (F(1, 5), F(3, 4), 3, 12),
])
def test_si_exact_equals_theory_finite_n_recurrence(a: F, c: F, k: int, n: int) -> None:
    expected = theory.si_expected_latency(sympy.Rational(a), sympy.Rational(c), k, n,
                                          target_first=sympy.Rational(3, 2))
    assert dr.expected_latency("si", c=c, a=a, lookahead=k, n_tokens=n,
                               target_first=F(3, 2)) == to_fraction(expected)


@pytest.mark.parametrize(("a", "c", "k"), [
    (F(1, 2), F(1, 10), 2), (F(4, 5), F(1, 20), 5), (F(1, 3), F(1, 2), 3), (F(9, 10), F(1, 7), 1),
])
def test_paper_dsi_segment_charge_converges_to_theory_renewal_limit(a: F, c: F, k: int) -> None:
    """``(1 − a) C(r)`` → the per-token rate of theory as ``r → ∞``; the gap is at most
    ``a^r (r c + r + 2)`` (the mass of segments longer than ``r`` drafts times their charge)."""
    r = 400
    charge = segment_charges(SimParams("dsi", c, a, k, r + 1))[r]
    limit = to_fraction(theory.dsi_paper_latency_per_token(sympy.Rational(a),
                                                           sympy.Rational(c), k))
    assert abs((1 - a) * charge - limit) <= a**r * (r * c + r + 2)


@pytest.mark.parametrize(("a", "c", "k", "n"), [
    (F(1, 2), F(1, 4), 2, 7), (F(9, 10), F(1, 10), 3, 12), (F(1, 3), F(1, 2), 1, 8),
])
def test_event_model_equals_theory_when_no_task_waits(a: F, c: F, k: int, n: int) -> None:
    sp = 1 + theory.event_verification_servers(sympy.Rational(c), k, n)
    expected = theory.dsi_event_expected_latency(sympy.Rational(a), sympy.Rational(c), k, n)
    assert dr.expected_latency("dsi", c=c, a=a, lookahead=k, n_tokens=n, model="event",
                               sp_degree=sp) == to_fraction(expected)
