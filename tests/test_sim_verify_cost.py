"""The cost ``v`` of a verification forward (``verify_cost``): the target over a window of drafts
costs ``v`` target forwards, a one-token forward 1 (the paper takes ``v = 1``).

``v = 1`` is the paper's model exactly; hand-computed cases pin where ``v`` is charged (SI's
iterations with drafts, the event model's verification tasks, never its frontier tasks); the
exact expectations equal the mean of direct runs; the paper model's DSI refuses it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import dsi_ref as dr
from dsi_ref.sim.event import event_run
from dsi_ref.sim.params import SimParams

F = Fraction

CONFIGS: list[dict[str, Any]] = [
    {"c": F(1, 4), "a": F(3, 5), "lookahead": 3, "n_tokens": 14, "sp_degree": 3},
    {"c": F(1, 10), "a": F(4, 5), "lookahead": 2, "n_tokens": 16, "sp_degree": 2},
    {"c": F(3, 10), "a": F(7, 10), "lookahead": 2, "n_tokens": 10, "sp_degree": 4,
     "target_first": F(5, 2), "drafter_first": F(9, 10)},
    {"c": F(1, 2), "a": F(3, 10), "lookahead": 1, "n_tokens": 8, "sp_degree": 1},
    {"c": F(1, 5), "a": F(1, 2), "lookahead": 2, "n_tokens": 9, "sp_degree": 3, "queue": "lifo"},
]


@pytest.mark.parametrize("config", CONFIGS)
def test_a_verification_forward_of_cost_one_is_the_paper_assumption(
        config: dict[str, Any]) -> None:
    for algorithm, model in (("si", "paper"), ("dsi", "event")):
        plain = dr.expected_latency(algorithm, model=model, **config)
        one = dr.expected_latency(algorithm, model=model, verify_cost=1, **config)
        assert isinstance(one, Fraction) and one == plain          # exact, not approximate


def test_si_charges_v_per_iteration_with_drafts_by_hand() -> None:
    # k = 1, N = 2: E(1) = 1 (no draft: a one-token forward), E(2) = c + v + (1 − a) E(1)
    kwargs: dict[str, Any] = {"c": F(1, 2), "a": F(1, 2), "lookahead": 1, "n_tokens": 2}
    assert dr.expected_latency("si", **kwargs) == F(2)
    assert dr.expected_latency("si", verify_cost=2, **kwargs) == F(3)
    assert dr.expected_latency("si", verify_cost=F(5, 4), **kwargs) == F(9, 4)
    # N = 1: no draft, so no verification forward: v is never paid
    assert dr.expected_latency("si", verify_cost=7, c=F(1, 2), a=F(1, 2), lookahead=3,
                               n_tokens=1) == 1


def test_dsi_charges_v_to_verification_tasks_not_frontier_tasks_by_hand() -> None:
    # a = 1, k = 1, c = 1/10. N = 2, SP = 2: the frontier task commits token 0 at 1 and
    # restarts at position 1 (ends at 2); the verification task of window (0, 1) started at
    # c = 0.1 ends at 0.1 + v. Token 1: min(2, 0.1 + v).
    kwargs: dict[str, Any] = {"c": F(1, 10), "a": 1, "lookahead": 1, "model": "event"}
    assert dr.expected_latency("dsi", n_tokens=2, sp_degree=2, **kwargs) == F(11, 10)
    assert dr.expected_latency("dsi", n_tokens=2, sp_degree=2, verify_cost=F(3, 2),
                               **kwargs) == F(8, 5)
    assert dr.expected_latency("dsi", n_tokens=2, sp_degree=2, verify_cost=2, **kwargs) == 2
    # N = 3, SP = 3: the second window (1, 2) starts at 2c = 0.2 on server 2 and supplies token
    # 2 at 0.2 + v; the frontier task restarted at 2 would end at 3: token 2 at min(3, 0.2 + v)
    assert dr.expected_latency("dsi", n_tokens=3, sp_degree=3, verify_cost=2,
                               **kwargs) == F(11, 5)
    # N = 1: only the frontier task runs, whatever v
    assert dr.expected_latency("dsi", n_tokens=1, sp_degree=2, verify_cost=9, **kwargs) == 1


@pytest.mark.montecarlo(alpha=2e-9)  # a two-sided 6-SE bound (normal approximation)
@pytest.mark.parametrize("contention", [None, dr.Contention((1.0, 1.45, 1.7), (1.0, 1.4, 2.0))])
@pytest.mark.parametrize("config", CONFIGS[:3])
def test_exact_expectation_is_the_mean_of_direct_runs(config: dict[str, Any],
                                                      contention: dr.Contention | None) -> None:
    p = SimParams("dsi", model="event", contention=contention, verify_cost=F(13, 10),
                  **config)
    exact = float(dr.expected_latency("dsi", model="event", contention=contention,
                                      verify_cost=F(13, 10), **config))
    rng = np.random.default_rng(11)
    runs = np.array([float(event_run(p, rng)[-1].time) for _ in range(2000)])
    se = runs.std(ddof=1) / math.sqrt(runs.size)
    assert abs(runs.mean() - exact) < 6 * se + 1e-12            # false alarm ~ 2e-9 per check
    assert exact > float(dr.expected_latency("dsi", model="event", contention=contention,
                                             **config))        # dearer verifications: slower


@pytest.mark.montecarlo(alpha=2e-9)  # a two-sided 6-SE bound (normal approximation)
@pytest.mark.parametrize("config", CONFIGS[:2])
def test_si_monte_carlo_converges_to_the_exact_value(config: dict[str, Any]) -> None:
    kwargs = {key: config[key] for key in ("c", "a", "lookahead", "n_tokens")}
    exact = float(dr.expected_latency("si", verify_cost=1.3, **kwargs))
    runs = dr.simulate_latency("si", verify_cost=1.3, n_repeats=4000, seed=3, **kwargs)
    se = runs.std(ddof=1) / math.sqrt(runs.size)
    assert abs(runs.mean() - exact) < 6 * se + 1e-12


def test_non_si_ignores_it_and_paper_dsi_refuses_it() -> None:
    assert dr.expected_latency("nonsi", c=0.1, a=0.5, lookahead=2, n_tokens=9, verify_cost=3) == 9
    with pytest.raises(dr.InvalidParameterError, match="model='event'"):
        dr.expected_latency("dsi", c=0.1, a=0.5, lookahead=2, n_tokens=9, verify_cost=1.2)


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "1.2", True])
def test_bad_verify_costs_are_refused(bad: object) -> None:
    with pytest.raises(dr.InvalidParameterError, match="verify_cost"):
        dr.expected_latency("si", c=0.1, a=0.5, lookahead=2, n_tokens=9,
                            verify_cost=bad)  # type: ignore[arg-type]
