"""Tests that kill mutants of dsi_ref/decoders/verification.py that the pilot mutation run left
alive (docs/mutation-testing.md): the module-level wrappers, argmax's index 1, the decision labels
of the exact-match and greedy rules, the bonus decision, and the message of a bad ``verify``;
and block verification's steps with every draw's key and probability, and `decide_window`."""

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


# -- block verification: every draw's key and probability, every boundary ----------------------


class _Recorder:
    """An rng that answers from fixed lists and records each call (kind, key, argument)."""

    def __init__(self, coins: list[bool], picks: list[int] | None = None) -> None:
        self.coins, self.picks = list(coins), list(picks or [])
        self.calls: list[tuple[str, object, object]] = []

    def bernoulli(self, p: object, key: object = None) -> bool:
        self.calls.append(("bernoulli", key, p))
        return self.coins.pop(0)

    def categorical(self, weights: object, key: object = None) -> int:
        self.calls.append(("categorical", key, list(weights)))  # type: ignore[call-overload]
        return self.picks.pop(0)


# three drafts 0, 1, 0 after the context (2,): p and q at each position, and p after the last
BLOCK_P = [(F(1, 2), F(1, 4), F(1, 4)), (F(1, 4), F(1, 2), F(1, 4)), (F(1, 2), F(1, 2), F(0)),
           (F(1, 3), F(1, 3), F(1, 3))]
BLOCK_Q = [(F(3, 4), F(1, 8), F(1, 8)), (F(1, 4), F(1, 4), F(1, 2)), (F(1, 4), F(1, 2), F(1, 4))]
BLOCK_X = [0, 1, 0]


def test_block_weights_and_stop_probabilities_by_hand() -> None:
    from dsi_ref.decoders.verification import BlockVerification

    rule = BlockVerification()
    w = rule.weights(BLOCK_P, BLOCK_Q, BLOCK_X)
    # w1 = min(1, (1/2)/(3/4)) = 2/3; w2 = min(1, 2/3 * (1/2)/(1/4)) = 1 (4/3 capped);
    # w3 = min(1, 1 * (1/2)/(1/4)) = 1 (2 capped)
    assert w == [1, F(2, 3), 1, 1]
    assert [type(x) for x in w[1:2]] == [F]
    # h1: rho = sum (2/3 p2 - q2)+ = (1/6 - 1/4)+ + (1/3 - 1/4)+ + (1/6 - 1/2)+ = 1/12;
    #     h1 = (1/12) / (1/12 + 1/3) = 1/5
    assert rule.stop_probability(w[1], BLOCK_P[1], BLOCK_Q[1]) == F(1, 5)
    # h2: w2 = 1, rho = sum (p3 - q3)+ = 1/4 -> 1/4 / (1/4 + 0) = 1
    assert rule.stop_probability(w[2], BLOCK_P[2], BLOCK_Q[2]) == 1
    # the last draft: h3 = w3; and a zero denominator (w = 1, p = q) gives 1
    assert rule.stop_probability(F(1, 3), None, None) == F(1, 3)
    assert rule.stop_probability(F(1), BLOCK_Q[0], BLOCK_Q[0]) == 1
    assert rule.stop_probability(F(1, 2), BLOCK_Q[0], BLOCK_Q[0]) == 0  # rho = 0, w < 1
    # a ratio exactly 1 is kept (not capped to a different value) and w never exceeds 1
    assert rule.weights([(F(1, 2), F(1, 2))], [(F(1, 2), F(1, 2))], [0]) == [1, 1]


