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
3. **Power against a named alternative** (`Alternative`), by the noncentral chi-square
   approximation of ``G`` (noncentrality ``λ = n Σ (Q - P)² / P`` over the cells), compared with
   the threshold ``2 x_alpha`` of step 2:

   * a specific wrong law ``q`` (say a zoo mutant's exact law): power
     ``max(P[ncx2(df, λ) > crit], 1 - (1 - t)^n)``, ``t`` = mass of ``q`` outside the reference
     support (each such draw rejects on its own);
   * every law at total-variation distance ``>= ε``: a lower bound over the whole class. Pooling
     hides at most ``H = Σ_pools (P_g - min p in g)`` of TV inside pools; a law with in-support
     deviation of total ``S`` over the cells has ``λ >= n S²`` (Cauchy-Schwarz), and a law that
     moves mass ``t`` outside the support has ``S >= 2ε - t - 2H``; the bound is the minimum
     over ``t`` of ``max(1 - (1 - t)^n, P[ncx2(df, n (2ε - t - 2H)²) > crit])``.

`statistical_audit` refuses (`UnderpoweredError`, before drawing anything) to run a sample that
cannot reach the requested power, and says how many samples would; a rejection is reported as
``"lossy"`` with the cells of largest standardised residual and every impossible outcome seen.
Per-sample seeds derive from one seed (`sample_seeds`), so an audit is reproducible.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from scipy import optimize, stats

from ..base.errors import InvalidAuditError, NondeterministicProgramError, UnderpoweredError
from ..base.validate import check_choice, check_int, check_number, check_seed, is_int
from .exact import as_outcome

__all__ = [
    "POLICY_ALPHA",
    "POLICY_MISS",
    "Alternative",
    "InvalidAuditError",
    "Pooling",
    "Residual",
    "StatisticalReport",
    "UnderpoweredError",
    "achieved_power",
    "audit_counts",
    "g_statistic",
    "pool_cells",
    "rejection_rate",
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


def _chi2_power(df: int, noncentrality: float, crit: float) -> float:
    if df <= 0 or noncentrality <= 0:
        return 0.0 if df <= 0 else float(stats.chi2.sf(crit, df))
    return float(stats.ncx2.sf(crit, df, noncentrality))


def _power(pooling: Pooling, n: int, alpha: float, alternative: Alternative) -> float:
    crit = _critical(pooling.df, alpha)
    if alternative.law is not None:
        alt = _check_law(alternative.law, "alternative law")
        index = {o: i for i, c in enumerate(pooling.cells) for o in c}
        q = [0.0] * len(pooling.cells)
        outside = 0.0
        for o, p in alt.items():
            if o in index:
                q[index[o]] += p
            else:
                outside += p
        lam = n * math.fsum((qg - pg) ** 2 / pg for qg, pg in zip(q, pooling.probs, strict=True))
        return max(_chi2_power(pooling.df, lam, crit), -math.expm1(n * math.log1p(-outside))
                   if outside < 1 else 1.0)
    eps = float(alternative.epsilon or 0.0)
    hidden = pooling.hidden_mass

    def outside_power(t: float) -> float:
        return -math.expm1(n * math.log1p(-t)) if t < 1 else 1.0

    if pooling.df <= 0:  # no chi-square part: only impossible outcomes can reject
        return outside_power(max(0.0, eps - hidden))

    def inside_power(t: float) -> float:
        return _chi2_power(pooling.df, n * max(0.0, 2 * eps - t - 2 * hidden) ** 2, crit)

    # outside_power increases and inside_power decreases in t: the minimum of the max is at the
    # crossing (or at an end point).
    if outside_power(0.0) >= inside_power(0.0):
        return outside_power(0.0)
    if inside_power(eps) >= outside_power(eps):
        return inside_power(eps)
    t_star = optimize.brentq(lambda t: outside_power(t) - inside_power(t), 0.0, eps,
                             xtol=1e-14, rtol=1e-12)
    return max(outside_power(t_star), inside_power(t_star))


def achieved_power(reference_law: LawLike, alternative: Alternative, n_samples: int, *,
                   alpha: float = POLICY_ALPHA, min_expected: float = 5.0) -> float:
    """The power of the audit with ``n_samples`` draws against ``alternative`` (approximate).

    >>> law = {(0,): 0.5, (1,): 0.5}
    >>> round(achieved_power(law, Alternative.tv(0.1), 1000, alpha=1e-6), 3)
    0.635
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

    def ok(n: int) -> bool:
        return achieved_power(reference_law, alternative, n, alpha=alpha,
                              min_expected=min_expected) >= power

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


def _outcome(value: Any) -> Outcome:
    """One sample as a hashable outcome (`dsi_ref.audit.exact.as_outcome`: a `Run` as its
    tokens, a list, array or tensor as a tuple; unhashable values refused)."""
    return as_outcome(value, source="sample_fn returned")


def _check_determinism(sample_fn: Callable[[int], Any], drawn: list[tuple[int, Outcome]]) -> None:
    """Draw the seeds of ``drawn`` again: `NondeterministicProgramError` on a different outcome."""
    for s, outcome in drawn:
        again = _outcome(sample_fn(s))
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
    legitimate sampler).

    Args:
        sample_fn: draws one outcome given a seed (a tuple of tokens, a list, or a `Run`).
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
        outcome = _outcome(value)
        counts[outcome] += 1
        if len(first) < determinism_checks:
            first.append((s, outcome))
    seconds = time.perf_counter() - start
    _check_determinism(sample_fn, first)
    return audit_counts(counts, law, alternative=alternative, alpha=alpha, power=power,
                        min_expected=min_expected, top=top, on_underpowered=on_underpowered,
                        seed=seed, seconds=seconds)


def rejection_rate(true_law: LawLike, reference_law: LawLike, n_samples: int, repeats: int,
                   rng: np.random.Generator, *, alpha: float = POLICY_ALPHA,
                   min_expected: float = 5.0) -> float:
    """How often the audit rejects samples of size ``n_samples`` drawn from ``true_law``.

    Simulates ``repeats`` multinomial samples (vectorised) and applies the exact decision rule of
    `audit_counts`: the false-alarm rate when ``true_law`` is the reference, the power otherwise.
    Used to check the chi-square approximations behind ``alpha`` and the stated power.
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
    expected = n_samples * np.array(pooling.probs)
    inside = cell_counts[:, :-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(inside > 0, inside * np.log(inside / expected), 0.0)
    statistic = 2.0 * terms.sum(axis=1)
    crit = _critical(pooling.df, alpha)
    rejected = (cell_counts[:, -1] > 0) | (statistic >= crit)
    return float(rejected.mean())


def laws_tv(p: LawLike, q: LawLike) -> float:
    """Total-variation distance of two laws given as mappings (floats)."""
    keys = set(p) | set(q)
    return 0.5 * math.fsum(abs(float(p.get(k, 0)) - float(q.get(k, 0))) for k in keys)

