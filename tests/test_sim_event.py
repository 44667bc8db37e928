"""The event model: spines, the exact dynamic programme, Monte Carlo, and its latency claims."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.sim.event import dsi_event_grid, event_run, spine, spines
from dsi_ref.sim.params import SimParams

costs = st.fractions(F(1, 20), F(2)).map(lambda x: x.limit_denominator(20))
prefills = st.none() | st.fractions(F(1, 2), F(3)).map(lambda x: x.limit_denominator(8))


@st.composite
def event_params(draw: st.DrawFn, max_n: int = 8) -> SimParams:
    """Small event-model configurations: any c (including drafters slower than the target),
    any SP (including too few servers), prefill or not, both queue orders."""
    return SimParams("dsi", c=draw(costs), a=draw(st.fractions(F(0), F(1)).map(
        lambda x: x.limit_denominator(10))), lookahead=draw(st.integers(1, 4)),
        n_tokens=draw(st.integers(1, max_n)), model="event", sp_degree=draw(st.integers(1, 5)),
        queue=draw(st.sampled_from(["fifo", "lifo"])), target_first=draw(prefills),
        drafter_first=draw(prefills))


@given(p=event_params(max_n=25), used=st.integers(0, 4))
def test_spines_from_one_run_equal_spines_run_from_scratch_for_every_budget(
        p: SimParams, used: int) -> None:
    assert p.sp_degree is not None
    used = min(used, p.sp_degree - 1)
    family = spines(p, p.n_tokens, used=used)
    for left in range(1, p.n_tokens + 1):
        one, two = family[left - 1], spine(p, left, used=used)
        assert one.ticks.tolist() == two.ticks.tolist()
        assert one.used.tolist() == two.used.tolist() and one.complete == two.complete


@given(p=event_params(max_n=10))
def test_event_grid_floats_equal_the_exact_fractions(p: SimParams) -> None:
    exact = dr.expected_latency("dsi", c=p.c, a=p.a, lookahead=p.lookahead,
                                n_tokens=p.n_tokens, model="event",
                                sp_degree=p.sp_degree, queue=p.queue,
                                target_first=p.target_first, drafter_first=p.drafter_first)
    grid = dsi_event_grid(p, np.array([float(p.a)]))[0]
    assert grid == pytest.approx(float(exact), rel=1e-12)


@given(p=event_params(max_n=12))
def test_event_dsi_is_never_slower_than_nonsi_in_expectation(p: SimParams) -> None:
    """The frontier task bounds every gap between commits by one target forward (with a target
    prefill, the first gap by ``target_first``)."""
    exact = dr.expected_latency("dsi", c=p.c, a=p.a, lookahead=p.lookahead,
                                n_tokens=p.n_tokens, model="event",
                                sp_degree=p.sp_degree, queue=p.queue,
                                target_first=p.target_first, drafter_first=p.drafter_first)
    nonsi = dr.expected_latency("nonsi", c=p.c, a=p.a, lookahead=None, n_tokens=p.n_tokens,
                                target_first=p.target_first)
    assert exact <= nonsi


@given(p=event_params(max_n=12), seed=st.integers(0, 2**16))
def test_every_event_run_commits_within_one_target_forward_of_the_previous_commit(
        p: SimParams, seed: int) -> None:
    commits = event_run(p, np.random.default_rng(seed))
    first = p.target_first if p.target_first is not None else 1
    times = [F(0), *(cm.time for cm in commits)]
    assert [cm.position for cm in commits] == list(range(p.n_tokens))
    assert times[1] <= first
    assert all(later - earlier <= 1 for earlier, later in itertools.pairwise(times[1:]))


def test_one_server_makes_dsi_exactly_as_slow_as_nonsi() -> None:
    """With SP = 1 the frontier task always goes first on the only server: one commit per
    target forward, whatever the drafter (the regime where DSI gains nothing)."""
    for c, a, k in [(F(1, 10), F(9, 10), 3), (F(1, 2), F(1, 2), 1), (F(1, 20), F(99, 100), 8)]:
        assert dr.expected_latency("dsi", c=c, a=a, lookahead=k, n_tokens=15, model="event",
                                   sp_degree=1) == 15


def test_event_dsi_can_be_slower_than_si_with_too_few_servers() -> None:
    """c = 1/10, a = 9/10, k = 2, SP = 2: one verification server for a task every 0.2 target
    forwards; tasks queue and DSI loses to SI (a counterexample to 'faster than SI' without
    enough servers)."""
    kw = {"c": F(1, 10), "a": F(9, 10), "lookahead": 2, "n_tokens": 12}
    assert dr.expected_latency("dsi", model="event", sp_degree=2, **kw) > \
        dr.expected_latency("si", **kw)  # type: ignore[arg-type]
    assert dr.expected_latency("dsi", model="event", sp_degree=7, **kw) < \
        dr.expected_latency("si", **kw)  # type: ignore[arg-type]


@pytest.mark.montecarlo(alpha=4e-9)  # two two-sided 6-SE bounds, 2e-9 each
def test_monte_carlo_means_agree_with_the_exact_event_expectation() -> None:
    """The vectorised simulation (20 000 runs) and direct engine runs with Bernoulli draws
    (3 000 runs) must lie within 6 standard errors of the exact mean: false-alarm rate
    2e-9 each (normal approximation); power: a bias of 3 % of the mean is > 10 standard
    errors for both samples, detected with probability > 0.9999 (Phi(10 - 6))."""
    p = SimParams("dsi", c=F(1, 10), a=F(4, 5), lookahead=3, n_tokens=60, model="event",
                  sp_degree=3, target_first=F(3, 2), drafter_first=F(1, 2))
    exact = float(dr.expected_latency("dsi", c=p.c, a=p.a, lookahead=p.lookahead,
                                      n_tokens=p.n_tokens, model="event", sp_degree=3,
                                      target_first=p.target_first, drafter_first=p.drafter_first))
    vectorised = dr.simulate_latency("dsi", c=p.c, a=p.a, lookahead=p.lookahead,
                                     n_tokens=p.n_tokens, model="event", sp_degree=3,
                                     target_first=p.target_first, drafter_first=p.drafter_first,
                                     n_repeats=20_000, seed=11)
    rng = np.random.default_rng(12)
    direct = np.array([float(event_run(p, rng)[-1].time) for _ in range(3_000)])
    for sample in (vectorised, direct):
        se = sample.std(ddof=1) / np.sqrt(sample.size)
        assert abs(sample.mean() - exact) < 6 * se, (sample.mean(), exact, se)
        assert 0.03 * exact > 10 * se


def test_event_model_requires_a_server_count() -> None:
    with pytest.raises(dr.InvalidParameterError, match="sp_degree"):
        dr.expected_latency("dsi", c=F(1, 10), a=F(1, 2), lookahead=2, n_tokens=3, model="event")
