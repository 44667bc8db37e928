"""Acceptance laws per window (`dsi_ref.sim.acceptance`) and the event model's fast path.

* The fast spines (`spine_family`) equal the reference `spines` tick for tick, and the fast
  programme equals the reference one exactly (``Fraction``) or within 1e-12 relative (floats:
  both sum the same non-negative terms in another order, so they differ by rounding only).
* With the i.i.d. law ``AcceptanceLaw.iid(a, k)`` every model returns the rate-``a`` value
  exactly; with other laws, the exact values equal a brute-force enumeration of window lengths
  and the Monte Carlo means.
* Block decisions with fixed windows (``decisions="window"``): the fast path equals the
  reference, the exact value equals the enumeration over window lengths of direct engine runs
  and the Monte Carlo means, ``k = 1`` is position decisions, bad values are refused by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction as F
from typing import Any

import numpy as np
import pytest

import dsi_ref as dr
from dsi_ref.sim import AcceptanceLaw
from dsi_ref.sim.event import (
    dsi_event_exact,
    dsi_event_exact_reference,
    dsi_event_grid,
    dsi_event_grid_reference,
    event_run,
    spines,
)
from dsi_ref.sim.event_engine import make_engine
from dsi_ref.sim.event_spines import fast_eligible, spine_family
from dsi_ref.sim.params import Algorithm, Contention, SimParams

LAW = AcceptanceLaw((F(1, 5), F(1, 10), F(3, 10), F(2, 5)))   # k = 3, not i.i.d.

# (c, k, SP, v, N): drafter faster and slower than the servers, too few servers (a queue that
# grows), v != 1, windows longer than the run
CONFIGS = [(F(1, 100), 1, 7, None, 40), (F(1, 100), 3, 2, None, 40), (F(1, 20), 2, 3, F(3, 2), 36),
           (F(1, 10), 3, 7, None, 30), (F(1, 3), 2, 2, F(1, 2), 30), (F(1, 2), 1, 7, None, 30),
           (F(9, 10), 3, 3, F(3, 2), 30), (F(3, 2), 2, 4, None, 25), (F(1, 7), 5, 3, None, 33),
           (F(1, 4), 40, 7, None, 20)]


@pytest.mark.parametrize(("c", "k", "sp", "v", "n"), CONFIGS)
def test_fast_spines_are_the_reference_spines_tick_for_tick(c: F, k: int, sp: int,
                                                           v: F | None, n: int) -> None:
    p = SimParams("dsi", c, F(1, 2), k, n, "event", sp, verify_cost=v)
    family, reference = spine_family(p, n), spines(p, n)
    for left in range(1, n + 1):
        fast, ref = family.spine(left), reference[left - 1]
        assert np.array_equal(fast.ticks, ref.ticks), (left, fast.ticks, ref.ticks)
        assert fast.complete == ref.complete


@pytest.mark.parametrize(("c", "k", "sp", "v", "n"), CONFIGS)
def test_fast_expectation_equals_the_reference_exactly(c: F, k: int, sp: int, v: F | None,
                                                      n: int) -> None:
    for a in (F(1, 3), F(9, 10)):
        p = SimParams("dsi", c, a, k, n, "event", sp, verify_cost=v)
        assert fast_eligible(p)
        assert dsi_event_exact(p) == dsi_event_exact_reference(p)
    if k == LAW.k:
        p = SimParams("dsi", c, None, k, n, "event", sp, verify_cost=v, acceptance=LAW)
        assert dsi_event_exact(p) == dsi_event_exact_reference(p)


def test_fast_grid_equals_the_reference_within_float_rounding() -> None:
    a = np.clip(np.linspace(0, 1, 11), 0.01, 0.99)
    for c, k, sp in [(F(1, 100), 1, 7), (F(1, 20), 4, 7), (F(1, 2), 3, 3), (F(1, 1), 6, 7)]:
        p = SimParams("dsi", c, F(1, 2), k, 120, "event", sp)
        fast, ref = dsi_event_grid(p, a), dsi_event_grid_reference(p, a)
        assert np.max(np.abs(fast / ref - 1)) < 1e-12
    p = SimParams("dsi", 0.07, 0.5, 3, 50, "event", 3)   # float costs: float ticks
    assert fast_eligible(p)
    assert math.isclose(dsi_event_exact(p), dsi_event_exact_reference(p), rel_tol=1e-12)


@pytest.mark.parametrize("extra", [
    {"target_first": F(5, 2)},                           # TTFT != TPOT
    {"drafter_first": F(1, 3), "target_first": F(3, 2)},
    {"queue": "lifo"}, {"sp_degree": 1},
    {"contention": Contention((1.0, 1.5), (1.0, 1.2))}])
def test_configurations_outside_the_fast_path_take_the_reference(extra: dict[str, Any]
                                                                 ) -> None:
    kw: dict[str, Any] = {"sp_degree": 3, **extra}
    p = SimParams("dsi", F(1, 10), F(2, 3), 2, 15, "event", **kw)
    assert not fast_eligible(p)
    assert dsi_event_exact(p) == dsi_event_exact_reference(p)


# -- the law itself --------------------------------------------------------------------------------

def test_iid_law_counts_and_survival() -> None:
    law = AcceptanceLaw.iid(F(2, 3), 3)
    assert law.probabilities == (F(1, 3), F(2, 9), F(4, 27), F(8, 27))
    assert [law.survival(i) for i in range(8)] == [F(2, 3) ** i for i in range(8)]
    assert law.mean_committed() == sum(F(2, 3) ** j for j in range(4))
    assert AcceptanceLaw.from_counts({0: 2, 3: 6}, 3).probabilities == (F(1, 4), 0, 0, F(3, 4))
    assert AcceptanceLaw.from_mapping({1: 0.5, 3: 0.5}, 3).probabilities == (0.0, 0.5, 0.0, 0.5)
    assert LAW.survival(5) == LAW.full * (F(3, 10) + F(2, 5))
    assert LAW.truncated(1) == (F(1, 5), F(4, 5))


@pytest.mark.parametrize("bad", [
    lambda: AcceptanceLaw((F(1, 2), F(1, 3))),                   # sums to 5/6
    lambda: AcceptanceLaw((F(3, 2), F(-1, 2))),                  # negative
    lambda: AcceptanceLaw((float("nan"), 1.0)),
    lambda: AcceptanceLaw((1.0,)),                               # k = 0
    lambda: AcceptanceLaw.from_mapping({4: F(1)}, 3),            # length outside 0..k
    lambda: AcceptanceLaw.from_counts([1, 2], 3),
    lambda: AcceptanceLaw.from_counts([0, 0, 0], 2),
    lambda: AcceptanceLaw.iid(F(3, 2), 2),
    lambda: dr.expected_latency("si", c=F(1, 2), lookahead=2, n_tokens=4, acceptance=LAW),
    lambda: dr.expected_latency("si", c=F(1, 2), a=F(1, 2), lookahead=3, n_tokens=4,
                                acceptance=LAW),
    lambda: dr.expected_latency("si", c=F(1, 2), lookahead=3, n_tokens=4),
    lambda: dr.expected_latency("si", c=F(1, 2), lookahead=3, n_tokens=4,
                                acceptance=[1, 0]),  # type: ignore[arg-type]
])
def test_bad_laws_are_refused_by_name(bad: Callable[[], object]) -> None:
    with pytest.raises(dr.InvalidParameterError):
        bad()


# -- the i.i.d. law is the rate a ------------------------------------------------------------------

KW: list[tuple[Algorithm, dict[str, Any]]] = [
      ("nonsi", {}), ("si", {}), ("si", {"verify_cost": F(3, 2)}), ("dsi", {}),
      ("dsi", {"model": "event", "sp_degree": 3}),
      ("dsi", {"model": "event", "sp_degree": 7, "verify_cost": F(5, 4)}),
      ("dsi", {"model": "event", "sp_degree": 2, "target_first": F(5, 2)}),
      ("dsi", {"model": "event", "sp_degree": 2, "queue": "lifo"})]


@pytest.mark.parametrize(("algorithm", "extra"), KW)
def test_the_iid_law_gives_the_rate_a_value_exactly(algorithm: Algorithm,
                                                    extra: dict[str, Any]) -> None:
    for c, a, k, n in [(F(1, 10), F(3, 4), 3, 17), (F(1, 2), F(1, 3), 2, 12),
                       (F(1, 20), F(9, 10), 4, 21)]:
        kw: dict[str, Any] = {"c": c, "lookahead": k, "n_tokens": n, **extra}
        rate = dr.expected_latency(algorithm, a=a, **kw)
        law = dr.expected_latency(algorithm, acceptance=AcceptanceLaw.iid(a, k),
                                  **kw)
        assert isinstance(law, F) and law == rate
        mapping = dict(enumerate(AcceptanceLaw.iid(a, k).probabilities))
        assert dr.expected_latency(algorithm, acceptance=mapping,
                                   **kw) == rate
        floats = dr.expected_latency(algorithm, acceptance=AcceptanceLaw.iid(float(a), k),
                                     **kw)
        assert math.isclose(floats, rate, rel_tol=1e-12)


# -- other laws: brute force ---------------------------------------------------------------------

def _enumerate(run: Callable[[list[int]], tuple[float | F, int]], law: AcceptanceLaw) -> F:
    """``E[latency]`` over every sequence of window lengths a run consumes: ``run(lengths)``
    returns (latency, lengths used) or raises IndexError when it needs one more."""
    total = F(0)
    stack: list[tuple[list[int], F]] = [([], F(1))]
    while stack:
        lengths, prob = stack.pop()
        try:
            latency, _ = run(lengths)
        except IndexError:
            stack.extend((lengths + [j], prob * F(pj)) for j, pj in enumerate(law.probabilities)
                         if pj)
            continue
        total += prob * F(latency)
    return total


def test_si_with_a_law_is_the_enumeration_of_window_lengths() -> None:
    c, n = F(1, 4), 9

    def run(lengths: list[int]) -> tuple[F, int]:
        done, cost, used = 0, F(0), 0
        while done < n:
            m = min(LAW.k, n - done - 1)
            cost += m * c + 1                   # v = 1; an iteration without drafts costs 1
            if m:
                done += min(lengths[used], m) + 1
                used += 1
            else:
                done += 1
        return cost, used

    assert dr.expected_latency("si", c=c, lookahead=3, n_tokens=n, acceptance=LAW) == \
        _enumerate(run, LAW)
    assert LAW.mean_committed() == 1 + F(1, 10) + 2 * F(3, 10) + 3 * F(2, 5)


def test_paper_dsi_with_a_law_is_the_enumeration_of_window_lengths() -> None:
    c, k, n = F(1, 5), 3, 9

    def run(lengths: list[int]) -> tuple[F, int]:
        t, cost, used = 0, F(0), 0
        while t < n:
            r = n - 1 - t
            g, drafts = 0, 0
            while True:                          # windows of the segment
                if drafts >= r:
                    break
                length = lengths[used]
                used += 1
                window = min(k, r - drafts)
                drafts += window
                g += min(length, window)
                if length < window:
                    break
            if g < r:
                tokens, drafts = g + 1, min((g // k + 1) * k, r)
            else:
                tokens, drafts = r + 1, r
            cost += min(drafts * c + 1, F(tokens))
            t += tokens
        return cost, used

    assert dr.expected_latency("dsi", c=c, lookahead=k, n_tokens=n, acceptance=LAW) == \
        _enumerate(run, LAW)


@pytest.mark.parametrize(("c", "sp", "extra"), [
    (F(1, 5), 3, {}), (F(1, 20), 2, {}), (F(3, 5), 7, {"verify_cost": F(3, 2)}),
    (F(1, 5), 2, {"target_first": F(2), "drafter_first": F(1, 3)})])
def test_event_dsi_with_a_law_is_the_enumeration_of_window_lengths(
        c: F, sp: int, extra: dict[str, Any]) -> None:
    """Windows: the k drafts a verification task decides, counted from the last restart."""
    n = 8
    p = SimParams("dsi", c, None, 3, n, "event", sp, acceptance=LAW, **extra)

    def run(lengths: list[int]) -> tuple[F, int]:
        drawn: dict[tuple[int, int], int] = {}
        engine = make_engine(p, n, True, 0, lambda _: True, False)

        def decide(position: int) -> bool:
            key = (engine.origin, (position - engine.origin) // 3)
            if key not in drawn:
                drawn[key] = lengths[len(drawn)]
            return drawn[key] > (position - engine.origin) % 3

        engine.decide = decide
        time = engine.run()[-1].time
        return F(time), len(drawn)

    assert dsi_event_exact(p) == _enumerate(run, LAW)


# -- Monte Carlo -----------------------------------------------------------------------------------

Z = 6.5   # P(|Z| > 6.5) = 8.0e-11 per two-sided bound (normal approximation)


def _within(sample: np.ndarray, exact: float) -> None:
    se = sample.std(ddof=1) / math.sqrt(sample.size)
    assert abs(sample.mean() - exact) < Z * se, (sample.mean(), exact, se)
    assert 0.05 * exact > 11 * se       # power: a 5 % bias is > 11 SE, Phi(11 - 6.5) > 0.99999


# 6 bounds at 8.0e-11 each: alpha = 4.8e-10 <= 1e-9
@pytest.mark.montecarlo(alpha=4.8e-10)
def test_monte_carlo_with_laws_converges_to_the_exact_values() -> None:
    """The i.i.d. law against the rate-a exact value, and a non-i.i.d. law against its exact
    value, for SI, the paper model's DSI and the event model's DSI."""
    rng = np.random.default_rng(2024)
    kw: dict[str, Any] = {"c": F(1, 10), "lookahead": 3, "n_tokens": 40}
    iid = AcceptanceLaw.iid(F(3, 4), 3)
    cases: list[tuple[Algorithm, dict[str, Any]]] = [
        ("si", {}), ("dsi", {}), ("dsi", {"model": "event", "sp_degree": 3})]
    for algorithm, extra in cases:
        exact_rate = float(dr.expected_latency(algorithm, a=F(3, 4), **kw,
                                               **extra))
        sample = dr.simulate_latency(algorithm, acceptance=iid, n_repeats=4000,
                                     seed=rng, **kw, **extra)
        _within(sample, exact_rate)
        exact_law = float(dr.expected_latency(algorithm, acceptance=LAW, **kw,
                                              **extra))
        sample = dr.simulate_latency(algorithm, acceptance=LAW, n_repeats=4000,
                                     seed=rng, **kw, **extra)
        _within(sample, exact_law)


# 1 bound at 8.0e-11
@pytest.mark.montecarlo(alpha=8e-11)
def test_direct_event_runs_with_a_law_average_to_the_exact_value() -> None:
    p = SimParams("dsi", F(1, 10), None, 3, 30, "event", 3, acceptance=LAW)
    rng = np.random.default_rng(7)
    sample = np.array([float(event_run(p, rng)[-1].time) for _ in range(1500)])
    _within(sample, float(dsi_event_exact(p)))


# -- block decisions with fixed windows (decisions="window") -------------------------------------

@pytest.mark.parametrize(("c", "k", "sp", "v", "n"), CONFIGS)
def test_window_decisions_fast_path_equals_the_reference(c: F, k: int, sp: int, v: F | None,
                                                         n: int) -> None:
    """The spine family's shortcut (a queued one-draft last window excepted) gives the
    reference spines tick for tick, and the fast programme the reference value exactly."""
    p = SimParams("dsi", c, F(1, 2), k, n, "event", sp, verify_cost=v, decisions="window")
    assert fast_eligible(p)
    family, reference = spine_family(p, n), spines(p, n)
    for left in range(1, n + 1):
        fast, ref = family.spine(left), reference[left - 1]
        assert np.array_equal(fast.ticks, ref.ticks), (left, fast.ticks, ref.ticks)
        assert fast.complete == ref.complete
    assert dsi_event_exact(p) == dsi_event_exact_reference(p)
    if k == LAW.k:
        p = SimParams("dsi", c, None, k, n, "event", sp, verify_cost=v, acceptance=LAW,
                      decisions="window")
        assert dsi_event_exact(p) == dsi_event_exact_reference(p)


def test_window_decisions_with_one_draft_per_window_are_position_decisions() -> None:
    """``k = 1``: a window is complete once its draft is delivered and its one row decides it,
    so the two committers take the same decisions at the same instants."""
    for c, sp, extra in [(F(1, 3), 2, {}), (F(1, 10), 7, {}), (F(1), 1, {}),
                         (F(1, 5), 3, {"target_first": F(2), "drafter_first": F(1, 3)})]:
        kw: dict[str, Any] = {"c": c, "a": F(2, 3), "lookahead": 1, "n_tokens": 15,
                              "model": "event", "sp_degree": sp, **extra}
        assert dr.expected_latency("dsi", decisions="window", **kw) == \
            dr.expected_latency("dsi", **kw)


@pytest.mark.parametrize(("c", "sp", "extra"), [
    (F(1, 5), 3, {}), (F(1, 20), 2, {}), (F(1), 2, {}), (F(1, 3), 1, {}),
    (F(3, 5), 7, {"verify_cost": F(3, 2)}),
    (F(1, 5), 2, {"target_first": F(2), "drafter_first": F(1, 3)}),
    (F(1, 4), 3, {"queue": "lifo"})])
def test_window_decisions_are_the_enumeration_of_window_lengths(
        c: F, sp: int, extra: dict[str, Any]) -> None:
    """Direct engine runs, one length per decided window (``min(L, m)`` accepted), averaged
    over every sequence of lengths: the exact programme's value."""
    n = 8
    p = SimParams("dsi", c, None, 3, n, "event", sp, acceptance=LAW, decisions="window",
                  **extra)

    def run(lengths: list[int]) -> tuple[F, int]:
        used = 0
        engine = make_engine(p, n, True, 0, lambda _: True, False)

        def decide_window(first: int, m: int) -> int:
            nonlocal used
            used += 1
            return min(lengths[used - 1], m)

        engine.decide_window = decide_window  # type: ignore[method-assign]
        return F(engine.run()[-1].time), used

    assert dsi_event_exact(p) == _enumerate(run, LAW)


