"""The paper model: the official offline simulator's SI and DSI, exactly and by Monte Carlo.

Acceptance level (docs/paper.md): each draft is accepted i.i.d. with rate ``a`` up to the first
rejection, so the accepted drafts before a rejection, ``G``, have ``P(G >= j) = a^j``.

* non-SI: ``T = N``.
* SI: an iteration with ``L`` tokens left drafts ``m = min(k, L − 1)`` tokens, costs ``m c + v``
  (``v`` = ``verify_cost``, 1 by default; an iteration without drafts costs 1) and yields
  ``min(G, m) + 1`` tokens.
* DSI (official ``SimulDSI``): a *segment* is fully accepted windows of ``k`` drafts followed by
  the first window with a rejection (windows shortened so that at most ``N − 1 − t`` drafts are
  made from position ``t``, then a bonus forward). With ``r = N − 1 − t`` and ``G = g``:
  if ``g < r`` it yields ``g + 1`` tokens after ``D = min((⌊g/k⌋ + 1) k, r)`` drafts, otherwise
  ``r + 1`` tokens after ``D = r`` drafts; it is charged ``min(D c + 1, tokens)`` (the per-segment
  min with a target-only thread restarted at the segment start).

Exact expectations. SI: a dynamic programme over tokens left, ``O(N)`` with a sliding geometric
sum. DSI: a segment boundary falls after each token independently with probability ``1 − a``
(memorylessness of ``G``), so with ``C(r)`` = expected charge of a segment started with ``r``
drafts allowed, ``E[T_DSI] = C(N − 1) + (1 − a) Σ_{r=0}^{N−2} C(r)`` (Note: "per-token renewal"
in docs/reproducing-the-paper.md).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .acceptance import AcceptanceLaw
from .params import Num, SimParams

__all__ = ["dsi_paper_exact", "dsi_paper_grid", "nonsi_exact", "segment_charges",
           "si_exact", "si_grid", "simulate_paper"]

FloatArray = NDArray[np.float64]


def _zero(p: SimParams) -> Num:
    return Fraction(0) if p.exact else 0.0


def nonsi_exact(p: SimParams) -> Num:
    """``E[T_nonSI] = N`` (``TTFT + (N − 1)`` with a target prefill)."""
    return p.n_tokens + _zero(p) + p.prefill_extra(drafter=False)


def si_exact(p: SimParams) -> Num:
    """Exact ``E[T_SI]`` by dynamic programming over ``L`` = tokens left.

    ``E(L) = m c + v + Σ_{j<m} a^j (1 − a) E(L − 1 − j) + a^m E(L − 1 − m)``, ``m = min(k, L−1)``
    (``v`` = the verification forward's cost, 1 when ``m = 0``); the sum is carried as
    ``W(L) = E(L−1) + a W(L−1) − a^k E(L−1−k)``.

    >>> si_exact(SimParams("si", c=Fraction(1, 2), a=Fraction(1, 2), lookahead=1, n_tokens=2))
    Fraction(2, 1)
    """
    if p.acceptance is not None:
        return _si_exact_law(p)
    zero = _zero(p)
    c, a, k, n, v = p.c + zero, p.rate + zero, p.lookahead, p.n_tokens, p.verify + zero
    ak = a ** k
    e = [zero] * (n + 1)
    w = zero
    for left in range(1, n + 1):
        m = min(k, left - 1)
        w = e[left - 1] + a * w - (ak * e[left - 1 - k] if left - 1 - k >= 0 else zero)
        e[left] = m * c + (v if m else 1) + (1 - a) * w + a ** m * e[left - 1 - m]
    return e[n] + p.prefill_extra(drafter=n >= 2)


def segment_charges(p: SimParams) -> list[Num]:
    """``C(r)`` for ``r = 0 .. N−1``: the expected charge of a DSI segment allowed ``r`` drafts.

    ``C(r) = Σ_{g<r} a^g (1−a) min(D(g, r) c + 1, g + 1) + a^r min(r c + 1, r + 1)``.
    """
    zero = _zero(p)
    c, a, k, n = p.c + zero, p.rate + zero, p.lookahead, p.n_tokens
    prefix = [zero]  # prefix[L] = Σ_{g<L} a^g (1−a) min((⌊g/k⌋+1) k c + 1, g + 1)
    power = [zero + 1]
    for g in range(n):
        power.append(power[-1] * a)
        prefix.append(prefix[-1] + power[g] * (1 - a) * min((g // k + 1) * k * c + 1, g + 1))
    charges: list[Num] = []
    for r in range(n):
        q = k * (r // k)  # first draft of the window that the budget cuts short
        last = sum((power[g] * (1 - a) * min(r * c + 1, g + 1) for g in range(q, r)), zero)
        charges.append(prefix[q] + last + power[r] * min(r * c + 1, r + 1))
    return charges


def dsi_paper_exact(p: SimParams) -> Num:
    """Exact ``E[T_DSI]`` of the official offline simulator (per-token renewal, ``O(N k)``).

    >>> dsi_paper_exact(SimParams("dsi", c=Fraction(1, 2), a=Fraction(1, 2), lookahead=1,
    ...                             n_tokens=2))
    Fraction(7, 4)
    """
    if p.acceptance is not None:
        return _dsi_paper_exact_law(p)
    charges = segment_charges(p)
    n = p.n_tokens
    total = charges[n - 1] + (1 - (p.rate + _zero(p))) * sum(charges[: n - 1], _zero(p))
    return total + p.prefill_extra(drafter=n >= 2)


# -- a law of accepted lengths per window (dsi_ref.sim.acceptance) --------------------------------

def _si_exact_law(p: SimParams) -> Num:
    """Exact ``E[T_SI]`` with a law of accepted lengths per window, ``O(N k)``.

    An iteration with ``L`` tokens left drafts one window cut to ``m = min(k, L − 1)`` drafts,
    costs ``m c + v`` (1 without drafts) and commits ``min(L_w, m) + 1`` tokens, ``L_w`` drawn
    from the law: ``E(L) = m c + v + Σ_{j<=m} P(min(L_w, m) = j) E(L − 1 − j)``. With the law
    of ``k`` drafts whole, an iteration commits ``E[min(L_w, k) + 1]`` tokens for ``k c + v``
    (`AcceptanceLaw.mean_committed`).
    """
    law = p.law
    zero = _zero(p)
    c, n, v = p.c + zero, p.n_tokens, p.verify + zero
    laws = [tuple(x + zero for x in law.truncated(m)) for m in range(law.k + 1)]
    e = [zero] * (n + 1)
    for left in range(1, n + 1):
        m = min(p.lookahead, left - 1)
        e[left] = m * c + (v if m else 1) + sum(
            (prob * e[left - 1 - j] for j, prob in enumerate(laws[m])), zero)
    return e[n] + p.prefill_extra(drafter=n >= 2)


def _dsi_paper_exact_law(p: SimParams) -> Num:
    """Exact ``E[T_DSI]`` of the paper model with a law of accepted lengths per window,
    ``O(N²)``: the per-token renewal of `dsi_paper_exact` needs a memoryless ``G``; here ``G``
    (drafts accepted from the segment's start, windows aligned there) has ``P(G = g) =
    q^⌊g/k⌋ P(L = g mod k)``, and with ``F(r)`` = the expected rest of the run from a segment
    allowed ``r`` drafts::

        F(r) = Σ_{g<r} P(G = g) [min(D(g, r) c + 1, g + 1) + F(r − g − 1)]
               + P(G >= r) min(r c + 1, r + 1),    D(g, r) = min((⌊g/k⌋ + 1) k, r)

    ``E[T_DSI] = F(N − 1)`` (plus the prefill).
    """
    law = p.law
    zero = _zero(p)
    c, k, n = p.c + zero, p.lookahead, p.n_tokens
    q = law.full + zero
    ell = [x + zero for x in law.probabilities[:-1]]
    weight = [q ** (g // k) * ell[g % k] for g in range(n)]
    surv = [law.survival(r) + zero for r in range(n)]
    f = [zero] * n
    for r in range(n):
        total = surv[r] * min(r * c + 1, r + 1)
        for g in range(r):
            drafts = min((g // k + 1) * k, r)
            total += weight[g] * (min(drafts * c + 1, g + 1) + f[r - g - 1])
        f[r] = total
    return f[n - 1] + p.prefill_extra(drafter=n >= 2)


def _draw_first_rejection(law: AcceptanceLaw, size: int, rng: np.random.Generator,
                          one_window: bool) -> NDArray[Any]:
    """``G`` drawn from a window law: SI (``one_window``) draws one window's ``L``; the paper
    model's DSI counts full windows (geometric in ``q``) plus the first window that is not."""
    probs = np.array([float(x) for x in law.probabilities])
    probs = probs / probs.sum()
    if one_window:
        drawn: NDArray[Any] = rng.choice(law.k + 1, size=size, p=probs).astype(np.int64)
        return drawn
    q = float(probs[-1])
    if q >= 1:
        return np.full(size, np.iinfo(np.int64).max // 4, dtype=np.int64)
    full = np.zeros(size, dtype=np.int64) if q <= 0 else \
        rng.geometric(1 - q, size=size).astype(np.int64) - 1
    partial = rng.choice(law.k, size=size, p=probs[:-1] / probs[:-1].sum()).astype(np.int64)
    result: NDArray[Any] = full * law.k + partial
    return result


# -- vectorised over a grid (floats) ---------------------------------------------------------------

def si_grid(c: FloatArray, a: FloatArray, lookahead: NDArray[np.int64],
            n_tokens: int) -> FloatArray:
    """Exact ``E[T_SI]`` for many configurations at once (float arrays of one shape; ``k`` =
    ``lookahead``).

    The same recurrence as `si_exact`, one step per ``L`` and vectorised over configurations.
    """
    c, a, k = np.broadcast_arrays(np.asarray(c, float), np.asarray(a, float),
                                  np.asarray(lookahead))
    shape = c.shape
    c, a, k = c.ravel(), a.ravel(), k.ravel().astype(np.int64)
    size = c.size
    e = np.zeros((n_tokens + 1, size))
    w = np.zeros(size)
    ak = a ** k
    cols = np.arange(size)
    for left in range(1, n_tokens + 1):
        m = np.minimum(k, left - 1)
        back = left - 1 - k
        w = e[left - 1] + a * w - np.where(back >= 0, ak * e[np.maximum(back, 0), cols], 0.0)
        e[left] = m * c + 1 + (1 - a) * w + a ** m * e[left - 1 - m, cols]
    result: FloatArray = e[n_tokens].reshape(shape)
    return result


def dsi_paper_grid(c: FloatArray, a: FloatArray, lookahead: NDArray[np.int64],
                   n_tokens: int) -> FloatArray:
    """Exact ``E[T_DSI]`` (paper model) on the grid ``c × a × k`` (1-D axes, ``k`` =
    ``lookahead``; result ``len(c) × len(a) × len(k)``).

    Vectorised `dsi_paper_exact`: per ``(c, k)``, ``C(r)`` for every ``a`` and ``r`` at once from
    prefix sums over ``g`` and closed forms for the window that the budget cuts short.
    """
    c, a = np.ravel(c).astype(float), np.ravel(a).astype(float)
    k = np.ravel(lookahead).astype(np.int64)
    n = n_tokens
    g = np.arange(n)
    r = g                                                       # budgets 0 .. N−1
    power = np.asarray(a, float)[:, None] ** g[None, :]         # a^g, shape (len(a), N)
    weight = power * (1 - a[:, None])                           # P(G = g)
    zero = np.zeros((a.size, 1))
    prefix1 = np.concatenate([zero, np.cumsum(weight * (g + 1), axis=1)], axis=1)
    tail = np.concatenate([np.cumsum(weight[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
    renewal = np.where(r == n - 1, 1.0, (1 - a)[:, None])       # P(a segment starts at N−1−r)
    out = np.empty((c.size, a.size, k.size))
    for i, ci in enumerate(np.asarray(c, float)):
        rc1 = r * ci + 1
        last = power * np.minimum(rc1, r + 1)                   # all r drafts accepted
        for j, kj in enumerate(np.asarray(k, np.int64)):
            full = np.minimum((g // kj + 1) * kj * ci + 1, g + 1)
            prefix = np.concatenate([zero, np.cumsum(weight * full, axis=1)], axis=1)
            q = kj * (r // kj)    # first draft of the window that the budget cuts short
            # in that window, g in [q, h) pays g + 1 (<= r c + 1) and g in [h, r) pays r c + 1
            h = np.clip(np.floor(r * ci).astype(np.int64) + 1, q, r)
            charges = (prefix[:, q] + prefix1[:, h] - prefix1[:, q]
                       + rc1 * (tail[:, h] - tail[:, :n]) + last)
            out[i, :, j] = (renewal * charges).sum(axis=1)
    return out


# -- Monte Carlo (vectorised over repeats) ---------------------------------------------------------

def _accepted_before_rejection(a: float, size: int, rng: np.random.Generator) -> NDArray[Any]:
    """``G`` with ``P(G >= j) = a^j`` (``a = 1``: never rejected)."""
    if a >= 1:
        return np.full(size, np.iinfo(np.int64).max // 4, dtype=np.int64)
    if a <= 0:
        return np.zeros(size, dtype=np.int64)
    return rng.geometric(1 - a, size=size).astype(np.int64) - 1


def simulate_paper(p: SimParams, n_repeats: int, rng: np.random.Generator) -> FloatArray:
    """Latencies of ``n_repeats`` independent runs of the paper model (one array entry per run).

    Randomness: one vector of ``G`` draws per SI iteration / DSI segment, for the runs still
    going, in that order.
    """
    n, k, c = p.n_tokens, p.lookahead, float(p.c)
    cost = np.zeros(n_repeats)
    if p.algorithm == "nonsi":
        return cost + float(nonsi_exact(p))
    law = p.acceptance
    done = np.zeros(n_repeats, dtype=np.int64)  # tokens generated
    while True:
        live = np.flatnonzero(done < n)
        if live.size == 0:
            break
        g = _accepted_before_rejection(float(p.rate), live.size, rng) if law is None else \
            _draw_first_rejection(law, live.size, rng, p.algorithm == "si")
        left = n - done[live]
        if p.algorithm == "si":
            m = np.minimum(k, left - 1)
            cost[live] += m * c + np.where(m > 0, float(p.verify), 1.0)
            done[live] += np.minimum(g, m) + 1
        else:
            r = left - 1
            rejected = g < r
            tokens = np.where(rejected, g + 1, r + 1)
            drafts = np.where(rejected, np.minimum((g // k + 1) * k, r), r)
            cost[live] += np.minimum(drafts * c + 1, tokens)
            done[live] += tokens
    return cost + float(p.prefill_extra(drafter=n >= 2))
