"""The statistical audit: a black-box sampler's law of sequences against an exact reference law.

Exact enumeration needs a decoder that draws through `Randomness`; a real decoder (torch, another
library) draws its own randomness, so it is audited from samples. The test is designed *before*
sampling, from the reference law, the sample size and the stated alternative:

1. **Cells** (`pool_cells`). Every outcome (a whole generated sequence) with expected count
   ``n · p >= min_expected`` is a cell of its own; the rarer outcomes are sorted by probability
   (ascending) and pooled greedily, in that order, into groups whose expected count reaches
   ``min_expected`` (a remainder below it joins the last group; if every outcome is rare they all
   form one cell). Pooling depends on the reference law and ``n`` only, never on the data, so
   the false-alarm rate is not inflated. Outcomes outside the reference support form no cell: one
   observation of such an outcome rejects outright (it has probability 0 under the reference).
2. **Statistic and threshold**. The likelihood-ratio statistic ``G = 2 n KL(P̂ ‖ P)`` over the
   cells (``P̂`` the empirical cell frequencies), ``df = cells - 1``. The threshold is *not* the
   asymptotic chi-square quantile (far in the tail, at the suite's ``alpha = 1e-8``, it is
   anti-conservative: see docs/statistical-policy.md) but a finite-sample bound (Agrawal 2020,
   "Finite-sample concentration of the multinomial in relative entropy", IEEE Trans. Inf. Theory
   66(10)): for ``x = n KL > k - 1``, ``P[n KL(P̂ ‖ P) >= x] <= e^{-x} (e x / (k - 1))^{k - 1}``
   with ``k`` cells. The test rejects when that bound is ``<= alpha``, so the false-alarm rate is
   at most ``alpha`` for every ``n``, with no approximation; the reported p-value is the bound.
3. **Power against a named alternative** (`Alternative`): a lower bound on the probability
   that *this* test (``n KL(P̂ ‖ P) >= x``, ``x`` half the threshold of step 2, with this
   pooling) rejects, never an approximation of it. Write ``t`` for the alternative's mass
   outside the reference support and ``q`` for its law given that a draw falls inside, pooled
   into the cells. No draw falls outside with probability ``(1 - t)^n``, and then the cell
   counts are multinomial ``(n, q)``, so ``power = 1 - (1 - t)^n · miss(q)`` with
   ``miss(q) = P_q[n KL(P̂ ‖ P) < x]``. Each cell contributes ``O ln(O / E) - O + E >= 0`` to
   ``n KL`` (its deviance; they add up to ``n KL`` because ``Σ O = Σ E = n``), so a count
   vector that misses has every cell's deviance below ``x``.

   * **A specific wrong law** ``q`` (`Alternative.of_law`, e.g. a zoo mutant's exact law):
     ``miss(q)`` is computed **exactly** when affordable: the count vectors of all cells but the
     two most likely are enumerated (those whose partial deviance already reaches ``x``, or that
     cannot be completed to ``n`` draws, dropped), and given one of them the two last cells
     share the remaining draws binomially, the counts that miss forming an interval (the sum of
     two deviances is convex), so their probability is a difference of binomial distribution
     functions. With two cells this is one binomial probability. When the enumeration would hold
     more than ``_ENUMERATION_LIMIT`` partial vectors (many cells, or large ``n``), ``miss(q)``
     is bounded above by the smaller of two proven bounds:

     - *Chernoff*: ``miss <= e^{θ x} E_q[e^{-θ n KL} ; every deviance < x]`` for every
       ``θ >= 0`` (Markov). The expectation is exact: the multinomial is the law of independent
       Poisson counts ``Pois(n q_i)`` given that they add up to ``n``, so it is the
       coefficient of ``z^n`` in ``Π_i Σ_o Pois(o; n q_i) e^{-θ dev_i(o)} z^o`` divided by
       ``P[Pois(n) = n]``, read off a circular FFT convolution (aliasing only adds nonnegative
       terms, and ``_FFT_SLACK`` per cell covers the FFT's rounding); ``θ`` is chosen on a grid.
       It sees every cell's noise; its slack is Markov's (a factor of a few on ``miss``).
     - *binary*: for a set ``A`` of cells, ``n KL(P̂ ‖ P) >= n kl(P̂(A) ‖ P(A))`` (data
       processing), and the count in ``A`` is ``Bin(n, q(A))``: the probability that it lies
       strictly between the two cuts where ``n kl`` reaches ``x`` is a bound on ``miss``; the
       smallest over the ``k - 1`` sets of cells of largest ``q / P``.

   * **Every law at total-variation distance ``>= ε``** (`Alternative.tv`): a lower bound over
     the whole class. Deviations inside pools are invisible; they hide at most
     ``H = Σ_pools (P_g - min p in g)`` of TV. A law with mass ``t`` outside the support has
     ``TV(q, P) >= ε - t - H`` on the cells (``t`` of the TV is the outside mass, and
     renormalising the inside mass moves it by ``t`` more). For a law ``q`` on the cells at TV
     ``δ' >= δ`` let ``A = {q > P}``, ``π = P(A)``: then ``q(A) = π + δ'``, the count in ``A``
     is ``Bin(n, π + δ')``, and the test rejects once it reaches ``m_hi(π)``, the smallest count
     ``>= n π`` with ``n kl(m / n ‖ π) >= x`` (data processing again). So
     ``miss(q) <= M(δ) = sup_π P[Bin(n, π + δ) < m_hi(π)]`` over the masses ``π <= 1 - δ`` of
     the sets of cells: all of them with up to ``_SUBSET_CELLS`` cells, else the interval
     ``[min P, 1 - max(δ, min P)]`` by branch and bound (`_tv_inside_miss`: the largest
     interval bound, within 1 % or one binomial term of the sup). The
     audit's miss is at most ``sup_t (1 - t)^n M(ε - t - H)``, taken over a grid of ``t`` with
     the monotone bound ``(1 - t_a)^n M(ε - t_b - H)`` on each step ``[t_a, t_b]`` (one cell:
     exactly ``(1 - (ε - H))^n``). The bound ignores the noise of the cells other than the two
     sets, so it is conservative, more so with many cells.

   Every draw counted as rejected has ``n KL >= x (1 + 1e-9) + 1e-14 n``, beyond the rounding
   of ``G``, so the stated power is that of the test as implemented.

`statistical_audit` refuses (`UnderpoweredError`, before drawing anything) to run a sample that
cannot reach the requested power, and says how many samples would; a rejection is reported as
``"lossy"`` with the cells of largest standardised residual and every impossible outcome seen.
Per-sample seeds derive from one seed (`sample_seeds`), so an audit is reproducible.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from scipy import optimize, special, stats

from ..base.errors import InvalidAuditError, NondeterministicProgramError, UnderpoweredError
from ..base.validate import check_choice, check_int, check_number, check_seed, is_int
from .exact import as_outcome

__all__ = [
    "POLICY_ALPHA",
    "POLICY_MISS",
    "Alternative",
    "InvalidAuditError",
    "LawLike",
    "Pooling",
    "Residual",
    "StatisticalReport",
    "UnderpoweredError",
    "achieved_power",
    "audit_counts",
    "g_statistic",
    "pool_cells",
    "rejection_rate",
    "rejects",
    "required_samples",
    "sample_seeds",
    "statistical_audit",
]

#: False-alarm rate of each statistical test of the suite (docs/statistical-policy.md).
POLICY_ALPHA = 1e-8
#: Miss probability allowed to each negative control (a test that asserts a rejection).
POLICY_MISS = 1e-9

Outcome = Hashable
LawLike = Mapping[Any, Fraction | float]




def _check_law(law: LawLike, what: str) -> dict[Outcome, float]:
    if not isinstance(law, Mapping) or not law:
        raise InvalidAuditError(f"{what} must be a non-empty mapping outcome -> probability")
    out: dict[Outcome, float] = {}
    total = Fraction(0)
    for outcome, p in law.items():
        if not isinstance(p, Fraction | int | float) or isinstance(p, bool) \
                or (isinstance(p, float) and not math.isfinite(p)) or p < 0:
            raise InvalidAuditError(f"{what}: probability of {outcome!r} is {p!r}; need a "
                                    "finite number >= 0")
        total += Fraction(p)
        if p > 0:
            out[outcome] = float(p)
    if abs(float(total) - 1) > 1e-9:
        raise InvalidAuditError(f"{what}: probabilities sum to {float(total)!r}, not 1 "
                                "(tolerance 1e-9); pass the whole law")
    return out


@dataclass(frozen=True)
class Alternative:
    """The alternative the power is stated against: a TV distance ``epsilon`` or a wrong ``law``.

    >>> Alternative.tv(0.1).describe()
    'every law at TV >= 0.1'
    """

    epsilon: float | None = None
    law: Mapping[Any, Fraction | float] | None = field(default=None, repr=False)
    name: str = ""

    def __post_init__(self) -> None:
        if (self.epsilon is None) == (self.law is None):
            raise InvalidAuditError("an Alternative needs exactly one of epsilon or law")
        if self.epsilon is not None:
            check_number("epsilon", self.epsilon, low=0, high=1, error=InvalidAuditError)
            if not self.epsilon > 0:
                raise InvalidAuditError(f"epsilon must lie in (0, 1], got {self.epsilon!r}")
        if self.law is not None:
            _check_law(self.law, f"alternative law {self.name or ''}".strip())

    @classmethod
    def tv(cls, epsilon: float) -> Alternative:
        """Every law at total-variation distance at least ``epsilon`` from the reference."""
        return cls(epsilon=epsilon)

    @classmethod
    def of_law(cls, law: LawLike, name: str = "a wrong law") -> Alternative:
        """One specific wrong law (e.g. a zoo mutant's exact law)."""
        if not isinstance(law, Mapping):
            raise InvalidAuditError(f"alternative law must be a mapping outcome -> probability, "
                                    f"got {law!r}")
        return cls(law=dict(law), name=name)

    def describe(self) -> str:
        """A short description for reports."""
        return f"every law at TV >= {self.epsilon:g}" if self.epsilon is not None \
            else f"the law of {self.name}"


@dataclass(frozen=True)
class Pooling:
    """The cells of the test (fixed before sampling): groups of outcomes and their probabilities.

    ``hidden_mass`` bounds the TV distance that deviations inside pools can hide.
    """

    cells: tuple[tuple[Outcome, ...], ...]
    probs: tuple[float, ...]
    hidden_mass: float
    min_expected: float
    support: frozenset[Outcome]

    @property
    def df(self) -> int:
        """Degrees of freedom of the chi-square statistic."""
        return len(self.cells) - 1

    @property
    def pooled_outcomes(self) -> int:
        """How many outcomes sit in pools of two or more."""
        return sum(len(c) for c in self.cells if len(c) > 1)

    def cell_masses(self, law: LawLike) -> tuple[tuple[float, ...], float]:
        """The mass of ``law`` in each cell (in the cells' order) and outside the support.

        >>> pool_cells({"a": 0.5, "b": 0.5}, 100).cell_masses({"a": 0.25, "b": 0.5, "z": 0.25})
        ((0.25, 0.5), 0.25)
        """
        return _cell_masses(self, _check_law(law, "law"))


def _cell_masses(pooling: Pooling, law: Mapping[Outcome, float]
                 ) -> tuple[tuple[float, ...], float]:
    """`Pooling.cell_masses` of a law already checked."""
    index = {o: i for i, c in enumerate(pooling.cells) for o in c}
    masses = [0.0] * len(pooling.cells)
    outside = 0.0
    for o, p in law.items():
        if o in index:
            masses[index[o]] += p
        else:
            outside += p
    return tuple(masses), outside


def pool_cells(reference_law: LawLike, n_samples: int, min_expected: float = 5.0) -> Pooling:
    """The cells for ``n_samples`` draws (see the module docstring, step 1).

    >>> p = pool_cells({"a": 0.5, "b": 0.49, "c": 0.006, "d": 0.004}, 1000)
    >>> p.cells
    (('a',), ('b',), ('c', 'd'))
    """
    law = _check_law(reference_law, "reference law")
    _check_n(n_samples)
    if not min_expected > 0:
        raise InvalidAuditError(f"min_expected must be > 0, got {min_expected!r}")
    big = [o for o in law if n_samples * law[o] >= min_expected]
    small = sorted((o for o in law if n_samples * law[o] < min_expected),
                   key=lambda o: (law[o], repr(o)))
    cells: list[list[Outcome]] = [[o] for o in sorted(big, key=lambda o: (-law[o], repr(o)))]
    groups: list[list[Outcome]] = []
    current: list[Outcome] = []
    mass = 0.0
    for o in small:
        current.append(o)
        mass += law[o]
        if n_samples * mass >= min_expected:
            groups.append(current)
            current, mass = [], 0.0
    if current:
        if groups:
            groups[-1].extend(current)
        elif cells:
            cells[-1].extend(current)  # the least likely big cell absorbs the rare remainder
        else:
            groups.append(current)
    cells += groups
    probs = tuple(math.fsum(law[o] for o in c) for c in cells)
    hidden = math.fsum(pg - min(law[o] for o in c)
                       for c, pg in zip(cells, probs, strict=True) if len(c) > 1)
    return Pooling(tuple(tuple(c) for c in cells), probs, hidden, float(min_expected),
                   frozenset(law))


def _check_options(alternative: object, seed: object, min_expected: object, top: object,
                   on_underpowered: object, progress: object) -> None:
    """The audit's keyword arguments, refused by name before anything is drawn."""
    if alternative is not None and not isinstance(alternative, Alternative):
        raise InvalidAuditError(f"alternative must be an Alternative (Alternative.tv(epsilon) "
                                f"or Alternative.of_law(law)), got {alternative!r}")
    if seed is not None:
        check_seed("seed", seed, error=InvalidAuditError)
    check_number("min_expected", min_expected, positive=True, error=InvalidAuditError)
    check_int("top", top, low=0, error=InvalidAuditError)
    check_choice("on_underpowered", on_underpowered, ("raise", "report"),
                 error=InvalidAuditError)
    if progress is not None and not callable(progress):
        raise InvalidAuditError(f"progress must be a function wrapping the seed iterator, "
                                f"got {progress!r}")


def _check_n(n_samples: int) -> None:
    check_int("n_samples", n_samples, error=InvalidAuditError)


def _check_alpha(alpha: float, name: str = "alpha") -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float | Fraction) \
            or not 0 < alpha < 1:
        raise InvalidAuditError(f"{name} must lie in (0, 1), got {alpha!r}")


