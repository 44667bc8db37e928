"""Bridge: `theory`'s closed forms against the acceptance-level simulator's exact expectations
(`dsi_ref.expected_latency`, dynamic programming in `dsi_ref.sim`): two independent exact
computations of SI, non-SI and event-model DSI at finite N, and the paper model's per-token
increments against its renewal limit."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

import dsi_ref
import theory

pytestmark = pytest.mark.skipif(not hasattr(dsi_ref, "expected_latency"),
                                reason="the acceptance-level simulator (issue 5) is absent")
CASES = [(F(1, 2), F(1, 10), 2), (F(1, 3), F(2, 5), 3), (F(9, 10), F(1, 20), 4),
         (F(0), F(1, 3), 1), (F(1), F(1, 3), 2), (F(3, 4), F(1), 1)]


@pytest.mark.parametrize(("a", "c", "k"), CASES)
def test_si_and_nonsi_closed_forms_equal_the_simulators_exact_expectations(
        a: F, c: F, k: int) -> None:
    for n_tokens in (1, 2, 3, 7, 12, 30):
        assert dsi_ref.expected_latency("si", c=c, a=a, lookahead=k, n_tokens=n_tokens) \
            == theory.si_expected_latency(a, c, k, n_tokens)
        assert dsi_ref.expected_latency("nonsi", c=c, a=a, lookahead=k, n_tokens=n_tokens) \
            == theory.nonsi_latency(n_tokens)
    assert dsi_ref.expected_latency("si", c=c, a=a, lookahead=k, n_tokens=9, target_first=F(9, 5),
                                    drafter_first=F(2, 7)) \
        == theory.si_expected_latency(a, c, k, 9, target_first=F(9, 5), drafter_first=F(2, 7))


@pytest.mark.parametrize(("a", "c", "k"), CASES)
def test_event_model_no_waiting_closed_form_equals_the_simulators_event_model(
        a: F, c: F, k: int) -> None:
    for n_tokens in (1, 2, 5, 11, 20):
        servers = theory.event_verification_servers(c, k, n_tokens)
        assert dsi_ref.expected_latency("dsi", c=c, a=a, lookahead=k, n_tokens=n_tokens,
                                        model="event", sp_degree=1 + servers) \
            == theory.dsi_event_expected_latency(a, c, k, n_tokens)


@pytest.mark.parametrize(("a", "c", "k"), [case for case in CASES if 0 < case[0] < 1])
def test_paper_model_per_token_increments_converge_to_the_closed_form_with_the_min(
        a: F, c: F, k: int) -> None:
    def t(n: int) -> F:
        return F(dsi_ref.expected_latency("dsi", c=c, a=a, lookahead=k, n_tokens=n, model="paper"))

    increment = t(401) - t(400)
    assert abs(float(increment - theory.dsi_paper_latency_per_token(a, c, k))) < 1e-9
