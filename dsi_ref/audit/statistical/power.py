"""The power of the statistical audit: a lower bound on the probability that the G test of
`dsi_ref.audit.statistical` rejects under a stated alternative (step 3 of the package's
docstring), `achieved_power` and `required_samples`."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import special, stats

from .design import (
    POLICY_ALPHA,
    Alternative,
    LawLike,
    Pooling,
    cell_masses_of,
    check_alpha,
    check_law,
    critical_value,
    pool_cells,
)

__all__ = ["achieved_power", "required_samples", "stated_power"]


#: Relative slack on the threshold ``x`` of the power computations. A draw is counted as a
#: rejection only when its ``n KL`` is ``>= x (1 + 1e-9) + 1e-14 n``: beyond the rounding of ``G``
#: in `audit_counts` (about ``1e-15 n`` absolute, ``O ln(O / E)`` summed over ``n`` draws), so a
#: draw counted as rejected is rejected by the implemented test, and the stated power never
#: exceeds the power of that test by rounding.
_X_RELATIVE_SLACK = 1e-9
_X_ABSOLUTE_SLACK_PER_SAMPLE = 1e-14
#: Largest number of partial count vectors the exact computation holds at once; beyond it the
#: power is the Chernoff and binary lower bounds (module docstring, step 3).
_ENUMERATION_LIMIT = 200_000
#: Allowance for the rounding of the FFT convolution in the Chernoff bound (per cell; the
#: convolved sequences each sum to 1, so the rounding of any entry is ~ log2(N) * 1e-16).
_FFT_SLACK = 1e-11
#: Up to this many cells, the TV bound's sup over sets of cells is taken over every set.
_SUBSET_CELLS = 12
#: Steps of the sup over the mass ``t`` put outside the support in the TV bound.
_TV_T_STEPS = 8


def _miss_threshold(df: int, alpha: float, n: int) -> float:
    """``x`` with the slack of `_X_RELATIVE_SLACK`: the test rejects every draw whose
    ``n KL(P̂ ‖ P)`` (as computed exactly) reaches it."""
    x = critical_value(df, alpha) / 2
    return x * (1 + _X_RELATIVE_SLACK) + _X_ABSOLUTE_SLACK_PER_SAMPLE * n


def _deviance(o: np.ndarray, e: float | np.ndarray) -> np.ndarray:
    """``o ln(o / e) - o + e >= 0``: a cell's share of ``n KL(P̂ ‖ P)`` with ``o`` draws and ``e``
    expected (the shares of the cells add up to ``n KL`` because ``Σ o = Σ e = n``). Written as
    ``o log1p(d / e) - d``, ``d = o - e``, which keeps its rounding near ``|d| 1e-16``."""
    o = np.asarray(o, dtype=np.float64)
    d = o - e
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(o > 0, o * np.log1p(d / e) - d, e + 0 * o)


def _deviance1(o: int, e: float) -> float:
    """`_deviance` of one count (the same formula, in Python floats)."""
    if o <= 0:
        return e
    d = o - e
    return o * math.log1p(d / e) - d


def _miss_range(e: float, x: float) -> tuple[int, int]:
    """The integers ``o >= 0`` with ``_deviance(o, e) < x`` lie in ``[lo, hi]`` (padded by one;
    empty when ``lo > hi``). The deviance is convex in ``o`` with its minimum 0 at ``e``."""
    top = math.ceil(e + 2 * math.sqrt(x * e) + 2 * x) + 1  # (o - e)² / (2 o) >= x there
    mid_lo, mid_hi = math.floor(e), math.ceil(e)
    if _deviance1(0, e) < x:
        lo = 0
    else:  # largest o <= e with deviance >= x, plus one
        a, b = 0, mid_lo
        while b - a > 1:
            c = (a + b) // 2
            a, b = (c, b) if _deviance1(c, e) >= x else (a, c)
        lo = b
    a, b = mid_hi, top  # smallest o >= e with deviance >= x, minus one
    while b - a > 1:
        c = (a + b) // 2
        a, b = (a, c) if _deviance1(c, e) >= x else (c, b)
    return max(0, lo - 1), b


def _binary_statistic(n: int, m: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """``n kl(m / n ‖ pi)`` for counts ``m`` of a set of reference mass ``pi``."""
    return np.asarray(_deviance(m, n * pi) + _deviance(n - m, n * (1 - pi)))


def _kl_root(pi: np.ndarray, level: float, upper: bool) -> np.ndarray:
    """The ``a`` above (``upper``) or below ``pi`` with ``kl(a ‖ pi) = level``, by Newton's
    method from Pinsker's bound ``|a - pi| <= sqrt(level / 2)`` (monotone: the function is convex
    and the start lies beyond the root); a guess, checked on the integers by `_cuts`."""
    step = math.sqrt(level / 2)
    a = np.clip(pi + step if upper else pi - step, 1e-15, 1 - 1e-15)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for _ in range(6):
            value = special.xlogy(a, a / pi) + special.xlogy(1 - a, (1 - a) / (1 - pi)) - level
            slope = np.log(a / pi) - np.log((1 - a) / (1 - pi))
            a = np.clip(a - np.where(slope != 0, value / slope, 0.0), 1e-15, 1 - 1e-15)
    return np.asarray(a)


def _upper_cut(n: int, pi: np.ndarray, x: float) -> np.ndarray:
    """For each ``pi``: the smallest ``m_hi >= n pi`` with ``n kl(m / n ‖ pi) >= x`` (``n + 1``
    when there is none). ``n kl`` is convex in ``m`` with its minimum at ``n pi``, so every
    ``m >= m_hi`` reaches ``x``: by the data-processing inequality the audit rejects such a
    count of draws in a set of cells of reference mass ``pi``, whatever the other cells hold.
    Found by bisection on the integers in a bracket around Newton's guess (widened to the whole
    side where the guess is off), so every returned cut is checked exactly."""
    pi = np.asarray(pi, dtype=np.float64)
    first_hi = np.ceil(n * pi).astype(np.int64)  # the smallest count on the upper side
    # a below the crossing (or the centre), b at or above it
    guess = np.ceil(n * _kl_root(pi, x / n, upper=True)).astype(np.int64)
    a = np.maximum(first_hi - 1, np.minimum(guess - 2, n))
    a = np.where((a >= first_hi) & (_binary_statistic(n, a, pi) >= x), first_hi - 1, a)
    b = np.clip(guess + 2, first_hi, n)
    b = np.where(_binary_statistic(n, b, pi) >= x, b, n)
    has_hi = _binary_statistic(n, b, pi) >= x
    a, b = _bisect(n, pi, x, np.minimum(a, b - 1), b, hit_moves_b=True)
    return np.where(has_hi, b, n + 1)


def _bisect(n: int, pi: np.ndarray, x: float, a: np.ndarray, b: np.ndarray, *,
            hit_moves_b: bool) -> tuple[np.ndarray, np.ndarray]:
    """Bisect each ``[a, b]`` down to adjacent integers around where ``n kl(m / n ‖ pi)``
    crosses ``x``: a midpoint that reaches ``x`` replaces ``b`` (``hit_moves_b``, the upper cut)
    or ``a`` (the lower cut), one that does not replaces the other end."""
    while True:
        gap = (b - a) > 1
        if not gap.any():
            return a, b
        c = (a + b) // 2
        hit = _binary_statistic(n, c, pi) >= x
        to_b = hit if hit_moves_b else ~hit
        a = np.where(gap & ~to_b, c, a)
        b = np.where(gap & to_b, c, b)


def _lower_cut(n: int, pi: np.ndarray, x: float) -> np.ndarray:
    """For each ``pi``: the largest ``m_lo <= n pi`` with ``n kl(m / n ‖ pi) >= x`` (``-1`` when
    there is none): `_upper_cut` mirrored."""
    pi = np.asarray(pi, dtype=np.float64)
    last_lo = np.floor(n * pi).astype(np.int64)
    # a at or below the crossing, b above it (or the centre)
    guess = np.floor(n * _kl_root(pi, x / n, upper=False)).astype(np.int64)
    b = np.minimum(last_lo + 1, np.maximum(guess + 2, 0))
    b = np.where((b <= last_lo) & (_binary_statistic(n, b, pi) >= x), last_lo + 1, b)
    a = np.clip(guess - 2, 0, last_lo)
    a = np.where(_binary_statistic(n, a, pi) >= x, a, 0)
    has_lo = _binary_statistic(n, a, pi) >= x
    a, b = _bisect(n, pi, x, a, np.maximum(b, a + 1), hit_moves_b=False)
    return np.where(has_lo, a, -1)


def _last_two_miss(r: np.ndarray, room: np.ndarray, e_a: float, e_b: float, share: float
                   ) -> np.ndarray:
    """For each state: ``P[dev(O, e_a) + dev(r - O, e_b) < room]`` with ``O ~ Bin(r, share)``.

    The sum ``h`` of the two deviances is convex in ``O``, so the counts that miss form an
    interval around its integer minimiser (next to ``c = r e_a / (e_a + e_b)``), found by
    bisection on each side, in brackets guessed from ``h(o) - h(c) ~ (o - c)² / (2 r w (1 - w))``
    (``w = e_a / (e_a + e_b)``), checked, and widened to the whole side where a guess is off."""
    def h(o: np.ndarray) -> np.ndarray:
        return np.asarray(_deviance(o, e_a) + _deviance(r - o, e_b))

    w = e_a / (e_a + e_b)
    c = r * w
    below = np.clip(np.floor(c).astype(np.int64), 0, r)
    above = np.minimum(below + 1, r)
    centre = np.where(h(above) < h(below), above, below)  # the integer minimiser
    h_centre = h(centre)
    inside = h_centre < room
    spread = np.sqrt(2 * np.maximum(room - h_centre, 0.0) * r * w * (1 - w))

    def bisect(a: np.ndarray, b: np.ndarray, a_hits: bool) -> np.ndarray:
        """The crossing between ``a`` and ``b`` (``h < room`` holds at ``a`` if ``a_hits``, at
        ``b`` otherwise): the last count where it holds, or the first."""
        while True:
            gap = (b - a) > 1
            if not gap.any():
                return b if not a_hits else a
            mid = (a + b) // 2
            hit = h(np.clip(mid, 0, r)) < room
            move_a = hit if a_hits else ~hit
            a = np.where(gap & move_a, mid, a)
            b = np.where(gap & ~move_a, mid, b)

    # the largest o >= centre with h(o) < room: a where it holds, b where it fails (or r + 1)
    guess = np.clip(np.floor(c + 0.8 * spread).astype(np.int64) - 2, centre, r)
    a = np.where(h(guess) < room, guess, centre)
    guess = np.clip(np.ceil(c + 1.25 * spread).astype(np.int64) + 2, a + 1, r)
    b = np.where((guess > a) & (h(guess) >= room), guess, r + 1)
    upper = bisect(a, b, a_hits=True)
    # the smallest o <= centre with h(o) < room: b where it holds, a where it fails (or -1)
    guess = np.clip(np.ceil(c - 0.8 * spread).astype(np.int64) + 2, 0, centre)
    b = np.where(h(guess) < room, guess, centre)
    guess = np.clip(np.floor(c - 1.25 * spread).astype(np.int64) - 2, 0, b - 1)
    a = np.where((guess < b) & (h(guess) >= room), guess, -1)
    lower = bisect(a, b, a_hits=False)
    before = np.where(lower > 0, special.bdtr(np.maximum(lower - 1, 0), r, share), 0.0)
    probability = special.bdtr(upper, r, share) - before
    return np.where(inside, np.clip(probability, 0.0, 1.0), 0.0)


def _miss_enumerated(n: int, p: Sequence[float], q: Sequence[float], x: float,
                     limit: int = _ENUMERATION_LIMIT) -> float | None:
    """``P_q[n KL(P̂ ‖ p) < x]`` exactly (None when more than ``limit`` partial count vectors
    would be needed).

    Each cell's deviance is ``>= 0``, so a count vector that misses has every partial sum below
    ``x``. The cells are taken least likely first: the count vectors of all but the two most
    likely cells are enumerated, dropping those that already reach ``x`` or cannot be completed
    to ``n`` draws; given one of them, the two last cells share the ``r`` remaining draws
    binomially, and the counts that miss form an interval (the sum of their two deviances is
    convex), so their probability is a difference of two binomial distribution functions.
    """
    order = sorted(range(len(p)), key=lambda i: p[i])
    es = [n * p[i] for i in order]
    qs = [q[i] for i in order]
    ranges = [(0, 0) if qi == 0 else _miss_range(e, x) for e, qi in zip(es, qs, strict=True)]
    rest_lo = np.cumsum([r[0] for r in ranges][::-1])[::-1].tolist() + [0]
    rest_hi = np.cumsum([r[1] for r in ranges][::-1])[::-1].tolist() + [0]
    m = np.zeros(1, dtype=np.int64)
    s = np.zeros(1)
    w = np.zeros(1)
    for i in range(len(es) - 2):
        o = np.arange(ranges[i][0], ranges[i][1] + 1, dtype=np.int64)
        f = _deviance(o, es[i])
        keep = f < x
        o, f = o[keep], f[keep]
        if m.size * o.size > limit:
            return None
        lw = special.xlogy(o, qs[i]) - special.gammaln(o + 1)
        big_m = (m[:, None] + o[None, :]).ravel()
        big_s = (s[:, None] + f[None, :]).ravel()
        big_w = (w[:, None] + lw[None, :]).ravel()
        ok = (big_s < x) & (big_m + rest_lo[i + 1] <= n) & (big_m + rest_hi[i + 1] >= n)
        m, s, w = big_m[ok], big_s[ok], big_w[ok]
        if m.size == 0:
            return 0.0
    q_two = qs[-2] + qs[-1]
    share = qs[-2] / q_two if q_two > 0 else 0.5
    r = n - m
    log_weight = (w + special.gammaln(n + 1) - special.gammaln(r + 1)
                  + special.xlogy(r, q_two))
    inner = _last_two_miss(r, x - s, es[-2], es[-1], share)
    return min(1.0, float((np.exp(log_weight) * inner).sum()))


def _miss_chernoff(n: int, p: Sequence[float], q: Sequence[float], x: float) -> float:
    """An upper bound on ``P_q[n KL(P̂ ‖ p) < x]``: ``min over θ >= 0`` of
    ``e^{θ x} E_q[e^{-θ n KL} ; every cell's deviance < x]`` (Markov's inequality), with the
    expectation of the multinomial computed exactly as a coefficient of a product of generating
    functions (module docstring, step 3)."""
    lam_total = float(n)
    cells: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for pi, qi in zip(p, q, strict=True):
        e = n * pi
        lo, hi = (0, 0) if qi == 0 else _miss_range(e, x)
        o = np.arange(lo, hi + 1, dtype=np.int64)
        f = _deviance(o, e)
        keep = f < x
        o, f = o[keep], f[keep]
        if o.size == 0:
            return 0.0  # this cell alone reaches x: every draw is rejected
        lam = n * qi
        logpmf = stats.poisson.logpmf(o, lam) if lam > 0 else np.zeros(o.size)
        cells.append((o, f, logpmf))
    width = sum(int(c[0][-1] - c[0][0]) + 1 for c in cells)
    # no aliasing when the size covers every total; else the aliased totals lie 8 standard
    # deviations of the Poisson total away (and aliasing only adds to the bound)
    size = 1 << max(6, math.ceil(math.log2(min(width + 1, 8 * math.sqrt(n) + 64))))
    log_norm = float(stats.poisson.logpmf(n, lam_total))
    slack = _FFT_SLACK * len(cells)

    k = len(cells)
    lengths = [c[0].size for c in cells]
    starts = np.cumsum([0, *lengths[:-1]])
    cell_of = np.repeat(np.arange(k), lengths)
    o_all = np.concatenate([c[0] for c in cells])
    f_all = np.concatenate([c[1] for c in cells])
    logpmf_all = np.concatenate([c[2] for c in cells])
    slot = cell_of * size + o_all % size  # each count folded modulo size, in its cell's row
    chunk = max(1, 4_000_000 // (k * size))  # θ values per batch (memory)

    def log_bounds(thetas: np.ndarray) -> np.ndarray:
        """The log of the bound at each ``θ``, in batches of θ values."""
        out = []
        for lo in range(0, thetas.size, chunk):
            batch = thetas[lo:lo + chunk]
            la = logpmf_all[None, :] - batch[:, None] * f_all[None, :]
            top = np.maximum.reduceat(la, starts, axis=1)  # per cell, for the exponentials
            a = np.exp(la - top[:, cell_of])
            mass = np.add.reduceat(a, starts, axis=1)
            total = batch * x - log_norm + (top + np.log(mass)).sum(axis=1)
            rows = np.arange(batch.size)[:, None] * (k * size) + slot[None, :]
            folded = np.bincount(rows.ravel(), weights=(a / mass[:, cell_of]).ravel(),
                                 minlength=batch.size * k * size).reshape(batch.size, k, size)
            spectrum = np.fft.rfft(folded, axis=2).prod(axis=1)
            coefficient = np.fft.irfft(spectrum, size, axis=1)[:, n % size]
            out.append(total + np.log(np.maximum(coefficient, 0.0) + slack))
        return np.concatenate(out)

    # the log of the bound is convex in θ: a coarse grid, then a finer one around its minimum
    # (every θ gives a valid bound; the grids only decide how close to the best one it is)
    grid = np.geomspace(1e-3, 20.0, 11)
    best = 0.0  # θ = 0: the bound 1
    for _ in range(2):
        values = log_bounds(grid)
        i = int(np.argmin(values))
        best = min(best, float(values[i]))
        grid = np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)], 9)
    return min(1.0, math.exp(best))


def _miss_binary(n: int, p: Sequence[float], q: Sequence[float], x: float) -> float:
    """An upper bound on ``P_q[n KL(P̂ ‖ p) < x]`` from two-set coarsenings: for the sets of
    cells of largest ``q / p`` (``k - 1`` nested sets), the exact binomial probability that the
    count of draws in the set does not reach ``x`` on its own (`_upper_cut`); the smallest."""
    order = sorted(range(len(p)), key=lambda i: -q[i] / p[i])
    pis = np.cumsum([p[i] for i in order])[:-1]
    bs = np.minimum(np.cumsum([q[i] for i in order])[:-1], 1.0)
    m_lo, m_hi = _lower_cut(n, pis, x), _upper_cut(n, pis, x)
    cdf_lo = np.where(m_lo >= 0, special.bdtr(np.maximum(m_lo, 0), n, bs), 0.0)
    # P[m_lo < B < m_hi], from whichever tail keeps the difference of small numbers
    below = special.bdtr(m_hi - 1, n, bs) - cdf_lo
    above = special.bdtrc(m_lo, n, bs) - special.bdtrc(m_hi - 1, n, bs)
    miss = np.where(n * bs >= (m_lo + m_hi) / 2, below, above)
    return float(np.clip(miss, 0.0, 1.0).min())


def _miss_inside(n: int, p: Sequence[float], q: Sequence[float], x: float,
                 done: Callable[[float], bool] | None = None) -> float:
    """An upper bound on ``P_q[n KL(P̂ ‖ p) < x]`` (``q`` a law on the cells): the smallest of
    the binary bound, the exact value when affordable, else the Chernoff bound.

    With ``done``, the first of them (cheapest first) for which ``done`` holds is returned:
    `required_samples` only asks whether the power reaches its target, and the smallest bound
    reaches it exactly when one of them does.
    """
    best = _miss_binary(n, p, q, x)
    if done is not None and done(best):
        return best
    exact = _miss_enumerated(n, p, q, x)
    return min(best, exact if exact is not None else _miss_chernoff(n, p, q, x))


def _tv_inside_miss(n: int, delta: float, probs: Sequence[float], x: float) -> float:
    """An upper bound on ``P_q[n KL(P̂ ‖ p) < x]`` over every law ``q`` on the cells (of
    reference probabilities ``probs``) at TV ``>= delta`` (module docstring, step 3): the sup
    over ``π = P(A)`` of ``P[Bin(n, π + delta) <= m_hi(π) - 1]`` (`_upper_cut`), ``A`` a set of
    cells with ``P(A) <= 1 - delta``.

    With at most `_SUBSET_CELLS` cells the sup is a maximum over the masses of the sets, taken
    exactly. Otherwise it is taken over the interval ``[min P, 1 - max(delta, min P)]`` of ``π``,
    by branch and bound. On an interval ``[a, b]`` of ``π`` the miss is at most
    ``P[Bin(n, a + delta) <= m_hi(b) - 1]`` (``m_hi`` grows with ``π``, the binomial with its
    success probability), and it is attained
    at ``π = a`` when ``m_hi(a) = m_hi(b)``. An interval is split in four while its bound
    exceeds the largest value attained by more than 1 % and ``m_hi`` rises by more than one
    count across it; so the result, the largest interval bound, exceeds the sup by at most 1 %
    or one binomial probability term.
    """
    if delta <= 0:
        return 1.0
    if len(probs) <= _SUBSET_CELLS:
        members = (np.arange(1, 2 ** len(probs) - 1)[:, None] >> np.arange(len(probs))) & 1
        pis = np.unique(members @ np.asarray(probs, dtype=np.float64))
        pis = pis[pis <= 1 - delta]
        if pis.size == 0:
            return 0.0  # no law on the cells is that far from the reference
        cut = _upper_cut(n, pis, x)
        return float(special.bdtr(cut - 1, n, np.minimum(pis + delta, 1.0)).max())
    p_min = min(probs)
    lo, hi = p_min, 1 - max(delta, p_min)
    if lo > hi:
        return 0.0  # no law on the cells is that far from the reference
    edges = np.linspace(lo, hi, 33)
    a, b = edges[:-1], edges[1:]
    cut_a, cut_b = _upper_cut(n, a, x), _upper_cut(n, b, x)
    settled = 0.0
    for _ in range(40):  # every interval bound is valid: stopping early is only looser
        success = np.minimum(a + delta, 1.0)
        upper = special.bdtr(cut_b - 1, n, success)  # >= the miss at every π in [a, b]
        attained = float(special.bdtr(cut_a - 1, n, success).max())  # the miss at π = a
        split = (upper > attained * (1 + 1e-2)) & (cut_b - cut_a > 1)
        if not split.any():
            return max(settled, float(upper.max()))
        settled = max(settled, float(upper[~split].max(initial=0.0)))
        a, b, cut_a, cut_b = a[split], b[split], cut_a[split], cut_b[split]
        inner = a[:, None] + (b - a)[:, None] * np.array([0.25, 0.5, 0.75])[None, :]
        cut_inner = _upper_cut(n, inner.ravel(), x).reshape(inner.shape)
        a = np.concatenate([a[:, None], inner], axis=1).ravel()
        b = np.concatenate([inner, b[:, None]], axis=1).ravel()
        cut_a = np.concatenate([cut_a[:, None], cut_inner], axis=1).ravel()
        cut_b = np.concatenate([cut_inner, cut_b[:, None]], axis=1).ravel()
    upper = special.bdtr(cut_b - 1, n, np.minimum(a + delta, 1.0))
    return max(settled, float(upper.max()))


def _law_power(pooling: Pooling, n: int, alpha: float, law: LawLike,
               need: float | None = None) -> float:
    q, outside = cell_masses_of(pooling, check_law(law, "alternative law"))
    mass = math.fsum(q)
    if outside >= 1 or mass <= 0:
        return 1.0  # every draw is outside the support
    if pooling.df <= 0:  # one cell: only impossible outcomes can reject
        return -math.expm1(n * math.log1p(-outside))
    inside = [qg / mass for qg in q]  # the law of a draw given that it falls in the support
    no_outside = math.exp(n * math.log1p(-outside))

    def power(miss: float) -> float:
        return 1.0 - no_outside * miss  # no draw outside, and G misses

    done = None if need is None else (lambda miss: power(miss) >= need)
    return power(_miss_inside(n, pooling.probs, inside, _miss_threshold(pooling.df, alpha, n),
                              done))


def _tv_power(pooling: Pooling, n: int, alpha: float, epsilon: float,
              need: float | None = None) -> float:
    delta0 = epsilon - pooling.hidden_mass
    if delta0 <= 0:
        return 0.0
    if pooling.df <= 0:  # one cell: only impossible outcomes can reject
        return -math.expm1(n * math.log1p(-delta0)) if delta0 < 1 else 1.0
    x = _miss_threshold(pooling.df, alpha, n)
    m0 = _tv_inside_miss(n, delta0, pooling.probs, x)
    top = delta0 if m0 <= 0 else min(delta0, -math.log(m0) / n)
    ts = np.linspace(0.0, top, _TV_T_STEPS + 1)
    miss = math.exp(n * math.log1p(-top)) if top < 1 else 0.0  # t >= top
    reach = math.sqrt(x / (2 * n))  # Pinsker: m_hi(π) <= n (π + reach) + 1
    for t_a, t_b in itertools.pairwise(ts):
        factor = math.exp(n * math.log1p(-float(t_a)))
        delta = delta0 - float(t_b)
        # M(delta) <= P[Bin(n, π + delta) < n (π + reach)] <= exp(-2 n (delta - reach)²)
        # (Hoeffding) for every π <= 1 - delta: a second bound, and the step is skipped when it
        # cannot raise the miss
        hoeffding = math.exp(-2 * n * (delta - reach) ** 2) if delta > reach else 1.0
        if factor * hoeffding > miss:
            inside = min(hoeffding, _tv_inside_miss(n, delta, pooling.probs, x))
            miss = max(miss, factor * inside)
            if need is not None and 1.0 - miss < need:
                break  # the miss only grows: the power is already short of what is needed
    return 1.0 - miss


def stated_power(pooling: Pooling, n: int, alpha: float, alternative: Alternative,
           need: float | None = None) -> float:
    """The stated power: a lower bound on the probability that the audit of ``n`` draws rejects
    under the alternative (exact for a wrong law when affordable; module docstring, step 3).

    With ``need``, the computation may stop as soon as it knows on which side of ``need`` the
    power lies; the value returned is then on that side (for `required_samples`).
    """
    if alternative.law is not None:
        return _law_power(pooling, n, alpha, alternative.law, need)
    return _tv_power(pooling, n, alpha, float(alternative.epsilon or 0.0), need)


def achieved_power(reference_law: LawLike, alternative: Alternative, n_samples: int, *,
                   alpha: float = POLICY_ALPHA, min_expected: float = 5.0) -> float:
    """The power of the audit with ``n_samples`` draws against ``alternative`` (approximate).

    >>> law = {(0,): 0.5, (1,): 0.5}
    >>> round(achieved_power(law, Alternative.tv(0.1), 1000, alpha=1e-6), 3)
    0.66
    """
    check_alpha(alpha)
    return stated_power(pool_cells(reference_law, n_samples, min_expected), n_samples, alpha,
                  alternative)


def required_samples(reference_law: LawLike, alternative: Alternative, *,
                     alpha: float = POLICY_ALPHA, power: float = 0.99,
                     min_expected: float = 5.0, max_samples: int = 10**9) -> int | None:
    """The smallest sample size (found by doubling, then bisection) that reaches ``power``.

    Returns None if even ``max_samples`` does not. Power is not exactly monotone in ``n``
    (pooling changes with ``n``); the returned size is checked to reach ``power`` itself.
    """
    check_alpha(alpha)
    check_alpha(power, "power")

    def ok(n: int) -> bool:  # achieved_power(...) >= power, stopping once that is known
        return stated_power(pool_cells(reference_law, n, min_expected), n, alpha, alternative,
                      need=power) >= power

    hi = 16
    while not ok(hi):
        if hi >= max_samples:
            return None
        hi = min(2 * hi, max_samples)
    lo = hi // 2 if hi > 16 else 0
    while hi - lo > max(1, hi // 200):  # 0.5 % resolution is plenty
        mid = (lo + hi) // 2
        if mid > 0 and ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
