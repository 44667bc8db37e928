"""The statistical audit's design, fixed before any draw: the policy's rates, the alternatives
the power is stated against, the cells (pooling), the statistic ``G`` and its finite-sample
threshold, and the checks of the audit's arguments (`dsi_ref.audit.statistical`, steps 1-2)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from scipy import optimize

from ...base.errors import InvalidAuditError
from ...base.validate import check_choice, check_int, check_number, check_seed

__all__ = ["POLICY_ALPHA", "POLICY_MISS", "Alternative", "LawLike", "Outcome", "Pooling",
           "cell_masses_of", "check_alpha", "check_law", "check_n", "check_options",
           "critical_value", "g_statistic", "log_tail_bound", "pool_cells"]

#: False-alarm rate of each statistical test of the suite (docs/statistical-policy.md).
POLICY_ALPHA = 1e-8
#: Miss probability allowed to each negative control (a test that asserts a rejection).
POLICY_MISS = 1e-9

Outcome = Hashable
LawLike = Mapping[Any, Fraction | float]


def check_law(law: LawLike, what: str) -> dict[Outcome, float]:
    """``law`` as ``{outcome: float}`` (zeros dropped): `InvalidAuditError` naming ``what`` unless
    it is a non-empty mapping of finite probabilities >= 0 summing to 1 (within 1e-9)."""
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
            check_law(self.law, f"alternative law {self.name or ''}".strip())

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
        return cell_masses_of(self, check_law(law, "law"))


def cell_masses_of(pooling: Pooling, law: Mapping[Outcome, float]
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
    law = check_law(reference_law, "reference law")
    check_n(n_samples)
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


def check_options(alternative: object, seed: object, min_expected: object, top: object,
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


def check_n(n_samples: int) -> None:
    """`InvalidAuditError` unless ``n_samples`` is an int >= 1."""
    check_int("n_samples", n_samples, error=InvalidAuditError)


def check_alpha(alpha: float, name: str = "alpha") -> None:
    """`InvalidAuditError` unless ``alpha`` (or the rate called ``name``) lies in (0, 1)."""
    if isinstance(alpha, bool) or not isinstance(alpha, int | float | Fraction) \
            or not 0 < alpha < 1:
        raise InvalidAuditError(f"{name} must lie in (0, 1), got {alpha!r}")


def log_tail_bound(x: float, df: int) -> float:
    """log of Agrawal's bound on ``P[n KL >= x]`` with ``df + 1`` cells (0 where it is vacuous)."""
    if x <= df:
        return 0.0
    return min(0.0, -x + df * (1 + math.log(x / df)))


def critical_value(df: int, alpha: float) -> float:
    """The threshold on ``G = 2 n KL``: twice the ``x`` where the tail bound equals ``alpha``."""
    if df <= 0:
        return math.inf
    target = math.log(alpha)
    hi = 2.0 * df + 2 * -target + 10
    while log_tail_bound(hi, df) > target:
        hi *= 2
    x = optimize.brentq(lambda x: log_tail_bound(x, df) - target, float(df), hi,
                        xtol=1e-12, rtol=1e-14)
    return 2.0 * float(x)


def g_statistic(observed: Sequence[float], expected: Sequence[float]) -> float:
    """``G = 2 Σ O ln(O / E)`` (terms with ``O = 0`` are 0)."""
    return 2.0 * math.fsum(o * math.log(o / e) for o, e in zip(observed, expected, strict=True)
                           if o > 0)
