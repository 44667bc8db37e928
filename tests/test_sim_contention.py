"""The event model on one shared device (`Contention`): processor sharing between forwards.

Hand-computed cases pin the clock; with no slowdown it is the event model exactly; its exact
expectation (renewal over spines, which copies running forwards) equals the mean of direct runs
(one engine, no copies); only DSI changes; bad tables are refused.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import dsi_ref as dr
from dsi_ref.sim.batched import H100_LLAMA7B, BatchedCosts, predict, table
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


# -- batched servers (`Contention.batch`, `dsi_ref.sim.batched`) ----------------------------------
def test_batched_servers_by_hand() -> None:
    # N = 2, k = 1, SP = 2, c = 1/4: the frontier forward runs alone on [0, 1]; the window of
    # draft 0 (submitted at c) waits for it. Draft 0 accepted at 1 (probability a): that window
    # and the next frontier task share one forward [1, 1 + c(2)], which commits position 1.
    # Rejected: the restart's frontier forward runs alone on [1, 2] (the new window, drafted at
    # 1.25, waits for it) and commits position 1. E = a (1 + c(2)) + (1 - a) 2.
    for c2 in (2.0, 1.25):
        got = dr.expected_latency("dsi", c=0.25, a=0.5, lookahead=1, n_tokens=2, model="event",
                                  sp_degree=2, contention=C((1.0,), batch=(1.0, c2)))
        assert got == pytest.approx(0.5 * (1 + c2) + 0.5 * 2, rel=1e-12)
    # a forward alone costs batch[0] times its task: here the frontier forward, N = 1
    alone = dr.expected_latency("dsi", c=0.25, a=0.5, lookahead=1, n_tokens=1, model="event",
                                sp_degree=2, contention=C((1.0,), batch=(1.5, 2.0)))
    assert alone == pytest.approx(1.5, rel=1e-12)


@pytest.mark.parametrize("config", [
    {"c": 0.5, "a": 0.3, "lookahead": 1, "n_tokens": 10},
    {"c": 0.2, "a": 0.7, "lookahead": 3, "n_tokens": 15, "target_first": 2.5,
     "drafter_first": 0.9}])
def test_batched_servers_with_one_server_are_the_shared_model(config: dict[str, float]) -> None:
    # SP = 1: one task at a time, so a batch of one and processor sharing agree (the drafter
    # slowed alike beside one forward), and with no slowdown both are the event model
    kw = {"model": "event", "sp_degree": 1, **config}
    drafter = (1.0, 1.4)
    batched = dr.expected_latency("dsi", contention=C((1.0,), drafter, batch=(1.0, 1.7)),
                                  **kw)  # type: ignore[arg-type]
    shared = dr.expected_latency("dsi", contention=C((1.0, 1.3), drafter),
                                 **kw)  # type: ignore[arg-type]
    assert batched == pytest.approx(shared, rel=1e-12)
    free = float(dr.expected_latency("dsi", **kw))  # type: ignore[arg-type]
    assert dr.expected_latency("dsi", contention=C((1.0,), batch=(1.0, 9.0)),
                               **kw) == pytest.approx(free, rel=1e-12)  # type: ignore[arg-type]
    # SP = 1 commits one position per forward, so a forward alone at 1.5x makes DSI 1.5x
    slower = dr.expected_latency("dsi", contention=C((1.0,), batch=(1.5,)),
                                 **kw)  # type: ignore[arg-type]
    assert slower == pytest.approx(1.5 * free, rel=1e-12)


@pytest.mark.parametrize("a", [0.3, 0.8])
@pytest.mark.parametrize("n_tokens", [5, 20])
def test_no_batching_gain_is_processor_sharing_when_tasks_start_together(
        a: float, n_tokens: int) -> None:
    # c(b) = b c(1): a forward over b tasks takes as long as b forwards sharing the device. With
    # c = 1, k = 1, SP = 2 every task starts at the end of a forward (a window is drafted exactly
    # when the forward beside it ends), so the two models are the same run.
    kw = {"c": 1, "a": a, "lookahead": 1, "n_tokens": n_tokens, "model": "event", "sp_degree": 2}
    batched = dr.expected_latency("dsi", contention=C((1.0,), batch=(1.0, 2.0, 3.0)),
                                  **kw)  # type: ignore[arg-type]
    shared = dr.expected_latency("dsi", contention=C((1.0, 2.0, 3.0)),
                                 **kw)  # type: ignore[arg-type]
    assert batched == pytest.approx(shared, rel=1e-12)


@pytest.mark.parametrize("config", [*CONFIGS[:3], {"c": 0.05, "a": 0.77, "lookahead": 5,
                                                   "n_tokens": 40, "sp_degree": 4}])
def test_batched_servers_are_monotone_in_the_batch_cost(config: dict[str, float]) -> None:
    base = (1.0, 1.05, 1.1, 1.15)

    def latency(batch: tuple[float, ...]) -> float:
        value = dr.expected_latency("dsi", model="event", contention=C((1.0,), (1.0, 1.5),
                                                                       batch=batch),
                                    **config)  # type: ignore[arg-type]
        assert isinstance(value, float)
        return value

    scaled = [latency(tuple(x * s for x in base)) for s in (1.0, 1.2, 1.5, 2.0)]
    assert scaled == sorted(scaled) and len(set(scaled)) == 4     # dearer forwards: slower
    flat, measured, none = (latency(t) for t in ((1.0,) * 4, base, (1.0, 2.0, 3.0, 4.0)))
    assert flat < measured < none           # the more a batch saves, the faster


def test_direct_runs_take_the_expected_latency_when_nothing_is_random() -> None:
    # a = 1 and a = 0: every run is the same run, so a direct run (one engine, no spines or
    # copies) has the exact expectation's latency
    for a in (0.0, 1.0):
        config = {"c": 0.2, "a": a, "lookahead": 3, "n_tokens": 14, "sp_degree": 3}
        contention = C((1.0,), (1.0, 1.3), batch=(1.05, 1.1, 1.2))
        p = SimParams("dsi", model="event", contention=contention,
                      **config)  # type: ignore[arg-type]
        run = event_run(p, np.random.default_rng(0))
        assert [c.position for c in run] == list(range(14))
        exact = dr.expected_latency("dsi", model="event", contention=contention,
                                    **config)  # type: ignore[arg-type]
        assert float(run[-1].time) == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("batch, match", [((), "non-empty"), ((1.0, 0.0), "> 0"),
                                          ([1.0, 2.0], "tuple"), ((math.nan,), "finite")])
def test_bad_batch_tables_are_refused(batch: object, match: str) -> None:
    with pytest.raises(dr.InvalidParameterError, match=match):
        C((1.0,), batch=batch)  # type: ignore[arg-type]
    with pytest.raises(dr.InvalidParameterError, match="no batch table"):
        C((1.0,)).batch_cost(1)


def test_the_batched_costs_give_the_measured_contention() -> None:
    costs = H100_LLAMA7B
    contention = costs.contention(4)
    assert contention.batch == pytest.approx(
        (9.67 / 9.02, 9.78 / 9.02, (9.78 + 9.99) / 2 / 9.02, 9.99 / 9.02))
    assert contention.drafter_slowdown(1) == pytest.approx(0.659 / 0.431)
    assert costs.batch_ms(6) == pytest.approx(9.99 + 2 * (9.99 - 9.78) / 2)
    assert (costs.c, costs.verify_cost) == pytest.approx((0.38 / 7.9, 9.02 / 7.9))
    with pytest.raises(dr.InvalidParameterError, match="1 window"):
        BatchedCosts(7.9, 9.0, {2: 9.5}, 0.4, 1.5, 5)


def test_the_predicted_h100_table_in_the_docs_is_current() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "gpu-backend.md").read_text()
    start, end = "<!-- batched-prediction:start -->\n", "\n<!-- batched-prediction:end -->"
    assert page[page.index(start) + len(start):page.index(end)] == table()
    two, four = (predict(H100_LLAMA7B, 0.768, sp) for sp in (2, 4))
    assert two.dsi_over_si < four.dsi_over_si      # more windows per forward with more rows
    # the prose quotes the table
    x, y = f"{two.dsi_over_si:.2f}", f"{four.dsi_over_si:.2f}"
    assert f"**{x} × SI (SP 2) and {y} × SI (SP 4)**" in page
    assert f"DSI/SI ({x} at SP 2, {y} at SP 4)" in page
