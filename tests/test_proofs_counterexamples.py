"""Every REFUTED negative result, replayed numerically: the counterexample z3 returned satisfies
the hypotheses and violates the claim when substituted, as exact rationals, into `theory`'s
formulas; and where the claim is about an algorithm, the token-level decoders show the failure
(a waiting task, a bonus restart, no speedup).
"""

from __future__ import annotations

from fractions import Fraction as F
from typing import Any

import pytest
import sympy

import dsi_ref
import theory
from proofs import THEOREMS, TheoremResult, Verdict, prove
from proofs.theorems import D, S, V, e, i, prev, r

pytestmark = pytest.mark.smt

NEGATIVE = [t for t in THEOREMS if t.expected is Verdict.REFUTED]
ONE_HOT = dsi_ref.TableLM.context_free((F(1), F(0)), name="one-hot")  # a = 1 with itself


@pytest.fixture(scope="module")
def refuted() -> dict[str, TheoremResult]:
    return {t.name: prove(t) for t in NEGATIVE}


def _values(result: TheoremResult) -> dict[str, Any]:
    assert result.counterexample is not None
    values = dict(result.counterexample)
    for name, value in values.items():
        assert not isinstance(value, str), f"{name}={value}: not an exact rational"
    return values


def _substitution(result: TheoremResult) -> dict[Any, Any]:
    values = _values(result)
    symbols = {theory.a, theory.c, D, S, V, r, e, i, prev}
    return {s: sympy.Rational(str(values[s.name])) for s in symbols if s.name in values}


def test_there_are_negative_results_for_each_dropped_assumption() -> None:
    dropped = " ".join(t.dropped for t in NEGATIVE)
    for assumption in ("a < 1", "a > 0", "c ≤ 1", "SP ≥", "every window full"):
        assert assumption in dropped


@pytest.mark.parametrize("theorem", NEGATIVE, ids=lambda t: t.name)
def test_counterexample_satisfies_hypotheses_and_violates_claim_exactly(
        theorem: Any, refuted: dict[str, TheoremResult]) -> None:
    result = refuted[theorem.name]
    assert result.verdict is Verdict.REFUTED
    subs = _substitution(result)
    instance = result.counterexample_k
    for hypothesis in theorem.hypotheses(instance):
        assert bool(hypothesis.subs(subs)) is True, hypothesis
    assert bool(theorem.claim(instance).subs(subs)) is False


def test_dsi_not_strictly_faster_than_si_at_a_equal_1_replayed(
        refuted: dict[str, TheoremResult]) -> None:
    result = refuted["dsi_paper_strictly_faster_than_si_at_a_1"]
    values, k = _values(result), result.counterexample_k
    assert k is not None
    a, c = F(values["a"]), F(values["c"])
    assert (a, c) == (1, 1)
    # theory: the paper model's DSI (with the min) equals SI per token
    assert theory.dsi_paper_latency_per_token(a, c, k) == theory.si_latency_per_token(a, c, k)
    # token level: drafter = target (a = 1), c = 1; SI and event-model DSI both take N
    latency = dsi_ref.Latency(drafter=c, target=F(1))
    n_tokens = 2 * (k + 1)
    si = dsi_ref.speculative(ONE_HOT, ONE_HOT, (), n_tokens, dsi_ref.Sampler(0), lookahead=k,
                             latency=latency)
    event = dsi_ref.dsi(ONE_HOT, ONE_HOT, (), n_tokens, dsi_ref.Sampler(0), lookahead=k,
                        sp_degree=1 + theory.event_verification_servers(c, k, n_tokens),
                        latency=latency)
    assert si.time == event.time == n_tokens


def test_dsi_le_si_without_delta_at_a_equal_0_replayed(refuted: dict[str, TheoremResult]) -> None:
    result = refuted["dsi_nomin_le_si_iff_delta_at_a_0"]
    values, k = _values(result), result.counterexample_k
    a, c = F(values["a"]), F(values["c"])
    assert a == 0
    assert theory.dsi_paper_latency_per_token_nomin(a, c, k) == theory.si_latency_per_token(a, c, k)
    assert theory.si_delta(a, c, k) < 0
    # token level at a = 0: SI pays k c + 1 per token except the last iteration (no drafts)
    target = dsi_ref.TableLM.context_free((F(1), F(0)))
    drafter = dsi_ref.TableLM.context_free((F(0), F(1)))
    latency = dsi_ref.Latency(drafter=c, target=F(1))
    run = dsi_ref.speculative(target, drafter, (), 4, dsi_ref.Sampler(0), lookahead=k,
                              latency=latency)
    assert run.time == theory.si_expected_latency(a, c, k, 4) == 3 * (k * c + 1) + 1