def _log_tail_bound(x: float, df: int) -> float:
    """log of Agrawal's bound on ``P[n KL >= x]`` with ``df + 1`` cells (0 where it is vacuous)."""
    if x <= df:
        return 0.0
    return min(0.0, -x + df * (1 + math.log(x / df)))


def _critical(df: int, alpha: float) -> float:
    """The threshold on ``G = 2 n KL``: twice the ``x`` where the tail bound equals ``alpha``."""
    if df <= 0:
        return math.inf
    target = math.log(alpha)
    hi = 2.0 * df + 2 * -target + 10
    while _log_tail_bound(hi, df) > target:
        hi *= 2
    x = optimize.brentq(lambda x: _log_tail_bound(x, df) - target, float(df), hi,
                        xtol=1e-12, rtol=1e-14)
    return 2.0 * float(x)


def g_statistic(observed: Sequence[float], expected: Sequence[float]) -> float:
    """``G = 2 Σ O ln(O / E)`` (terms with ``O = 0`` are 0)."""
    return 2.0 * math.fsum(o * math.log(o / e) for o, e in zip(observed, expected, strict=True)
                           if o > 0)


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
    x = _critical(df, alpha) / 2
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
    q, outside = _cell_masses(pooling, _check_law(law, "alternative law"))
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


