"""Auditing an engine that does not reproduce a seed: what replaces the determinism check.

`dsi_ref.audit.statistical.statistical_audit` draws a few seeds twice and refuses a sampler
that gives another outcome the second time (`NondeterministicProgramError`): a sampler that
ignores its seed draws from state the audit cannot see, and its samples need not be independent,
which the test assumes. Some correct engines do not reproduce a seed by design: vLLM's
probabilistic drafts draw their noise from an unseeded generator, and its suffix decoding
drafts from a cache of earlier outputs. Such an engine is declared (``reproducible=False``,
with the reason) and audited thus:

1. **The share that reproduces** (`reproduction_share`): the first seeds are drawn again and
   the number that give the same outcome is reported, not judged.
2. **Serial dependence at every lag up to ``L``** (`serial_check`), in place of the refusal.
   The alternative is stated: an engine that, with probability at least ``π`` (default 1/2),
   returns the output of the request ``ℓ`` before instead of a fresh sample, for some lag
   ``1 ≤ ℓ ≤ L`` (default 8): a cache of earlier outputs, a generator shared across requests.
   For each lag the samples ``X_1, ..., X_n`` (in seed order) are cut into **disjoint** pairs
   ``(X_i, X_{i+ℓ})`` (``i`` in the even blocks of length ``ℓ``, so no sample is in two pairs),
   and the statistic is ``T = Σ (1{X_{i+ℓ} = X_i} − P(X_i))`` over the ``m`` pairs: each pair's
   equality centred by the probability the reference law ``P`` gives it, knowing ``X_i``.

   *Under independence* the ``m`` terms are independent, of mean 0, at most 1, and of variance
   ``v = Σ_o P(o)² (1 − P(o))``; Bernstein's inequality bounds ``P(T ≥ t)`` by
   ``exp(−t² / (2 (m v + t/3)))``, and a lag rejects when ``T`` reaches the ``t`` where that
   bound is ``α / L``. *Under the alternative*, given everything drawn before, a term has mean
   at least ``π (1 − max_o P(o))`` (a copy makes the pair equal; a fresh sample is equal with
   probability ``P(X_i)``) and lies in an interval of length 1, so Freedman's inequality for
   martingales bounds the chance that ``T`` stays below ``t``: one minus it is the **stated
   power**, a lower bound, the smallest over the lags. When it is below the audit's target the
   report says **not checked** and the audit's verdict is ``"inconclusive"``: never lossless by
   silence. The signal per pair, ``π (1 − max P)``, is small when the reference is nearly a point
   mass: a copy then rarely changes an outcome, and the check needs more samples to see it. A
   reference that is a point mass needs no check (every sample is its outcome).

The main test and the serial test split the audit's ``alpha`` in two halves, so the
false-alarm rate of the whole audit stays ``alpha``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from .statistical import LawLike

__all__ = ["SerialReport", "disjoint_pairs", "reproduction_share", "serial_check"]

Outcome = Hashable


@dataclass(frozen=True)
class SerialReport:
    """The test of serial dependence of `serial_check`.

    Attributes:
        rejected: some lag's count of equal pairs reached its threshold.
        lags: ``L``: the lags ``1..L`` tested.
        copy_probability: ``π``, the smallest copy probability the power is stated against.
        alpha: the false-alarm rate of the whole test (split over the lags).
        worst_lag: the lag with the smallest p-value.
        worst_p_value: a bound on that p-value (Bernstein's, under independence).
        power: the power against a copy at any one lag ``≤ L`` with probability ``≥ π``: the
            smallest over the lags of a lower bound (0 when no pair can be formed).
        required_power: the power the check must state to count as done.
        pairs: the number of disjoint pairs at each lag, in lag order.
    """

    rejected: bool
    lags: int
    copy_probability: float
    alpha: float
    worst_lag: int
    worst_p_value: float
    power: float
    required_power: float
    pairs: tuple[int, ...]

    @property
    def checked(self) -> bool:
        """The check states at least its required power (or found dependence)."""
        return self.rejected or self.power >= self.required_power

    def __str__(self) -> str:
        verdict = ("dependent" if self.rejected else "no dependence found" if self.checked
                   else "NOT CHECKED (power below target)")
        return (f"serial dependence at lags 1..{self.lags}: {verdict} (disjoint pairs, "
                f"{min(self.pairs, default=0)}-{max(self.pairs, default=0)} a lag, alpha "
                f"{self.alpha:.0e}; smallest p <= {self.worst_p_value:.3g} at lag "
                f"{self.worst_lag}; "
                f"power {self.power:.6f} against a copy of the output {self.lags} or fewer "
                f"requests before with probability >= {self.copy_probability:g})")


def disjoint_pairs(n: int, lag: int) -> list[tuple[int, int]]:
    """The pairs ``(i, i + lag)`` with ``i`` in the even blocks of length ``lag``: every index
    below ``n`` is in at most one pair.

    >>> disjoint_pairs(7, 2)
    [(0, 2), (1, 3), (4, 6)]
    """
    return [(i, i + lag) for i in range(n - lag) if (i // lag) % 2 == 0]


def _bernstein_threshold(m: int, variance: float, alpha: float) -> float:
    """The ``t`` with ``exp(−t² / (2 (m v + t/3))) = alpha``."""
    a = math.log(1 / alpha)
    return a / 3 + math.sqrt(a * a / 9 + 2 * a * m * variance)


def serial_check(outcomes: Sequence[Outcome], reference_law: LawLike, *, alpha: float,
                 lags: int = 8, copy_probability: float = 0.5,
                 power: float = 0.99) -> SerialReport:
    """Test the samples ``outcomes`` (in seed order) for copies of earlier outputs at every lag
    ``1..lags`` against the reference law, at false-alarm rate ``alpha`` split over the lags,
    with the power stated against a copy probability ``>= copy_probability`` (module docstring).

    >>> law = {(0,): 0.25, (1,): 0.25, (2,): 0.25, (3,): 0.25}
    >>> cycle = [(i * 7 % 4,) for i in range(400)]   # a lag-4 cycle: every 4th sample repeats
    >>> serial_check(cycle, law, alpha=1e-6).rejected
    True
    """
    if not isinstance(lags, int) or lags < 1 or not 0 < copy_probability <= 1:
        raise ValueError(f"need an int lags >= 1 and 0 < copy_probability <= 1, got {lags!r}, "
                         f"{copy_probability!r}")
    prob = {o: float(p) for o, p in reference_law.items() if p > 0}
    variance = sum(p * p * (1 - p) for p in prob.values())
    drift = copy_probability * (1 - max(prob.values()))
    share = alpha / lags
    pairs = tuple(len(disjoint_pairs(len(outcomes), lag)) for lag in range(1, lags + 1))
    if drift == 0:  # a point mass: every sample is its outcome, dependent or not
        return SerialReport(False, lags, copy_probability, alpha, 1, 1.0, 1.0, power, pairs)
    rejected, worst, stated = False, (2.0, 0), 1.0
    for lag in range(1, lags + 1):
        chosen = disjoint_pairs(len(outcomes), lag)
        m = len(chosen)
        if m == 0:
            stated = 0.0
            continue
        t = _bernstein_threshold(m, variance, share)
        total = sum(float(outcomes[i] == outcomes[j]) - prob.get(outcomes[i], 0.0)
                    for i, j in chosen)
        p_value = (math.exp(-total * total / (2 * (m * variance + total / 3))) if total > 0
                   else 1.0)
        rejected |= total >= t
        worst = min(worst, (min(p_value, 1.0), lag))
        slack = m * drift - t  # Freedman: increments in an interval of length 1, variance <= 1/4
        miss = math.exp(-slack * slack / (2 * (m / 4 + slack / 3))) if slack > 0 else 1.0
        stated = min(stated, 1 - miss)
    return SerialReport(rejected, lags, copy_probability, alpha, worst[1], worst[0], stated,
                        power, pairs)


def reproduction_share(sample_fn: Callable[[int], Any],
                       drawn: Sequence[tuple[int, Outcome]],
                       as_outcome: Callable[[Any], Outcome] = tuple) -> tuple[int, int]:
    """``(reproduced, drawn again)``: how many of the ``(seed, outcome)`` pairs give the same
    outcome when ``sample_fn`` draws the seed again."""
    same = sum(as_outcome(sample_fn(seed)) == outcome for seed, outcome in drawn)
    return same, len(drawn)