def test_window_decisions_are_slower_than_position_decisions_here() -> None:
    """The same law, later commits: fixed windows give up the frontier task's early decision
    of a drafted position (docs/block-vs-token.md); with ``c = 1`` and ``SP = 2`` even slower
    than non-SI (``N``), which position decisions never are."""
    kw: dict[str, Any] = {"acceptance": LAW, "lookahead": 3, "n_tokens": 12, "model": "event"}
    for c, sp in [(F(1, 10), 3), (F(1, 3), 2), (F(1), 2)]:
        window = dr.expected_latency("dsi", c=c, sp_degree=sp, decisions="window", **kw)
        position = dr.expected_latency("dsi", c=c, sp_degree=sp, **kw)
        assert window > position, (c, sp, window, position)
    assert dr.expected_latency("dsi", c=F(1), sp_degree=2, decisions="window", **kw) > 12
    assert dr.expected_latency("dsi", c=F(1), sp_degree=2, **kw) <= 12


@pytest.mark.parametrize("bad", [
    lambda: dr.expected_latency("dsi", c=F(1, 2), a=F(1, 2), lookahead=2, n_tokens=4,
                                model="event", sp_degree=2, decisions="block"),
    lambda: dr.expected_latency("dsi", c=F(1, 2), a=F(1, 2), lookahead=2, n_tokens=4,
                                decisions="window"),                       # the paper model
    lambda: dr.simulate_latency("dsi", c=F(1, 2), a=F(1, 2), lookahead=2, n_tokens=4,
                                n_repeats=2, seed=0, model="event", sp_degree=2,
                                decisions=None),  # type: ignore[arg-type]
])
def test_bad_decisions_are_refused_by_name(bad: Callable[[], object]) -> None:
    with pytest.raises(dr.InvalidParameterError, match="decisions"):
        bad()


