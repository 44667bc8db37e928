"""The paper model (official offline simulator): exact values against the official semantics.

The official loops (``SimulSI._single_repeat``, ``SimulDSI._single_repeat`` of
keyboardAnt/distributed-speculative-inference, docs/paper.md) are transcribed below as
`official_si` / `official_dsi`, driven by a source of ``min(G, k)`` draws. Enumerating that source
exactly gives the official law's mean (compared with ``==``); sampling it gives a per-run
simulation (compared with the exact value within Monte Carlo error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from fractions import Fraction as F
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.sim.paper import dsi_paper_exact, dsi_paper_grid, si_exact, si_grid
from dsi_ref.sim.params import SimParams

Draw = Callable[[], int]


def official_si(c: F | float, k: int, n: int, draw: Draw) -> F | float:
    """Transcription of the official ``SimulSI._single_repeat`` (failure_cost = 1)."""
    cost: F | float = 0
    toks_left = n
    while toks_left > 0:
        curr_k = min(k, toks_left - 1)
        cost += curr_k * c + 1
        toks_left -= draw() + 1          # draw() = min(G, k), as the official sampler yields
    return cost


def official_dsi(c: F | float, k: int, n: int, draw: Draw) -> F | float:
    """Transcription of the official ``SimulDSI._single_repeat`` (failure_cost = 1)."""
    cost: F | float = 0
    toks = 0
    while toks < n:
        new_toks = 0
        si: F | float = 0
        while True:
            curr_k = min(k, n - 1 - toks - new_toks)
            accepted = min(curr_k, draw())
            new_toks += accepted
            si += curr_k * c
            if curr_k == 0 or accepted < curr_k:
                si += 1
                new_toks += 1
                break
        cost += min(si, new_toks * 1)
        toks += new_toks
    return cost


def official_mean(loop: Callable[[F, int, int, Draw], F | float], c: F, a: F, k: int,
                  n: int) -> F:
    """The exact mean of an official loop: enumerate every sequence of ``min(G, k)`` draws
    (``P = a^j (1 − a)`` for ``j < k``, ``a^k`` for ``j = k``) by depth-first replay."""
    law = [(j, a**j * (1 - a)) for j in range(k)] + [(k, a**k)]
    total = F(0)
    stack: list[tuple[tuple[int, ...], F]] = [((), F(1))]
    while stack:
        prefix, prob = stack.pop()
        replay: Iterator[int] = iter(prefix)
        needed: list[bool] = []

        def draw(replay: Iterator[int] = replay, needed: list[bool] = needed) -> int:
            try:
                return next(replay)
            except StopIteration:
                needed.append(True)
                raise LookupError from None

        try:
            value = loop(c, k, n, draw)
        except LookupError:
            stack.extend((prefix + (j,), prob * p) for j, p in law if p)
            continue
        total += prob * F(value)
    return total


SMALL = [(F(1, 10), F(9, 10), 3, 7), (F(1, 2), F(1, 3), 2, 6), (F(3, 4), F(1, 2), 1, 5),
         (F(1, 20), F(99, 100), 5, 8), (F(1), F(1, 4), 4, 6), (F(2, 5), F(7, 10), 6, 6)]


@pytest.mark.parametrize(("c", "a", "k", "n"), SMALL)
def test_si_exact_equals_the_official_loops_exact_mean(c: F, a: F, k: int, n: int) -> None:
    assert si_exact(SimParams("si", c, a, k, n)) == official_mean(official_si, c, a, k, n)


@pytest.mark.parametrize(("c", "a", "k", "n"), SMALL)
def test_dsi_paper_exact_equals_the_official_loops_exact_mean(c: F, a: F, k: int,
                                                              n: int) -> None:
    assert dsi_paper_exact(SimParams("dsi", c, a, k, n)) == official_mean(official_dsi, c, a,
                                                                          k, n)


@pytest.mark.montecarlo(alpha=4e-9)  # two two-sided 6-SE bounds, 2e-9 each
@pytest.mark.parametrize("algorithm", ["si", "dsi"])
def test_exact_mean_agrees_with_the_official_loop_and_the_vectorised_simulation(
        algorithm: str) -> None:
    """N = 1000, the paper's scale. Both the per-run official loop (4 000 runs) and the
    vectorised simulation (40 000 runs) must lie within 6 standard errors of the exact mean:
    false-alarm rate 2e-9 per comparison (normal approximation, sums of ~1000 terms); power:
    a bias of 1 % of the mean (an end effect of ten tokens) is detected with probability
    > 0.9999 (it is > 10 standard errors for both samples: Phi(10 - 6))."""
    c, a, k, n = 0.15, 0.8, 4, 1000
    p = SimParams(algorithm, c, a, k, n)  # type: ignore[arg-type]
    exact = float(si_exact(p) if algorithm == "si" else dsi_paper_exact(p))
    rng = np.random.default_rng(20250405)
    loop = official_si if algorithm == "si" else official_dsi
    draws = iter(np.minimum(rng.geometric(1 - a, size=4_000 * n) - 1, k).tolist())
    per_run = np.array([loop(c, k, n, lambda: next(draws)) for _ in range(4_000)])
    vectorised = dr.simulate_latency(algorithm, c=c, a=a, lookahead=k, n_tokens=n,  # type: ignore[arg-type]
                                     n_repeats=40_000, seed=7)
    for sample in (per_run, vectorised):
        se = sample.std(ddof=1) / np.sqrt(sample.size)
        assert abs(sample.mean() - exact) < 6 * se, (sample.mean(), exact, se)
        assert 0.01 * exact > 10 * se


@given(c=st.fractions(F(1, 100), F(1)), a=st.fractions(F(0), F(1)),
       k=st.integers(1, 6), n=st.integers(1, 12))
def test_grid_floats_equal_the_exact_fractions(c: F, a: F, k: int, n: int) -> None:
    si = si_grid(np.array([float(c)]), np.array([float(a)]), np.array([k]), n)[0]
    dsi = dsi_paper_grid(np.array([float(c)]), np.array([float(a)]), np.array([k]), n)[0, 0, 0]
    assert si == pytest.approx(float(si_exact(SimParams("si", c, a, k, n))), rel=1e-12)
    assert dsi == pytest.approx(float(dsi_paper_exact(SimParams("dsi", c, a, k, n))), rel=1e-12)


@given(c=st.fractions(F(1, 100), F(1)), a=st.fractions(F(0), F(1)),
       k=st.integers(1, 8), n=st.integers(1, 40))
def test_paper_dsi_is_never_slower_than_si_at_the_same_lookahead_nor_than_nonsi(
        c: F, a: F, k: int, n: int) -> None:
    dsi = dr.expected_latency("dsi", c=c, a=a, lookahead=k, n_tokens=n)
    assert dsi <= dr.expected_latency("si", c=c, a=a, lookahead=k, n_tokens=n)
    assert dsi <= dr.expected_latency("nonsi", c=c, a=a, lookahead=None, n_tokens=n) == n


def test_rational_inputs_give_fractions_and_float_inputs_give_floats() -> None:
    exact = dr.expected_latency("dsi", c=F(1, 10), a=F(1, 2), lookahead=2, n_tokens=5)
    approx = dr.expected_latency("dsi", c=0.1, a=0.5, lookahead=2, n_tokens=5)
    assert isinstance(exact, F) and isinstance(approx, float)
    assert approx == pytest.approx(float(exact), rel=1e-12)


def test_prefill_adds_ttft_once_to_each_model_on_the_critical_path() -> None:
    base = dr.expected_latency("si", c=F(1, 10), a=F(1, 2), lookahead=2, n_tokens=6)
    with_prefill = dr.expected_latency("si", c=F(1, 10), a=F(1, 2), lookahead=2, n_tokens=6,
                                       target_first=F(9, 5), drafter_first=F(1, 2))
    assert with_prefill - base == (F(9, 5) - 1) + (F(1, 2) - F(1, 10))
    assert dr.expected_latency("nonsi", c=F(1, 10), a=F(1, 2), lookahead=None, n_tokens=6,
                               target_first=F(9, 5)) == 6 + F(4, 5)


def test_the_paper_models_server_check_raises_a_named_error_like_the_official_config() -> None:
    # ceil(1/(k c)) = ceil(1/(3 * 1/20)) = 7 servers needed
    assert dr.expected_latency("dsi", c=F(1, 20), a=F(1, 2), lookahead=3, n_tokens=5, sp_degree=7) \
        == dr.expected_latency("dsi", c=F(1, 20), a=F(1, 2), lookahead=3, n_tokens=5)
    with pytest.raises(dr.InsufficientServersError, match="ceil"):
        dr.expected_latency("dsi", c=F(1, 20), a=F(1, 2), lookahead=3, n_tokens=5, sp_degree=6)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"c": 0}, "c must be"), ({"c": float("nan")}, "c must be"), ({"a": F(3, 2)}, "acceptance"),
    ({"lookahead": 0}, "lookahead"), ({"lookahead": None}, "needs a lookahead"),
    ({"n_tokens": 0}, "n_tokens"),
    ({"model": "exact"}, "model"), ({"sp_degree": 0}, "sp_degree"),
])
def test_bad_parameters_raise_named_errors(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"c": F(1, 10), "a": F(1, 2), "lookahead": 2, "n_tokens": 4} | kwargs
    with pytest.raises(dr.InvalidParameterError, match=match):
        dr.expected_latency("dsi", **args)  # type: ignore[arg-type]


def test_simulate_latency_is_reproducible_from_its_seed() -> None:
    kw = {"c": 0.2, "a": 0.7, "lookahead": 3, "n_tokens": 50, "n_repeats": 100}
    one = dr.simulate_latency("dsi", seed=3, **kw)  # type: ignore[arg-type]
    two = dr.simulate_latency("dsi", seed=np.random.default_rng(3), **kw)  # type: ignore[arg-type]
    assert np.array_equal(one, two)
    assert not np.array_equal(one, dr.simulate_latency("dsi", seed=4, **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("algorithm", ["nonsi", "si", "dsi"])
def test_k_is_a_working_alias_of_lookahead_in_the_public_functions(algorithm: str) -> None:
    """``k=`` (the paper's letter, the name before the rename) still works and means exactly
    ``lookahead=``; both at once is an error, whatever their values."""
    kw: dict[str, Any] = {"c": F(1, 10), "a": F(3, 5), "n_tokens": 9}
    if algorithm == "dsi":
        kw |= {"model": "event", "sp_degree": 2}
    by_name = dr.expected_latency(algorithm, lookahead=3, **kw)
    assert dr.expected_latency(algorithm, k=3, **kw) == by_name
    if algorithm != "nonsi":   # the lookahead matters, so the alias is not silently ignored
        assert dr.expected_latency(algorithm, k=1, **kw) != by_name
    runs = [dr.simulate_latency(algorithm, n_repeats=5, seed=4, **kw, **{name: 3})
            for name in ("lookahead", "k")]
    assert runs[0].tolist() == runs[1].tolist()
    with pytest.raises(dr.InvalidParameterError, match="lookahead once"):
        dr.expected_latency(algorithm, lookahead=3, k=3, **kw)
    with pytest.raises(dr.InvalidParameterError, match="lookahead once"):
        dr.simulate_latency(algorithm, lookahead=3, k=3, n_repeats=5, seed=4, **kw)