def test_block_draws_with_their_keys_and_probabilities() -> None:
    from dsi_ref.decoders.verification import BlockVerification, decide_window

    rule = BlockVerification()
    # the longest prefix first: h3 = w3 = 1, so one coin accepts all three drafts
    rng = _Recorder([True])
    assert decide_window(rule, BLOCK_P, BLOCK_Q, BLOCK_X, rng, (2,)) == [  # type: ignore[arg-type]
        Decision(0, True, "accepted"), Decision(1, True, "accepted"),
        Decision(0, True, "accepted")]
    assert rng.calls == [("bernoulli", ("block", 4, (2, 0, 1, 0)), 1)]
    # two drafts only: h2 = w2 = 1 accepts both; with the first alone, h1 = w1 = 2/3
    rng = _Recorder([False], [1])
    assert decide_window(rule, BLOCK_P[:1], BLOCK_Q[:1], BLOCK_X[:1], rng,  # type: ignore[arg-type]
                         (2,)) == [Decision(1, False, "rejected")]
    # the correction at tau = 0: weights (w0 p1 - q1)+ = (0, 1/8, 1/8), keyed by the context
    assert rng.calls == [("bernoulli", ("block", 2, (2, 0)), F(2, 3)),
                         ("categorical", ("residual", 1, (2,)), [0, F(1, 8), F(1, 8)])]


def test_block_scans_from_the_longest_prefix_down_and_corrects_with_the_weight() -> None:
    from dsi_ref.decoders.verification import BlockVerification

    rule = BlockVerification()
    p = [(F(1, 2), F(1, 2)), (F(1, 2), F(1, 2)), (F(1, 2), F(1, 2))]
    q = [(F(3, 4), F(1, 4)), (F(3, 4), F(1, 4))]
    x = [0, 0]
    # w = [1, 2/3, 4/9]; h1 = rho1 / (rho1 + 1/3) with rho1 = (1/3 - 3/4)+ + (1/3 - 1/4)+ = 1/12
    #   -> 1/5; h2 = w2 = 4/9
    rng = _Recorder([False, True], [1])
    decisions = rule.decide_window(p, q, x, rng, ())  # type: ignore[arg-type]
    assert decisions == [Decision(0, True, "accepted"), Decision(1, False, "rejected")]
    assert rng.calls == [
        ("bernoulli", ("block", 2, (0, 0)), F(4, 9)),
        ("bernoulli", ("block", 1, (0,)), F(1, 5)),
        # tau = 1: the residual (w1 p2 - q2)+ = (1/3 - 3/4, 1/3 - 1/4)+ = (0, 1/12)
        ("categorical", ("residual", 1, (0,)), [0, F(1, 12)])]
    # all coins fail: tau = 0, residual (p1 - q1)+ = (0, 1/4)
    rng = _Recorder([False, False], [1])
    assert rule.decide_window(p, q, x, rng, ()) == [  # type: ignore[arg-type]
        Decision(1, False, "rejected")]
    assert rng.calls[-1] == ("categorical", ("residual", 0, ()), [0, F(1, 4)])


def test_an_empty_block_residual_is_named_in_the_message() -> None:
    from dsi_ref.decoders.verification import BlockVerification

    with pytest.raises(NumericalError, match=r"^block verification stopped before position 1 "
                                             r"but the residual \(w p - q\)\+ is empty: float "
                                             r"rounding in p or q$"):
        BlockVerification().correction(F(1), P, P, Sampler(0), (0,))


def test_decide_window_chains_a_per_position_rule_and_stops_at_the_first_rejection() -> None:
    from dsi_ref.decoders.verification import decide_window

    rng = _Recorder([True, False], [1])
    # rejection sampling, drafts 0, 0 with p(0) = 1/2 < q(0) = 3/4: coin 2/3 each
    p = [(F(1, 2), F(1, 2)), (F(1, 2), F(1, 2)), (F(1, 2), F(1, 2))]
    q = [(F(3, 4), F(1, 4)), (F(3, 4), F(1, 4))]
    assert decide_window("rejection", p, q, [0, 0], rng, (1,)) == [  # type: ignore[arg-type]
        Decision(0, True, "accepted"), Decision(1, False, "rejected")]
    assert rng.calls == [("bernoulli", ("accept", 1, (1,)), F(2, 3)),
                         ("bernoulli", ("accept", 2, (1, 0)), F(2, 3)),
                         ("categorical", ("residual", 2, (1, 0)), [0, F(1, 4)])]
    # every draft accepted: one decision each, nothing more drawn
    rng = _Recorder([True, True])
    assert len(decide_window("rejection", p, q, [0, 0], rng, ())) == 2  # type: ignore[arg-type]
    assert len(rng.calls) == 2
