"""Tests that kill mutants of dsi_ref/decoders/verification.py that the pilot mutation run left
alive (docs/mutation-testing.md): the module-level wrappers, argmax's index 1, the decision labels
of the exact-match and greedy rules, the bonus decision, and the message of a bad ``verify``."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from dsi_ref import Sampler
from dsi_ref.audit.exact import exact_distribution
from dsi_ref.base.errors import InvalidParameterError, NumericalError
from dsi_ref.decoders.verification import (
    Decision,
    RejectionSampling,
    argmax,
    as_rule,
    decide,
    draft_token,
)

P = [F(1, 5), F(3, 5), F(1, 5)]  # argmax at index 1
Q = [F(1, 2), F(1, 4), F(1, 4)]


def test_argmax_finds_the_maximum_at_every_index_and_breaks_ties_low() -> None:
    assert argmax(P) == 1
    assert argmax([F(1, 4), F(1, 4), F(1, 2)]) == 2
    assert argmax([F(1, 3)] * 3) == 0


@pytest.mark.parametrize("rule", ["rejection", "exact_match", "greedy"])
def test_the_decision_labels_of_every_rule(rule: str) -> None:
    """accepted iff the committed token is the draft, with the matching kind (a residual token is
    never the draft: a rejection needs ``p(x) < q(x)``, where ``(p − q)+`` is 0); neither a
    rejection nor a bonus is accepted (``accepted is False``, not merely falsy)."""
    for draft in range(3):
        law = exact_distribution(lambda rng, d=draft: decide(rule, P, Q, d, rng, (0,)))
        for token, accepted, kind in law:  # outcomes are plain tuples
            assert accepted is (token == draft)
            assert kind == ("accepted" if token == draft else "rejected")
    bonus = exact_distribution(lambda rng: decide(rule, P, None, None, rng, (0,)))
    assert all(accepted is False and kind == "bonus" for _, accepted, kind in bonus)


# alpha: 50 seeds all drafting the same token of Q = (1/2, 1/4, 1/4): 2^-50 + 2 * 4^-50 = 8.9e-16
@pytest.mark.montecarlo(alpha=9e-16)
def test_the_wrappers_pass_every_argument_through() -> None:
    """``decide``/``draft_token`` give the rule's own law, keyed by the context."""
    rule = as_rule("rejection")
    for context in [(), (2,), (0, 1)]:
        assert exact_distribution(lambda rng, c=context: decide("rejection", P, Q, 0, rng, c)) \
            == exact_distribution(lambda rng, c=context: rule.decide(P, Q, 0, rng, c))
        assert exact_distribution(lambda rng, c=context: draft_token("rejection", Q, rng, c)) \
            == {0: F(1, 2), 1: F(1, 4), 2: F(1, 4)}
    assert draft_token("greedy", P, Sampler(0), ()) == 1
    # the same key, hence the same draw, for the same context only
    tokens = {draft_token("rejection", Q, Sampler(seed), (1,)) for seed in range(50)}
    assert len(tokens) > 1
    assert decide("greedy", P, Q, 1, Sampler(0), ()) == Decision(1, True, "accepted")


def test_a_bad_verify_is_named_in_the_message() -> None:
    with pytest.raises(InvalidParameterError, match=r"rule name .* or a Rule object, got int"):
        as_rule(3)  # type: ignore[arg-type]


def test_an_empty_residual_is_named_in_the_message() -> None:
    """A rejection with ``p = q`` (only float rounding can cause it) has nothing to resample."""
    with pytest.raises(NumericalError, match=r"position 1 but the residual \(p - q\)\+ is "
                                             r"empty: float rounding in p or q"):
        RejectionSampling().residual(P, P, Sampler(0), (0,))
