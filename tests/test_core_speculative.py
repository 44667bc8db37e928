"""SI and non-SI: edge cases of the verification rules, virtual time, parameter errors."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.audit.strategies import model_pairs
from dsi_ref.base.result import decision_kinds

HALF = (F(1, 2), F(1, 2))


def test_speculative_stops_at_eos_and_never_commits_drafts_past_it() -> None:
    target = dr.TableLM.context_free((F(1, 3), F(1, 3), F(1, 3)), eos=2)
    drafter = dr.TableLM.context_free((F(0), F(0), F(1)), eos=2)  # always drafts EOS
    law = dr.exact_distribution(lambda rng: dr.speculative(target, drafter, (), 4, rng, 3).tokens)
    assert all(seq.count(2) <= 1 and (2 not in seq or seq[-1] == 2) for seq in law)
    assert law == dr.target_distribution(target, (), 4)


def test_max_new_tokens_cuts_the_last_window() -> None:
    t = dr.TableLM.random(3, 1, seed=1)
    d = dr.TableLM.random(3, 1, seed=2)
    for n in range(0, 6):
        run = dr.speculative(t, d, (), n, dr.Sampler(n), lookahead=4)
        assert len(run.tokens) == n
        assert run.stats["drafts"] <= max(0, n - 1) + run.stats["rejected"] * 4


def test_drafts_the_drafter_cannot_emit_never_appear_and_target_zeros_are_never_committed(
) -> None:
    target = dr.TableLM.context_free((F(1, 2), F(1, 2), F(0)))
    drafter = dr.TableLM.context_free((F(0), F(1, 3), F(2, 3)))
    law = dr.exact_distribution(lambda rng: dr.speculative(target, drafter, (), 3, rng, 2).tokens)
    assert all(2 not in seq for seq in law)
    assert law == dr.target_distribution(target, (), 3)


@given(model_pairs(same=1), st.integers(0, 2**16))
def test_identical_models_accept_every_draft_without_touching_the_residual(
        pair: tuple[dr.LanguageModel, dr.LanguageModel], seed: int) -> None:
    target, _ = pair
    run = dr.speculative(target, target, (), 5, dr.Sampler(seed), lookahead=2)
    assert run.stats["rejected"] == 0
    assert set(decision_kinds(run)) <= {"accepted", "bonus"}


def test_float_models_run_and_float_rounding_is_reported_not_hidden() -> None:
    t = dr.TableLM.random(3, 1, seed=1, exact=False)
    d = dr.TableLM.random(3, 1, seed=2, exact=False)
    run = dr.speculative(t, d, (), 20, dr.Sampler(0), lookahead=3)
    assert len(run.tokens) == 20
    rule = dr.decoders.verification.RejectionSampling()
    with pytest.raises(dr.NumericalError, match="residual"):
        rule.residual((0.5, 0.5), (0.5, 0.5), dr.Sampler(0), ())


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"lookahead": 0}, "lookahead must be an int >= 1"),
    ({"lookahead": True}, "lookahead must be an int >= 1"),
    ({"verify": "typical"}, "verify must be one of"),
    ({"latency": 3}, "latency must be a dsi_ref.Latency"),
])
def test_bad_speculative_parameters_raise_named_errors(kwargs: dict[str, object],
                                                       message: str) -> None:
    t = dr.TableLM.context_free(HALF)
    with pytest.raises(dr.InvalidParameterError, match=message):
        dr.speculative(t, t, (), 2, dr.Sampler(0), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"drafter": F(0)}, "Latency.drafter must be > 0"),
    ({"drafter": -0.5}, "Latency.drafter must be > 0"),
    ({"target": {F(1): F(1, 2)}}, "sum to 1/2"),
    ({"target": {F(0): F(1)}}, "must be > 0"),
    ({"target_first": "slow"}, "expected a number"),
])
def test_bad_latencies_raise_named_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(dr.InvalidParameterError, match=message):
        dr.Latency(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("call", "message"), [
    (lambda t, d: dr.speculative(t, dr.TableLM.context_free((F(1),) * 1), (), 1, dr.Sampler(0)),
     "vocabularies differ"),
    (lambda t, d: dr.speculative(t, dr.TableLM.context_free(HALF, eos=1), (), 1,
                                 dr.Sampler(0)), "disagree on EOS"),
    (lambda t, d: dr.autoregressive(t, (5,), 1, dr.Sampler(0)), "prompt token 5"),
    (lambda t, d: dr.autoregressive(t, (), -1, dr.Sampler(0)), "max_new_tokens"),
])
def test_bad_decoder_inputs_raise_named_errors(call: object, message: str) -> None:
    t = dr.TableLM.context_free(HALF)
    with pytest.raises(dr.InvalidParameterError, match=message):
        call(t, t)  # type: ignore[operator]


def test_non_si_latency_is_ttft_plus_tpots() -> None:
    t = dr.TableLM.context_free(HALF)
    latency = dr.Latency(target=F(1, 10), target_first=F(3, 10))
    run = dr.autoregressive(t, (), 5, dr.Sampler(0), latency=latency)
    assert run.time == F(3, 10) + 4 * F(1, 10)
    assert [e.kind for e in run.trace].count("forward") == 5


def test_greedy_decoding_returns_the_target_greedy_sequence_with_ties_to_lowest_id() -> None:
    t = dr.TableLM.context_free((F(2, 5), F(2, 5), F(1, 5)))
    d = dr.TableLM.context_free((F(1, 5), F(2, 5), F(2, 5)))
    run = dr.speculative(t, d, (), 3, dr.Sampler(0), 2, "greedy")
    assert run.tokens == (0, 0, 0)
    assert decision_kinds(run)[0] == "rejected"  # the drafter's argmax is 1


def _si_expected_time(n: int, k: int, c: F, a: F) -> F:
    """By hand: an SI iteration with r tokens left drafts m = min(k, r - 1), costs m·c + 1 and
    commits X + 1 tokens, X ~ accepted drafts before the first rejection, P(X >= j) = a^j."""
    memo: dict[int, F] = {0: F(0)}
    for r in range(1, n + 1):
        m = min(k, r - 1)
        law = {j: a**j * (1 - a) for j in range(m)} | {m: a**m}
        memo[r] = m * c + 1 + sum(p * memo[r - j - 1] for j, p in law.items())
    return memo[n]


@pytest.mark.parametrize(("n", "k"), [(1, 1), (3, 2), (5, 3), (6, 2), (4, 5)])
@pytest.mark.parametrize("verify", ["rejection", "exact_match"])
def test_si_exact_expected_latency_equals_the_finite_n_value_by_hand(n: int, k: int,
                                                                     verify: str) -> None:
    target = dr.TableLM.context_free((F(1, 2), F(1, 3), F(1, 6)))
    drafter = dr.TableLM.context_free((F(1, 4), F(1, 4), F(1, 2)))
    p, q = target.probs(()), drafter.probs(())
    # acceptance per draft: sum min(p, q) for rejection sampling, sum p q for exact match
    if verify == "rejection":
        a = sum((min(F(x), F(y)) for x, y in zip(p, q, strict=True)), F(0))
    else:
        a = sum((F(x) * F(y) for x, y in zip(p, q, strict=True)), F(0))
    c = F(1, 5)
    latency = dr.Latency(drafter=c)
    expected = dr.exact_expectation(
        lambda rng: dr.speculative(target, drafter, (), n, rng, k, verify,  # type: ignore[arg-type]
                                   latency=latency).time)
    assert expected == _si_expected_time(n, k, c, a)
