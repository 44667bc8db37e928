"""Bridge: `theory`'s exact finite-N closed forms equal the token-level decoders' exact expected
latencies (`dsi_ref.exact_expectation`) on context-free toy models whose acceptance rate
``Σ_x min(p(x), q(x))`` is exactly ``a``: two independent computations, equal as rationals.

The toy pair: target ``p = (a, 1 − a, 0)``, drafter ``q = (a, 0, 1 − a)``; rejection sampling
accepts a draft with probability ``Σ_x min(p(x), q(x)) = a``, independently at every position
because both models ignore the context.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

import dsi_ref
import theory

CASES = [  # (a, c, k)
    (F(1, 2), F(1, 10), 1),
    (F(1, 2), F(1, 4), 2),
    (F(1, 3), F(2, 5), 3),
    (F(3, 4), F(1, 5), 2),
    (F(2, 3), F(1, 1), 2),
    (F(0), F(1, 3), 2),
    (F(1), F(1, 3), 2),
]


def toy_pair(a: F) -> tuple[dsi_ref.TableLM, dsi_ref.TableLM]:
    """Context-free target and drafter with acceptance rate exactly ``a``."""
    target = dsi_ref.TableLM.context_free((a, 1 - a, F(0)), name=f"target(a={a})")
    drafter = dsi_ref.TableLM.context_free((a, F(0), 1 - a), name=f"drafter(a={a})")
    return target, drafter


def test_toy_pair_acceptance_rate_is_exactly_a() -> None:
    for a, _, _ in CASES:
        target, drafter = toy_pair(a)
        p, q = target.probs(()), drafter.probs(())
        assert sum(min(x, y) for x, y in zip(p, q, strict=True)) == a


@pytest.mark.parametrize(("a", "c", "k"), CASES)
@pytest.mark.parametrize("n_tokens", range(1, 7))
def test_si_finite_n_expected_latency_equals_token_level_exact_expectation(
        a: F, c: F, k: int, n_tokens: int) -> None:
    target, drafter = toy_pair(a)
    latency = dsi_ref.Latency(drafter=c, target=F(1))
    token_level = dsi_ref.exact_expectation(lambda rng: dsi_ref.speculative(
        target, drafter, (), n_tokens, rng, lookahead=k, latency=latency).time)
    closed_form = theory.si_expected_latency(a, c, k, n_tokens)
    assert token_level == F(int(closed_form.p), int(closed_form.q))


@pytest.mark.parametrize(("a", "c", "k"), CASES[:4])
def test_si_finite_n_with_first_forward_costs_equals_token_level(a: F, c: F, k: int) -> None:
    target, drafter = toy_pair(a)
    latency = dsi_ref.Latency(drafter=c, target=F(1), drafter_first=F(3, 7),
                              target_first=F(9, 5))
    for n_tokens in (1, 2, 5):
        token_level = dsi_ref.exact_expectation(lambda rng, n=n_tokens: dsi_ref.speculative(
            target, drafter, (), n, rng, lookahead=k, latency=latency).time)
        closed_form = theory.si_expected_latency(a, c, k, n_tokens, target_first=F(9, 5),
                                                 drafter_first=F(3, 7))
        assert token_level == closed_form


def test_nonsi_latency_equals_token_level_autoregressive_with_ttft() -> None:
    target, _ = toy_pair(F(1, 2))
    for ttft in (F(1), F(9, 5)):
        latency = dsi_ref.Latency(target=F(1), target_first=ttft)
        for n_tokens in (1, 4):
            token_level = dsi_ref.exact_expectation(lambda rng, n=n_tokens, lat=latency:
                                                    dsi_ref.autoregressive(target, (), n, rng,
                                                                           latency=lat).time)
            assert token_level == theory.nonsi_latency(n_tokens, ttft=ttft, tpot=1)


@pytest.mark.parametrize(("a", "c", "k"), [case for case in CASES if case[1] <= 1])
@pytest.mark.parametrize("n_tokens", range(1, 6))
def test_event_model_no_waiting_closed_form_equals_token_level_dsi(
        a: F, c: F, k: int, n_tokens: int) -> None:
    target, drafter = toy_pair(a)
    latency = dsi_ref.Latency(drafter=c, target=F(1))
    sp_degree = 1 + theory.event_verification_servers(c, k, n_tokens)
    token_level = dsi_ref.exact_expectation(
        lambda rng: dsi_ref.dsi(target, drafter, (), n_tokens, rng, lookahead=k,
                                sp_degree=sp_degree, latency=latency).time,
        scheduler="first")
    assert token_level == theory.dsi_event_expected_latency(a, c, k, n_tokens)


@pytest.mark.parametrize(("c", "k", "n_tokens"), [(F(1, 10), 4, 13), (F(1, 4), 2, 7),
                                                  (F(1, 3), 1, 6), (F(2, 5), 3, 8)])
def test_event_servers_needed_is_exactly_the_max_overlap_of_the_all_accepted_run(
        c: F, k: int, n_tokens: int) -> None:
    """With the computed number of verification servers no task waits; with one fewer, one does
    (a = 1: every draft accepted, one path)."""
    target = drafter = dsi_ref.TableLM.context_free((F(1), F(0)))
    latency = dsi_ref.Latency(drafter=c, target=F(1))
    needed = theory.event_max_overlap(c, k, n_tokens)

    def waits(servers: int) -> bool:
        run = dsi_ref.dsi(target, drafter, (), n_tokens, dsi_ref.Sampler(0), lookahead=k,
                          sp_degree=1 + servers, latency=latency)
        return any(e.kind == "wait" or e.resource == "queue" for e in run.trace)

    assert not waits(needed)
    assert needed == 1 or waits(needed - 1)