def test_si_and_nonsi_do_not_depend_on_decisions() -> None:
    algorithms: tuple[Algorithm, ...] = ("nonsi", "si")
    for algorithm in algorithms:
        kw: dict[str, Any] = {"c": F(1, 4), "acceptance": LAW, "lookahead": 3, "n_tokens": 10}
        assert dr.expected_latency(algorithm, decisions="window", **kw) == \
            dr.expected_latency(algorithm, **kw)


# 2 bounds at 8.0e-11 each (Z = 6.5, two-sided, normal approximation): alpha = 1.6e-10
@pytest.mark.montecarlo(alpha=1.6e-10)
def test_window_decisions_monte_carlo_converges_to_the_exact_value() -> None:
    """The vectorised simulation (restart exits from the window spines) and direct engine runs
    (one length drawn per decided window) against the exact value; power: a 5 % bias is more
    than 11 standard errors (`_within`)."""
    kw: dict[str, Any] = {"c": F(1, 10), "acceptance": LAW, "lookahead": 3, "n_tokens": 30,
                          "model": "event", "sp_degree": 3, "decisions": "window"}
    exact = float(dr.expected_latency("dsi", **kw))
    _within(dr.simulate_latency("dsi", n_repeats=4000, seed=31, **kw), exact)
    p = SimParams("dsi", F(1, 10), None, 3, 30, "event", 3, acceptance=LAW, decisions="window")
    rng = np.random.default_rng(32)
    _within(np.array([float(event_run(p, rng)[-1].time) for _ in range(2000)]), exact)
