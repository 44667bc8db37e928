"""The simulator's per-task overhead (``task_overhead``, a remote target server's call cost).

Every target-server task of the event model's DSI costs its forward plus ``o``. Without prefill
and with ``verify_cost`` 1, that is a target forward of ``1 + o``: measured in that unit, the run
is the overhead-free run with drafter cost ``c / (1 + o)``, exactly.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

import dsi_ref as dr
from dsi_ref.sim import expected_latency, simulate_latency

C, A = Fraction(1, 10), Fraction(3, 5)


@pytest.mark.parametrize("sp_degree", [1, 2, 4])
@pytest.mark.parametrize("overhead", [Fraction(1, 20), Fraction(1, 3)])
def test_an_overhead_is_a_slower_target_forward_exactly(sp_degree: int,
                                                         overhead: Fraction) -> None:
    with_overhead = expected_latency("dsi", c=C, a=A, lookahead=3, n_tokens=12, model="event",
                                     sp_degree=sp_degree, task_overhead=overhead)
    rescaled = expected_latency("dsi", c=C / (1 + overhead), a=A, lookahead=3, n_tokens=12,
                                model="event", sp_degree=sp_degree)
    assert isinstance(with_overhead, Fraction)
    assert with_overhead == rescaled * (1 + overhead)


def test_no_overhead_is_the_default_and_non_si_and_si_are_unchanged() -> None:
    common: dict[str, Any] = {"c": C, "a": A, "lookahead": 3, "n_tokens": 12}
    assert expected_latency("dsi", model="event", sp_degree=3, task_overhead=0, **common) \
        == expected_latency("dsi", model="event", sp_degree=3, **common)
    for algorithm in ("nonsi", "si"):
        assert expected_latency(algorithm, task_overhead=Fraction(1, 5), **common) \
            == expected_latency(algorithm, **common)
    more = [expected_latency("dsi", model="event", sp_degree=3, task_overhead=o, **common)
            for o in (0, Fraction(1, 50), Fraction(1, 10))]
    assert more == sorted(more) and more[0] < more[-1]


def test_the_overhead_is_checked() -> None:
    with pytest.raises(dr.InvalidParameterError, match="task_overhead"):
        expected_latency("dsi", c=C, a=A, lookahead=3, n_tokens=5, task_overhead=0.1)
    with pytest.raises(dr.InvalidParameterError, match="task_overhead"):
        expected_latency("dsi", c=C, a=A, lookahead=3, n_tokens=5, model="event", sp_degree=2,
                         task_overhead=-0.1)


# alpha: |mean - E[T]| <= 6 standard errors fails w.p. < 2e-9 (two-sided normal tail at 6 SE)
@pytest.mark.montecarlo(alpha=2e-9)
def test_monte_carlo_with_an_overhead_converges_to_the_exact_expectation() -> None:
    common: dict[str, Any] = {"c": 0.1, "a": 0.6, "lookahead": 3, "n_tokens": 12, "model": "event",
              "sp_degree": 3, "task_overhead": 0.05}
    exact = float(expected_latency("dsi", **common))
    runs = simulate_latency("dsi", n_repeats=4000, seed=3, **common)
    assert abs(runs.mean() - exact) <= 6 * runs.std(ddof=1) / len(runs) ** 0.5
