"""The event model: DSI of docs/dsi-semantics.md at the acceptance level, exactly.

The engine (`dsi_ref.sim.event_engine`) replays the rules of the token-level
`dsi_ref.decoders.dsi` with tokens abstracted away: the verification of a present draft is an
independent Bernoulli(``a``) acceptance (or drawn from an acceptance law per window); a bonus (no
draft at the frontier) draws nothing. This module is its public face: the exact expectation
(`dsi_event_exact`, over a grid of rates `dsi_event_grid`) and the Monte Carlo simulation
(`event_run`, `simulate_event`), both from the spines of `dsi_ref.sim.event_spines`.

Exact expectation (Note: "renewal at every restart" in docs/reproducing-the-paper.md). A
rejection or a bonus preempts every task, restarts the frontier task and the drafter: the state
after it is only ``(R, u)`` = (tokens left, verification servers already used — it matters only
for a server's first forward, TTFT). Between restarts the run is deterministic until the first
rejection, so with the *spine* = the run from ``(R, u)`` in which every draft is accepted,
committing position ``i`` at time ``τ_i``::

    E(R, u) = Σ_i a^i (1 − a) [τ_i + E(R − i − 1, u_i)]   (draft at i rejected)
            + a^b [τ_b + E(R − b − 1, u_b)]                (first bonus at b, if any)
            + a^R τ_{R−1}                                   (everything accepted)

Times are kept exact: rational costs are scaled to integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .event_engine import Commit, make_engine
from .event_spines import (
    Spine,
    SpineFamily,
    SpineTable,
    fast_eligible,
    spine,
    spine_family,
    spines,
    unit_mode,
)
from .params import Num, SimParams

__all__ = [
    "Commit",
    "Spine",
    "dsi_event_exact",
    "dsi_event_exact_reference",
    "dsi_event_grid",
    "dsi_event_grid_reference",
    "event_run",
    "simulate_event",
    "spine",
    "spines",
]


# -- the law of the first rejection ---------------------------------------------------------------

@dataclass(frozen=True)
class _Windows:
    """The survival function ``S(i) = q^⌊i/K⌋ T(i mod K)`` of the drafts accepted after a
    restart (`dsi_ref.sim.acceptance`), as numbers or as arrays over a grid of rates: period
    ``K``, ``q = P(L = K)``, ``ell[j] = P(L = j)`` and ``at_least[j] = P(L >= j)`` for
    ``j < K``. The rate ``a`` is ``K = 1``, ``q = a``, ``ell = (1 − a,)``."""

    period: int
    q: Any
    ell: tuple[Any, ...]
    at_least: tuple[Any, ...]

    @classmethod
    def of(cls, p: SimParams) -> _Windows:
        exact = p.exact
        if p.acceptance is None:
            a: Num = Fraction(p.rate) if exact else float(p.rate)
            return cls(1, a, (1 - a,), (a ** 0,))
        law = p.acceptance
        def conv(x: Num) -> Num:
            return Fraction(x) if exact else float(x)
        return cls(law.k, conv(law.full), tuple(conv(x) for x in law.probabilities[:-1]),
                   tuple(conv(law.at_least(j)) for j in range(law.k)))

    @classmethod
    def rates(cls, a_values: NDArray[np.float64]) -> _Windows:
        a = np.asarray(a_values, float)
        return cls(1, a, (1 - a,), (np.ones_like(a),))

    def weight(self, i: int) -> Any:
        """``P(G = i)``: the first rejection is draft ``i``."""
        return self.q ** (i // self.period) * self.ell[i % self.period]

    def survival(self, i: int) -> Any:
        """``S(i) = P(G >= i)``."""
        return self.q ** (i // self.period) * self.at_least[i % self.period]

    def draw(self, size: int, cap: int, rng: np.random.Generator) -> NDArray[np.int64]:
        """``size`` draws of ``G`` (capped at ``cap``): full windows are geometric, then the
        accepted length of the first window that is not full."""
        q = float(self.q)
        if q >= 1:
            return np.full(size, cap, dtype=np.int64)
        full = np.zeros(size, dtype=np.int64) if q <= 0 else \
            rng.geometric(1 - q, size=size).astype(np.int64) - 1
        if self.period == 1:
            partial = np.zeros(size, dtype=np.int64)
        else:
            probs = np.array([float(x) for x in self.ell]) / (1 - q)
            partial = rng.choice(self.period, size=size, p=probs / probs.sum()).astype(np.int64)
        drawn: NDArray[np.int64] = np.minimum(full * self.period + partial, cap)
        return drawn


# -- exact expectations ----------------------------------------------------------------------------

def dsi_event_exact_reference(p: SimParams) -> Num:
    """Exact ``E[T_DSI]`` of the event model by the direct dynamic programme (the reference the
    fast path `dsi_event_exact` is tested against): over restart states ``(tokens left,
    servers used)``, one spine per state from `spines`, ``O(N²)`` per configuration.

    >>> dsi_event_exact_reference(SimParams("dsi", c=Fraction(1, 2), a=Fraction(1, 2),
    ...                                     lookahead=1, n_tokens=2, model="event",
    ...                                     sp_degree=2))
    Fraction(7, 4)
    """
    exact = p.exact
    unit = unit_mode(p)
    table = SpineTable(p, reference=True)
    if p.acceptance is None:
        a: Num = Fraction(p.rate) if exact else float(p.rate)

        def weight(i: int) -> Num:
            return a ** i * (1 - a)

        def surv(i: int) -> Num:
            return a ** i
    else:
        windows = _Windows.of(p)
        weight, surv = windows.weight, windows.survival

    @cache
    def value(left: int, used: int, fresh: bool) -> Num:
        if left == 0:
            return Fraction(0) if exact else 0.0
        total: Num = Fraction(0) if exact else 0.0
        commits = table.get(left, used, fresh).commits
        for cm in commits:
            i = cm.position
            nxt = value(left - i - 1, 0 if unit else cm.used, False)
            if cm.kind == "bonus":
                return total + surv(i) * (cm.time + nxt)
            total += weight(i) * (cm.time + nxt)
        return total + surv(left) * commits[-1].time

    return value(p.n_tokens, 0, True)


def _family_dp(family: SpineFamily, n: int, windows: _Windows, exact: bool) -> Any:
    """``E(n)`` (in ticks) from the spines of ``family``, for ``windows`` (numbers or arrays).

    With ``r_i = P(G = i)`` and spine ``R`` = ``τ_0 … τ_{m−1}``::

        E(R) = Σ_{i<m'} r_i (τ_i + E(R − 1 − i)) + [complete] S(R) τ_{R−1}
                                                + [bonus at m − 1] S(m − 1) (τ_{m−1} + E(R − m))

    (``m' = m`` when complete, ``m − 1`` otherwise). The sums over a prefix shared with the base
    spine are prefix sums of ``r_i τ_i``; for a complete spine the continuation is
    ``Σ_{j<K} ell_j V(R − 1 − j)`` with ``V(x) = E(x) + q V(x − K)``. Every term is ``>= 0``: the
    float path has no cancellation.
    """
    period = windows.period
    if exact:
        zero: Any = Fraction(0)
        weights: Any = [windows.weight(i) for i in range(n + 1)]
        survival: Any = [windows.survival(i) for i in range(n + 1)]
        base: Any = [int(t) for t in family.base]
        value: Any = [zero] * (n + 1)
        carried: Any = [zero] * (n + 1)      # V

        def dot(lo: int, hi: int, rows: Any) -> Any:
            return sum((weights[i] * rows[i - lo] for i in range(lo, hi)), zero)
    else:
        zero = np.zeros_like(np.atleast_1d(np.asarray(windows.q, float)))
        weights = np.array([windows.weight(i) * np.ones_like(zero) for i in range(n + 1)])
        survival = np.array([windows.survival(i) * np.ones_like(zero) for i in range(n + 1)])
        base = family.base.astype(float)
        value = np.zeros((n + 1, zero.size))
        carried = np.zeros((n + 1, zero.size))

        def dot(lo: int, hi: int, rows: Any) -> Any:
            rows = np.asarray(rows, float)
            if rows.ndim == 1:
                rows = rows[:, None]
            return (weights[lo:hi] * rows).sum(axis=0)
    prefix_sum = [zero]
    for i in range(min(len(base), n)):
        prefix_sum.append(prefix_sum[-1] + weights[i] * base[i])
    for left in range(1, n + 1):
        start = family.prefix[left - 1]
        tail = [int(t) for t in family.tails[left - 1]] if exact else \
            family.tails[left - 1].astype(float)
        m = start + len(tail)
        done = m if family.complete[left - 1] else m - 1
        last = base[m - 1] if m - 1 < start else tail[m - 1 - start]
        total = prefix_sum[min(start, done)]
        if done > start:
            total = total + dot(start, done, tail[: done - start])
        if family.complete[left - 1]:
            total = total + survival[left] * last
            for j in range(min(period, left)):
                total = total + windows.ell[j] * carried[left - 1 - j]
        else:
            total = total + dot(0, done, [value[left - 1 - i] for i in range(done)]) \
                + survival[m - 1] * (last + value[left - m])
        value[left] = total
        carried[left] = total + (windows.q * carried[left - period] if left >= period else zero)
    return value[n]


def dsi_event_exact(p: SimParams) -> Num:
    """Exact ``E[T_DSI]`` of the event model (a ``Fraction`` for rational inputs).

    Dynamic programming over restart states ``(tokens left, servers used)`` (module docstring).
    For `fast_eligible` configurations (no prefill, independent servers, FIFO, ``SP >= 2``)
    the spines come from `spine_family` and the programme runs in ``O(N K)`` beyond the spines'
    own tails (`_family_dp`); otherwise it is `dsi_event_exact_reference`. The two are equal
    (exactly for ``Fraction``s: tests/test_sim_acceptance_law.py).

    >>> dsi_event_exact(SimParams("dsi", c=Fraction(1, 2), a=Fraction(1, 2), lookahead=1,
    ...                           n_tokens=2, model="event", sp_degree=2))
    Fraction(7, 4)
    """
    if not fast_eligible(p):
        return dsi_event_exact_reference(p)
    family = spine_family(p, p.n_tokens)
    ticks = _family_dp(family, p.n_tokens, _Windows.of(p), p.exact)
    if p.exact:
        return Fraction(ticks) / family.scale
    return float(np.asarray(ticks, float).ravel()[0]) / family.scale


def dsi_event_grid_reference(p: SimParams, a_values: NDArray[np.float64]) -> NDArray[np.float64]:
    """`dsi_event_grid` by the direct programme (its reference): tokens left ``1, 2, …, N``
    with numpy over the spine and over ``a``, one spine per state from `spines`."""
    a = np.asarray(a_values, float)
    n = p.n_tokens
    unit = unit_mode(p)
    assert p.sp_degree is not None
    states = 1 if unit else p.sp_degree
    table = SpineTable(p, reference=True)
    power = a[None, :] ** np.arange(n + 1)[:, None]             # a^i, shape (N + 1, len(a))
    value = np.zeros((n + 1, states, a.size))

    def solve(left: int, used: int, fresh: bool) -> NDArray[np.float64]:
        path = table.get(left, used, fresh)
        m = len(path)
        times = path.times[:, None]
        cont = value[left - np.arange(m) - 1, 0 if unit else path.used]   # (m, len(a))
        weight = power[:m] * (1 - a[None, :])
        if path.complete:
            tail = power[left] * times[-1]
        else:
            weight[-1] = power[m - 1]                           # the bonus: no draw
            tail = np.zeros(a.size)
        result: NDArray[np.float64] = (weight * (times + cont)).sum(axis=0) + tail
        return result

    for left in range(1, n):
        for used in range(states):
            value[left, used] = solve(left, used, False)
    return solve(n, 0, True)


def dsi_event_grid(p: SimParams, a_values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Exact ``E[T_DSI]`` (floats) of the event model for every ``a`` in ``a_values`` at once
    (the spines do not depend on ``a``); ``p.a`` and ``p.acceptance`` are ignored.

    `fast_eligible` configurations: the spines of `spine_family` and `_family_dp` over the
    array of rates (every term ``>= 0``, so it agrees with `dsi_event_grid_reference` to float
    rounding, within ``1e-12`` relative: tests/test_sim_acceptance_law.py); others: the
    reference.
    """
    if not fast_eligible(p):
        return dsi_event_grid_reference(p, a_values)
    family = spine_family(p, p.n_tokens)
    ticks = _family_dp(family, p.n_tokens, _Windows.rates(a_values), exact=False)
    result: NDArray[np.float64] = np.asarray(ticks, float) / family.scale
    return result


# -- Monte Carlo -----------------------------------------------------------------------------------

class _WindowDecider:
    """Acceptances drawn per window from a law: the draft at offset ``j`` of its window (counted
    from the last restart, ``origin``) is accepted iff ``L > j``, ``L`` drawn once per window."""

    def __init__(self, p: SimParams, rng: np.random.Generator) -> None:
        law = p.law
        self.k, self.rng = law.k, rng
        self.probs = np.array([float(x) for x in law.probabilities])
        self.probs = self.probs / self.probs.sum()
        self.drawn: dict[tuple[int, int], int] = {}

    def __call__(self, position: int, origin: int) -> bool:
        window, offset = divmod(position - origin, self.k)
        key = (origin, window)
        if key not in self.drawn:
            self.drawn[key] = int(self.rng.choice(self.k + 1, p=self.probs))
        return self.drawn[key] > offset


def event_run(p: SimParams, rng: np.random.Generator) -> list[Commit]:
    """One run of the event model with acceptances drawn from ``rng``: with a rate ``a``, one
    uniform per verified draft, in commit order; with a law (``p.acceptance``), one accepted
    length per window, when its first draft is decided (`_WindowDecider`). With
    ``decisions="window"``: one accepted length ``L`` per window (from ``p.law``, the i.i.d. law
    of ``a`` when a rate is given), drawn when the window is decided; it accepts
    ``min(L, m)`` of its ``m`` drafts."""
    if p.decisions == "window":
        law = p.law
        probs = np.array([float(x) for x in law.probabilities])
        probs = probs / probs.sum()
        engine = make_engine(p, p.n_tokens, True, 0, lambda _: True, False)

        def decide_window(first: int, m: int) -> int:
            return min(int(rng.choice(law.k + 1, p=probs)), m)

        engine.decide_window = decide_window  # type: ignore[method-assign]
        return engine.run()
    if p.acceptance is None:
        a = float(p.rate)
        return make_engine(p, p.n_tokens, True, 0, lambda _: bool(rng.random() < a), False).run()
    decider = _WindowDecider(p, rng)
    engine = make_engine(p, p.n_tokens, True, 0, lambda _: True, False)
    engine.decide = lambda position: decider(position, engine.origin)
    return engine.run()


def simulate_event(p: SimParams, n_repeats: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """Latencies of ``n_repeats`` runs of the event model, vectorised over runs.

    Each run is a sequence of restarts; from a restart state the exit (first rejection or
    bonus) is drawn for all runs in that state at once from the spine's exit law. Randomness:
    per round, one vector of ``G`` draws for the runs still going (a rate: geometric; a law:
    `_Windows.draw`).
    """
    n = p.n_tokens
    unit = unit_mode(p)
    windows = None if p.acceptance is None else _Windows.of(p)
    a = 0.0 if windows is not None else float(p.rate)
    table = SpineTable(p)
    latency = np.zeros(n_repeats)
    left = np.full(n_repeats, n, dtype=np.int64)
    used = np.zeros(n_repeats, dtype=np.int64)
    fresh = True
    while True:
        live = np.flatnonzero(left > 0)
        if live.size == 0:
            return latency
        if windows is not None:
            g = windows.draw(live.size, n, rng)
        elif a >= 1:
            g = np.full(live.size, n, dtype=np.int64)
        elif a <= 0:
            g = np.zeros(live.size, dtype=np.int64)
        else:
            g = rng.geometric(1 - a, size=live.size).astype(np.int64) - 1
        state = left[live] * (p.sp_degree or 1) + (0 if unit else used[live])
        for key in np.unique(state):
            group = state == key
            idx = live[group]
            path = table.get(int(left[idx[0]]), int(used[idx[0]]), fresh)
            exit_at = np.minimum(g[group], len(path) - 1)  # a rejection, the bonus, or the end
            latency[idx] += path.times[exit_at]
            left[idx] -= exit_at + 1
            used[idx] = 0 if unit else path.used[exit_at]
        fresh = False