def _power(pooling: Pooling, n: int, alpha: float, alternative: Alternative,
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
    _check_alpha(alpha)
    return _power(pool_cells(reference_law, n_samples, min_expected), n_samples, alpha,
                  alternative)


def required_samples(reference_law: LawLike, alternative: Alternative, *,
                     alpha: float = POLICY_ALPHA, power: float = 0.99,
                     min_expected: float = 5.0, max_samples: int = 10**9) -> int | None:
    """The smallest sample size (found by doubling, then bisection) that reaches ``power``.

    Returns None if even ``max_samples`` does not. Power is not exactly monotone in ``n``
    (pooling changes with ``n``); the returned size is checked to reach ``power`` itself.
    """
    _check_alpha(alpha)
    _check_alpha(power, "power")

    def ok(n: int) -> bool:  # achieved_power(...) >= power, stopping once that is known
        return _power(pool_cells(reference_law, n, min_expected), n, alpha, alternative,
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


@dataclass(frozen=True)
class Residual:
    """One cell of the test: observed and expected counts and the standardised residual."""

    cell: str
    observed: int
    expected: float
    residual: float


@dataclass(frozen=True)
class StatisticalReport:
    """The result of a statistical audit (see `statistical_audit`).

    Attributes:
        verdict: ``"lossless"`` (no deviation found, at the stated power), ``"lossy"``
            (rejected) or ``"inconclusive"`` (not rejected but underpowered; only when asked for
            with ``on_underpowered="report"``).
        statistic, df, p_value: ``G = 2 n KL`` over the cells, its degrees of freedom, and the
            finite-sample bound on its p-value (``inf`` and 0 when an impossible outcome was
            seen).
        asymptotic_p_value: ``chi2.sf(G, df)``, for reading only (the decision never uses it:
            it is anti-conservative far in the tail, see docs/statistical-policy.md).
        alpha, critical_value: the false-alarm rate (a guaranteed bound) and the G threshold.
        power, required_power, alternative: the power against the stated alternative.
        needed_samples: the sample size that reaches ``required_power``.
        impossible: outcomes seen that have probability 0 under the reference, with counts.
        residuals: the cells with the largest |standardised residual|, largest first.
        empirical_tv: TV distance between the empirical and the reference law (biased upward by
            sampling noise; ``noise_tv`` is its expectation under the reference).
        reproduced: ``(same, drawn again)``: how many seeds drawn twice gave the same outcome,
            for a sampler declared not to reproduce a seed (`dsi_ref.audit.serial`) or a lossy
            one that did not (``None`` otherwise).
        independence: for such a sampler, the summary of the test of independence from the
            previous sample that replaces the determinism check (empty otherwise).
    """

    verdict: Literal["lossless", "lossy", "inconclusive"]
    n_samples: int
    statistic: float
    df: int
    p_value: float
    alpha: float
    critical_value: float
    alternative: str
    power: float
    required_power: float
    needed_samples: int | None
    cells: int
    outcomes: int
    pooled_outcomes: int
    hidden_mass: float
    impossible: tuple[tuple[Outcome, int], ...]
    residuals: tuple[Residual, ...]
    empirical_tv: float
    noise_tv: float
    seed: int | None = None
    seconds: float = 0.0
    counts: Mapping[Outcome, int] = field(default_factory=dict, repr=False)
    asymptotic_p_value: float = math.nan
    reproduced: tuple[int, int] | None = None
    independence: str = ""

    @property
    def rejected(self) -> bool:
        """The audit found the sampler's law different from the reference."""
        return self.verdict == "lossy"

    @property
    def samples_per_second(self) -> float:
        """Sampling throughput (0 when not timed)."""
        return self.n_samples / self.seconds if self.seconds > 0 else 0.0

    def __bool__(self) -> bool:
        return self.verdict == "lossless"

    def __str__(self) -> str:
        head = (f"{self.verdict.upper()}: G = {self.statistic:.4g} (df {self.df}, p <= "
                f"{self.p_value:.3g}, asymptotic p {self.asymptotic_p_value:.3g}, alpha "
                f"{self.alpha:.0e}, critical {self.critical_value:.4g})"
                f" from {self.n_samples} samples over {self.cells} cells ({self.outcomes} "
                f"outcomes, {self.pooled_outcomes} pooled); power {self.power:.6g} against "
                f"{self.alternative} (required {self.required_power:g}); empirical TV "
                f"{self.empirical_tv:.4g} (noise level {self.noise_tv:.3g})")
        lines = [head]
        if self.reproduced is not None:
            lines.append(f"  seeds drawn again: {self.reproduced[0]} of {self.reproduced[1]} "
                         "gave the same outcome")
        if self.independence:
            lines.append(f"  {self.independence}")
        for outcome, count in self.impossible:
            lines.append(f"  impossible outcome {outcome!r} seen {count} times "
                         "(probability 0 under the reference)")
        for r in self.residuals:
            lines.append(f"  cell {r.cell}: observed {r.observed}, expected {r.expected:.1f}, "
                         f"standardised residual {r.residual:+.2f}")
        return "\n".join(lines)


def _label(cell: tuple[Outcome, ...]) -> str:
    if len(cell) == 1:
        return repr(cell[0])
    return f"pool of {len(cell)} ({', '.join(repr(o) for o in cell[:2])}, ...)"


def audit_counts(counts: Mapping[Outcome, int], reference_law: LawLike, *,
                 alternative: Alternative | None = None, alpha: float = POLICY_ALPHA,
                 power: float = 0.99, min_expected: float = 5.0, top: int = 5,
                 on_underpowered: Literal["raise", "report"] = "raise",
                 seed: int | None = None, seconds: float = 0.0) -> StatisticalReport:
    """The audit of already drawn outcomes (``counts``: outcome -> number of draws).

    For samplers that draw in batches; `statistical_audit` draws for you and refuses an
    underpowered plan before drawing.
    """
    _check_alpha(alpha)
    _check_alpha(power, "power")
    _check_options(alternative, seed, min_expected, top, on_underpowered, None)
    if not isinstance(counts, Mapping) or not all(is_int(c) for c in counts.values()):
        raise InvalidAuditError("counts must be a mapping outcome -> int number of draws")
    alternative = alternative or Alternative.tv(0.1)
    n = sum(int(c) for c in counts.values())
    _check_n(n)
    if any(int(c) < 0 for c in counts.values()):
        raise InvalidAuditError("counts must be >= 0")
    law = _check_law(reference_law, "reference law")
    pooling = pool_cells(law, n, min_expected)
    achieved = _power(pooling, n, alpha, alternative)
    underpowered = achieved < power
    needed = required_samples(law, alternative, alpha=alpha, power=power,
                              min_expected=min_expected) if underpowered else n
    if underpowered and on_underpowered == "raise":
        raise UnderpoweredError(n, achieved, power, needed, alternative.describe())
    impossible = tuple(sorted(((o, int(c)) for o, c in counts.items()
                               if c and o not in pooling.support), key=lambda oc: -oc[1]))
    observed = [sum(int(counts.get(o, 0)) for o in cell) for cell in pooling.cells]
    expected = [n * p for p in pooling.probs]
    crit = _critical(pooling.df, alpha)
    if impossible:
        statistic, p_value = math.inf, 0.0
    else:
        statistic = g_statistic(observed, expected)
        p_value = math.exp(_log_tail_bound(statistic / 2, pooling.df)) if pooling.df > 0 else 1.0
    asymptotic = float(stats.chi2.sf(statistic, pooling.df)) if pooling.df > 0 else 1.0
    rejected = bool(impossible) or (pooling.df > 0 and statistic >= crit)
    residuals = sorted(
        (Residual(_label(c), o, e, (o - e) / math.sqrt(e * (1 - p)) if p < 1 else 0.0)
         for c, o, e, p in zip(pooling.cells, observed, expected, pooling.probs, strict=True)),
        key=lambda r: -abs(r.residual))[:top]
    empirical_tv = 0.5 * math.fsum(
        [abs(int(counts.get(o, 0)) / n - p) for o, p in law.items()]
        + [c / n for _, c in impossible])
    noise_tv = 0.5 * math.fsum(_mean_abs_dev(n, p) for p in law.values())
    verdict: Literal["lossless", "lossy", "inconclusive"] = (
        "lossy" if rejected else "inconclusive" if underpowered else "lossless")
    return StatisticalReport(
        verdict=verdict, n_samples=n, statistic=statistic, df=pooling.df, p_value=p_value,
        alpha=alpha, critical_value=crit, alternative=alternative.describe(), power=achieved,
        required_power=power, needed_samples=needed, cells=len(pooling.cells),
        outcomes=len(law), pooled_outcomes=pooling.pooled_outcomes,
        hidden_mass=pooling.hidden_mass, impossible=impossible, residuals=tuple(residuals),
        empirical_tv=empirical_tv, noise_tv=noise_tv, seed=seed, seconds=seconds,
        counts=dict(counts), asymptotic_p_value=asymptotic)


def _mean_abs_dev(n: int, p: float) -> float:
    """``E|X/n - p|`` for ``X ~ Binomial(n, p)`` (normal approximation, exact enough here)."""
    return math.sqrt(2 * p * (1 - p) / (math.pi * n))


def sample_seeds(seed: int, n_samples: int) -> list[int]:
    """The per-sample seeds of an audit: 64-bit words of ``numpy.random.SeedSequence(seed)``.

    64 bits make a repeated seed (hence two identical samples) negligibly likely
    (probability about ``n² / 2^65``).
    """
    words = np.random.SeedSequence(seed).generate_state(n_samples, dtype=np.uint64)
    return [int(w) for w in words]


def _outcome(value: Any, seed: int | None = None) -> Outcome:
    """One sample as a hashable outcome (`dsi_ref.audit.exact.as_outcome`: a `Run` as its
    tokens, a list, array or tensor as a tuple; unhashable values refused). ``None`` is refused
    too (`InvalidAuditError`): a sampler that forgot its ``return`` would otherwise give an
    outcome outside every reference law, and a "lossy" verdict."""
    if value is None:
        raise InvalidAuditError(
            f"sample_fn returned None{'' if seed is None else f' for seed {seed}'}: return the "
            "generated tokens (e.g. run.tokens) or the Run (a missing return statement gives "
            "None)")
    return as_outcome(value, source="sample_fn returned")


def _check_determinism(sample_fn: Callable[[int], Any], drawn: list[tuple[int, Outcome]]) -> None:
    """Draw the seeds of ``drawn`` again: `NondeterministicProgramError` on a different outcome."""
    for s, outcome in drawn:
        again = _outcome(sample_fn(s), s)
        if again != outcome:
            raise NondeterministicProgramError(
                f"sample_fn is not a function of its seed: seed {s} gave {outcome!r}, then "
                f"{again!r} when drawn again after the sample; draw from a generator seeded "
                "from the seed (e.g. numpy.random.default_rng(seed)), not from a global or "
                "unseeded one", source="sample_fn")


def statistical_audit(sample_fn: Callable[[int], Any], reference_law: LawLike,
                      n_samples: int | None = None, *, alternative: Alternative | None = None,
                      alpha: float = POLICY_ALPHA, power: float = 0.99, seed: int = 0,
                      min_expected: float = 5.0, top: int = 5,
                      on_underpowered: Literal["raise", "report"] = "raise",
                      progress: Callable[[Iterable[int]], Iterable[int]] | None = None,
                      determinism_checks: int = 10,
                      sample_map: Callable[[Callable[[int], Any], list[int]], Iterable[Any]]
                      | None = None) -> StatisticalReport:
    """Audit ``sample_fn`` (``seed -> one generated sequence``) against ``reference_law``.

    ``sample_fn`` may draw from a generator of its own, seeded from ``seed`` (a black box cannot
    draw through `dsi_ref.Randomness`), but the same seed must give the same sample, or the audit
    would not be reproducible: after sampling, the first ``determinism_checks`` seeds are drawn
    again and a different outcome raises `NondeterministicProgramError` (naming the seed and both
    outcomes) instead of a verdict. This catches a sampler that ignores ``seed`` (a global or
    unseeded generator) unless its randomness rarely shows in the outcome: it misses with
    probability ``(Σ_x P(x)²)^determinism_checks``, e.g. below 1e-6 for 10 checks of a law
    whose most likely outcome has probability below 1/4. Unlike the exact audit, global
    generators are not forbidden here (``np.random.seed(seed)`` then ``np.random.*`` is a
    legitimate sampler). A sampler whose law the test already rejects is reported ``"lossy"``
    rather than refused (rejecting "independent draws from the reference" is sound whether or
    not the draws are seeded), with the number of re-drawn seeds that reproduced
    (``reproduced``) when some did not.

    Args:
        sample_fn: draws one outcome given a seed (a tuple of tokens, a list, or a `Run`; a
            ``None`` raises `InvalidAuditError`). For a ``program(rng)`` written against
            `dsi_ref.Randomness`, `dsi_ref.audit.sampling.sample_fn` builds it.
        reference_law: the exact law (e.g. `dsi_ref.target_distribution`).
        n_samples: sample size; ``None`` picks `required_samples` for ``power``.
        alternative: what the power is stated against (default: TV >= 0.1).
        alpha: false-alarm rate (default: the suite's per-test budget, `POLICY_ALPHA`).
        power: the power required before the audit may say ``"lossless"``.
        seed: root of the per-sample seeds (`sample_seeds`).
        min_expected: pooling threshold (expected count per cell).
        on_underpowered: ``"raise"`` (default) raises `UnderpoweredError` before sampling;
            ``"report"`` samples anyway and says ``"inconclusive"`` unless it rejects.
        progress: optional wrapper of the seed iterator (e.g. ``tqdm``).
        determinism_checks: how many seeds are sampled twice (0: none).
        sample_map: how the samples are drawn: ``sample_map(sample_fn, seeds)`` gives
            ``sample_fn(s)`` for each seed, in order (default: one by one, here). A parallel map
            (e.g. `dsi_ref.backends.ray.ray_map`) draws the same samples elsewhere, so the
            counts and the verdict do not depend on it.

    >>> import dsi_ref as dr
    >>> t = dr.TableLM.context_free((Fraction(1, 2), Fraction(1, 2)))
    >>> law = dr.target_distribution(t, (), 2)
    >>> r = statistical_audit(lambda s: dr.autoregressive(t, (), 2, dr.Sampler(s)).tokens, law,
    ...                       alternative=Alternative.tv(0.2), alpha=1e-6)
    >>> r.verdict, r.n_samples < 2000
    ('lossless', True)
    """
    _check_alpha(alpha)
    _check_alpha(power, "power")
    if not callable(sample_fn):
        raise InvalidAuditError(f"sample_fn must be a function seed -> outcome, got "
                                f"{sample_fn!r}")
    check_seed("seed", seed, error=InvalidAuditError)
    _check_options(alternative, seed, min_expected, top, on_underpowered, progress)
    alternative = alternative or Alternative.tv(0.1)
    law = _check_law(reference_law, "reference law")
    if n_samples is None:
        n_samples = required_samples(law, alternative, alpha=alpha, power=power,
                                     min_expected=min_expected)
        if n_samples is None:
            raise UnderpoweredError(0, 0.0, power, None, alternative.describe())
    _check_n(n_samples)
    achieved = _power(pool_cells(law, n_samples, min_expected), n_samples, alpha, alternative)
    if achieved < power and on_underpowered == "raise":
        raise UnderpoweredError(n_samples, achieved, power,
                                required_samples(law, alternative, alpha=alpha, power=power,
                                                 min_expected=min_expected),
                                alternative.describe())
    determinism_checks = check_int("determinism_checks", determinism_checks, low=0,
                                   error=InvalidAuditError)
    if sample_map is not None and not callable(sample_map):
        raise InvalidAuditError(f"sample_map must be a function (sample_fn, seeds) -> samples, "
                                f"got {sample_map!r}")
    seeds: Iterable[int] = sample_seeds(seed, n_samples)
    if progress is not None:
        seeds = progress(seeds)
    start = time.perf_counter()
    counts: Counter[Outcome] = Counter()
    first: list[tuple[int, Outcome]] = []
    samples: Iterable[tuple[int, Any]]
    if sample_map is None:
        samples = ((s, sample_fn(s)) for s in seeds)
    else:
        listed = list(seeds)
        samples = zip(listed, sample_map(sample_fn, listed), strict=True)
    for s, value in samples:
        outcome = _outcome(value, s)
        counts[outcome] += 1
        if len(first) < determinism_checks:
            first.append((s, outcome))
    seconds = time.perf_counter() - start
    report = audit_counts(counts, law, alternative=alternative, alpha=alpha, power=power,
                          min_expected=min_expected, top=top, on_underpowered=on_underpowered,
                          seed=seed, seconds=seconds)
    if report.rejected:  # lossy whether or not seeded: say how many seeds reproduce
        same = sum(_outcome(sample_fn(s), s) == outcome for s, outcome in first)
        return report if same == len(first) else replace(report, reproduced=(same, len(first)))
    _check_determinism(sample_fn, first)
    return report


def rejection_rate(true_law: LawLike, reference_law: LawLike, n_samples: int, repeats: int,
                   rng: np.random.Generator, *, alpha: float = POLICY_ALPHA,
                   min_expected: float = 5.0) -> float:
    """How often the audit rejects samples of size ``n_samples`` drawn from ``true_law``.

    Simulates ``repeats`` multinomial samples (vectorised) and applies the exact decision rule of
    `audit_counts`: the false-alarm rate when ``true_law`` is the reference, the power otherwise.
    Used to check ``alpha`` (the finite-sample threshold) and the stated power (the G test's,
    exact or a proven bound) against simulation.
    """
    _check_alpha(alpha)
    _check_n(n_samples)
    ref = _check_law(reference_law, "reference law")
    true = _check_law(true_law, "true law")
    pooling = pool_cells(ref, n_samples, min_expected)
    outcomes = list(true)
    probs = np.array([true[o] for o in outcomes], dtype=np.float64)
    probs /= probs.sum()  # float noise only: _check_law bounds |sum - 1| <= 1e-9
    draws = rng.multinomial(n_samples, probs, size=repeats)  # (repeats, outcomes)
    index = {o: i for i, c in enumerate(pooling.cells) for o in c}
    to_cell = np.zeros((len(outcomes), len(pooling.cells) + 1))
    for j, o in enumerate(outcomes):
        to_cell[j, index.get(o, len(pooling.cells))] = 1.0
    cell_counts = draws @ to_cell  # (repeats, cells + 1); the last column: impossible outcomes
    return float(rejects(cell_counts, pooling, alpha=alpha).mean())


def rejects(counts: np.ndarray, pooling: Pooling, *, alpha: float = POLICY_ALPHA) -> np.ndarray:
    """The decision of `audit_counts` on many samples at once, given by their counts per cell.

    ``counts`` has one row per sample: the number of draws in each cell of ``pooling`` (in its
    order), then the number of draws outside the reference support (last column); the sample
    size is the row's sum. A row is rejected when it has a draw outside the support or when
    ``G = 2 Σ O ln(O / E)`` over the cells reaches the threshold of ``alpha``
    (`rejection_rate` simulates with it; the power tests draw the pooled counts directly).

    >>> pooling = pool_cells({"a": 0.5, "b": 0.5}, 100)
    >>> rejects(np.array([[50, 50, 0], [20, 80, 0], [50, 49, 1]]), pooling, alpha=1e-3).tolist()
    [False, True, True]
    """
    _check_alpha(alpha)
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[1] != len(pooling.cells) + 1:
        raise InvalidAuditError(f"counts must have one row per sample and {len(pooling.cells) + 1} "
                                f"columns (the cells, then the draws outside the support), got "
                                f"shape {counts.shape}")
    n = counts.sum(axis=1, keepdims=True)
    inside = counts[:, :-1]
    expected = n * np.array(pooling.probs)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(inside > 0, inside * np.log(inside / expected), 0.0)
    statistic = 2.0 * terms.sum(axis=1)
    crit = _critical(pooling.df, alpha)
    return np.asarray((counts[:, -1] > 0) | (statistic >= crit))


def laws_tv(p: LawLike, q: LawLike) -> float:
    """Total-variation distance of two laws given as mappings (floats)."""
    keys = set(p) | set(q)
    return 0.5 * math.fsum(abs(float(p.get(k, 0)) - float(q.get(k, 0))) for k in keys)

