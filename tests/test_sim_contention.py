"""The event model on one shared device (`Contention`): processor sharing between forwards.

Hand-computed cases pin the clock; with no slowdown it is the event model exactly; its exact
expectation (renewal over spines, which copies running forwards) equals the mean of direct runs
(one engine, no copies); only DSI changes; bad tables are refused.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dsi_ref as dr
from dsi_ref.sim.event import event_run
from dsi_ref.sim.params import SimParams

C = dr.Contention


def test_two_concurrent_target_forwards_share_the_device_by_hand() -> None:
    # N = 1, k = 1, SP = 2: the frontier forward runs alone for c, then beside the verification
    # task at half speed: it ends at c + 2 (1 - c) = 2 - c (independent servers: 1)
    kwargs = {"c": 0.25, "a": 0.5, "lookahead": 1, "n_tokens": 1, "model": "event", "sp_degree": 2}
    assert dr.expected_latency("dsi", **kwargs) == pytest.approx(1.0)  # type: ignore[arg-type]
    slow = dr.expected_latency("dsi", contention=C((1.0, 2.0)), **kwargs)  # type: ignore[arg-type]
    assert slow == pytest.approx(1.75, rel=1e-12)
    # the drafter at half speed beside one target forward: the draft ends at 2c = 0.5, the
    # frontier forward at 0.5 + 2 (1 - 0.5) = 1.5
    both = dr.expected_latency("dsi", contention=C((1.0, 2.0), (1.0, 2.0)),
                               **kwargs)  # type: ignore[arg-type]
    assert both == pytest.approx(1.5, rel=1e-12)


CONFIGS = [{"c": 0.25, "a": 0.6, "lookahead": 3, "n_tokens": 20, "sp_degree": 3},
           {"c": 0.1, "a": 0.8, "lookahead": 2, "n_tokens": 30, "sp_degree": 2},
           {"c": 0.3, "a": 0.7, "lookahead": 2, "n_tokens": 12, "sp_degree": 4,
            "target_first": 2.5, "drafter_first": 0.9},
           {"c": 0.5, "a": 0.3, "lookahead": 1, "n_tokens": 10, "sp_degree": 1}]


@pytest.mark.parametrize("config", CONFIGS)
def test_no_slowdown_is_the_event_model(config: dict[str, float]) -> None:
    free = float(dr.expected_latency("dsi", model="event", **config))  # type: ignore[arg-type]
    shared = dr.expected_latency("dsi", model="event", contention=C((1.0, 1.0), (1.0,)),
                                 **config)  # type: ignore[arg-type]
    assert isinstance(shared, float)
    assert shared == pytest.approx(free, rel=1e-12)


@pytest.mark.montecarlo(alpha=2e-9)  # a two-sided 6-SE bound (normal approximation)
@pytest.mark.parametrize("config", CONFIGS[:3])
def test_exact_expectation_is_the_mean_of_direct_runs(config: dict[str, float]) -> None:
    contention = C((1.0, 1.45, 1.7), (1.0, 1.4, 2.0))
    p = SimParams("dsi", model="event", contention=contention, **config)  # type: ignore[arg-type]
    exact = dr.expected_latency("dsi", model="event", contention=contention,
                                **config)  # type: ignore[arg-type]
    rng = np.random.default_rng(7)
    runs = np.array([float(event_run(p, rng)[-1].time) for _ in range(3000)])
    se = runs.std(ddof=1) / math.sqrt(runs.size)
    assert abs(runs.mean() - exact) < 6 * se           # false alarm ~2e-9 per config
    free = float(dr.expected_latency("dsi", model="event", **config))  # type: ignore[arg-type]
    assert exact > free                                 # slower forwards, slower DSI here


def test_contention_changes_dsi_only() -> None:
    contention = C((1.0, 3.0), (1.0, 3.0))
    for algorithm in ("nonsi", "si"):
        plain = dr.expected_latency(algorithm, c=0.2, a=0.6, lookahead=3, n_tokens=15)
        shared = dr.expected_latency(algorithm, c=0.2, a=0.6, lookahead=3, n_tokens=15,
                                     contention=contention)
        assert shared == pytest.approx(float(plain), rel=1e-12)


def test_tables_extend_their_last_step() -> None:
    contention = C((1.0, 1.4, 1.7), (1.0, 1.5))
    assert [contention.target_slowdown(m) for m in (1, 2, 3, 4)] == \
        pytest.approx([1.0, 1.4, 1.7, 2.0])
    assert [contention.drafter_slowdown(m) for m in (0, 1, 2, 3)] == \
        pytest.approx([1.0, 1.5, 2.0, 2.5])
    assert C((1.0,)).target_slowdown(5) == 1.0


@pytest.mark.parametrize("target, drafter, match", [
    ((), (1.0,), "non-empty"), ((1.0, -1.0), (1.0,), "> 0"), ((1.2,), (1.0,), "must be 1"),
    ((1.0,), (2.0,), "must be 1"), ([1.0, 2.0], (1.0,), "tuple"),
    ((1.0, math.inf), (1.0,), "finite")])
def test_bad_tables_are_refused(target: object, drafter: object, match: str) -> None:
    with pytest.raises(dr.InvalidParameterError, match=match):
        C(target, drafter)  # type: ignore[arg-type]


def test_contention_needs_the_event_model_for_dsi() -> None:
    with pytest.raises(dr.InvalidParameterError, match="model='event'"):
        dr.expected_latency("dsi", c=0.2, a=0.5, lookahead=2, n_tokens=5,
                            contention=C((1.0, 2.0)))
    with pytest.raises(dr.InvalidParameterError, match="must be a Contention"):
        dr.expected_latency("dsi", c=0.2, a=0.5, lookahead=2, n_tokens=5, model="event",
                            sp_degree=2, contention=(1.0, 2.0))  # type: ignore[arg-type]
