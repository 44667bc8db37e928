"""The verdict of drawn counts: `audit_counts` and the `StatisticalReport` it returns."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from scipy import stats

from ...base.errors import InvalidAuditError, UnderpoweredError
from ...base.validate import is_int
from .design import (
    POLICY_ALPHA,
    Alternative,
    LawLike,
    Outcome,
    check_alpha,
    check_law,
    check_n,
    check_options,
    critical_value,
    g_statistic,
    log_tail_bound,
    pool_cells,
)
from .power import required_samples, stated_power

__all__ = ["Residual", "StatisticalReport", "audit_counts"]


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
    check_alpha(alpha)
    check_alpha(power, "power")
    check_options(alternative, seed, min_expected, top, on_underpowered, None)
    if not isinstance(counts, Mapping) or not all(is_int(c) for c in counts.values()):
        raise InvalidAuditError("counts must be a mapping outcome -> int number of draws")
    alternative = alternative or Alternative.tv(0.1)
    n = sum(int(c) for c in counts.values())
    check_n(n)
    if any(int(c) < 0 for c in counts.values()):
        raise InvalidAuditError("counts must be >= 0")
    law = check_law(reference_law, "reference law")
    pooling = pool_cells(law, n, min_expected)
    achieved = stated_power(pooling, n, alpha, alternative)
    underpowered = achieved < power
    needed = required_samples(law, alternative, alpha=alpha, power=power,
                              min_expected=min_expected) if underpowered else n
    if underpowered and on_underpowered == "raise":
        raise UnderpoweredError(n, achieved, power, needed, alternative.describe())
    impossible = tuple(sorted(((o, int(c)) for o, c in counts.items()
                               if c and o not in pooling.support), key=lambda oc: -oc[1]))
    observed = [sum(int(counts.get(o, 0)) for o in cell) for cell in pooling.cells]
    expected = [n * p for p in pooling.probs]
    crit = critical_value(pooling.df, alpha)
    if impossible:
        statistic, p_value = math.inf, 0.0
    else:
        statistic = g_statistic(observed, expected)
        p_value = math.exp(log_tail_bound(statistic / 2, pooling.df)) if pooling.df > 0 else 1.0
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