def _waits(n_tokens: int, k: int, c: F, verification_servers: int) -> bool:
    run = dsi_ref.dsi(ONE_HOT, ONE_HOT, (), n_tokens, dsi_ref.Sampler(0), lookahead=k,
                      sp_degree=1 + verification_servers,
                      latency=dsi_ref.Latency(drafter=c, target=F(1)))
    return any(ev.kind == "wait" or ev.resource == "queue" for ev in run.trace)


def test_too_few_servers_witness_schedule_replayed_on_token_level_dsi(
        refuted: dict[str, TheoremResult]) -> None:
    result = refuted["sp_requirement_below_waits"]
    values, k = _values(result), result.counterexample_k
    assert k is not None
    c, servers = F(values["c"]), int(values["V"])
    required = int(theory.sp_requirement(c, k))
    assert servers < required
    # the witness: V + 1 full windows launched at k c, …, (V + 1) k c, all running at once
    schedule = theory.sp_witness_schedule(c, k, servers)
    assert schedule is not None and len(schedule) == servers + 1
    assert schedule[-1][0] < schedule[0][1]            # the last launch precedes the first end
    n_tokens = (servers + 1) * k + 1
    assert _waits(n_tokens, k, c, servers)
    run = dsi_ref.dsi(ONE_HOT, ONE_HOT, (), n_tokens, dsi_ref.Sampler(0), lookahead=k,
                      sp_degree=1 + servers, latency=dsi_ref.Latency(drafter=c, target=F(1)))
    waited = [ev for ev in run.trace if ev.kind == "wait" or ev.resource == "queue"]
    assert waited[0].start == schedule[-1][0]          # the task that waits is the witness's
    assert theory.sp_witness_schedule(c, k, required) is None
    # with the paper's requirement and only full windows, nobody waits
    assert not _waits(required * k * 2, k, c, required)


def test_partial_last_window_needs_one_more_server_replayed(
        refuted: dict[str, TheoremResult]) -> None:
    result = refuted["event_sp_requirement_with_partial_window"]
    values, k = _values(result), result.counterexample_k
    assert k is not None
    c, servers, drafts = F(values["c"]), int(values["S"]), int(values["r"])
    assert servers == theory.sp_requirement(c, k)
    n_tokens = servers * k + drafts          # S full windows, then a partial one of r drafts
    assert _waits(n_tokens, k, c, servers)
    assert not _waits(servers * k, k, c, servers)   # the same run without the partial window
    assert theory.event_verification_servers(c, k, n_tokens) == servers + 1



def test_partial_window_wait_can_cost_time() -> None:
    """Not every such wait delays the last commit (with one draft in the partial window, the
    previous window's task already supplies ``p`` there); with k = 5, c = 1/10, N = 13 (two full
    windows launched at 1/2 and 1, the partial one of 3 drafts at 13/10) the partial window's
    task waits 1/5 for a server and the run ends 1/5 later than the no-waiting closed form."""
    c, k, n_tokens = F(1, 10), 5, 13
    servers = int(theory.sp_requirement(c, k))
    run = dsi_ref.dsi(ONE_HOT, ONE_HOT, (), n_tokens, dsi_ref.Sampler(0), lookahead=k,
                      sp_degree=1 + servers, latency=dsi_ref.Latency(drafter=c, target=F(1)))
    no_wait = theory.dsi_event_expected_latency(F(1), c, k, n_tokens)
    assert run.time - no_wait == 2 * c


def test_slow_drafter_bonus_restart_replayed_on_token_level_dsi(
        refuted: dict[str, TheoremResult]) -> None:
    result = refuted["event_draft_ready_c_above_1"]
    c = F(_values(result)["c"])
    assert c > 1
    run = dsi_ref.dsi(ONE_HOT, ONE_HOT, (), 3, dsi_ref.Sampler(0), lookahead=1, sp_degree=4,
                      latency=dsi_ref.Latency(drafter=c, target=F(1)))
    first_commit = min(ev.start for ev in run.trace if ev.kind == "commit")
    assert first_commit == 1 < c                 # decided by the frontier task, draft not ready
    assert run.stats["bonus"] >= 1
    # the no-bonus closed form refuses this regime rather than give a wrong number
    with pytest.raises(theory.TheoryDomainError):
        theory.dsi_event_expected_latency(F(1), c, 1, 3)
