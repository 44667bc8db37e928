"""What the exact engine reports: laws, outcomes, and the witness of a schedule dependence.

A law is a ``dict[outcome, Fraction]`` with zero-probability outcomes left out; `as_outcome` is
the one conversion of a program's return value into an outcome; a `Witness` (a path of
`WitnessStep` s, the scheduler's two options and the laws they lead to) is what
`dsi_ref.base.errors.ScheduleDependenceError` carries. `readable` and `total_variation` format
and compare laws. Re-exported by `dsi_ref.audit.exact`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeAlias, cast

from ...base.errors import InvalidAuditError
from ...base.randomness import Key

__all__ = ["READABLE_DENOMINATOR", "Law", "Witness", "WitnessStep", "as_outcome",
           "check_program", "readable", "total_variation"]

Law: TypeAlias = dict[Any, Fraction]


@dataclass(frozen=True)
class WitnessStep:
    """One choice on a witness path: what was chosen, with which probability (None: scheduler)."""

    kind: str  # "categorical" | "bernoulli" | "choose"
    key: Key
    chosen: str
    probability: Fraction | None

    def __str__(self) -> str:
        who = "scheduler" if self.probability is None else f"p={readable(self.probability)}"
        key = "" if self.key is None else f" {self.key!r}"
        return f"{self.kind}{key} -> {self.chosen} ({who})"


@dataclass(frozen=True)
class Witness:
    """A nondeterministic choice whose options lead to different laws."""

    path: tuple[WitnessStep, ...]
    options: tuple[str, str]
    laws: tuple[Law, Law]
    path_probability: Fraction

    @property
    def discrepancy(self) -> tuple[Any, Fraction, Fraction]:
        """The outcome whose probability differs most between the two options, and both values."""
        a, b = self.laws
        worst = max(set(a) | set(b),
                    key=lambda v: (abs(a.get(v, Fraction(0)) - b.get(v, Fraction(0))), repr(v)))
        return worst, a.get(worst, Fraction(0)), b.get(worst, Fraction(0))

    def __str__(self) -> str:
        steps = "\n".join(f"    {i + 1}. {s}" for i, s in enumerate(self.path)) or "    (start)"
        worst, pa, pb = self.discrepancy
        return (f"schedule-dependent: after the path (probability "
                f"{readable(self.path_probability)})\n"
                f"{steps}\n  the scheduler's options {self.options[0]} and {self.options[1]} "
                f"lead to different laws;\n  e.g. P({worst!r}) = {readable(pa)} vs "
                f"{readable(pb)} (TV = {readable(total_variation(*self.laws))})")


#: Largest denominator `readable` prints as a fraction.
READABLE_DENOMINATOR = 10_000


def readable(x: Fraction | float | int) -> str:
    """A probability for a message: a small fraction as is (``3/8``), anything else as a short
    decimal prefixed with ``~`` (``~0.405063``, ``~3.7e-17``). For display only: comparisons
    stay exact.

    >>> readable(Fraction(3, 8)), readable(Fraction(1, 3) + Fraction(1, 10**20))
    ('3/8', '~0.333333')
    """
    if isinstance(x, Fraction | int) and Fraction(x).denominator <= READABLE_DENOMINATOR:
        return str(x)
    return f"~{float(x):.6g}"


def total_variation(p: Law, q: Law) -> Fraction:
    """Total-variation distance ``(1/2) Σ_x |p(x) − q(x)|`` between two exact laws.

    Raises:
        InvalidAuditError: ``p`` or ``q`` is not a mapping ``outcome -> probability``.
    """
    for name, law in (("p", p), ("q", q)):
        if not isinstance(law, Mapping):
            raise InvalidAuditError(f"total_variation's {name} must be a law (a mapping outcome "
                                    f"-> probability, e.g. from exact_distribution), got "
                                    f"{law!r}")
    keys = set(p) | set(q)
    return sum((abs(p.get(x, Fraction(0)) - q.get(x, Fraction(0))) for x in keys),
               Fraction(0)) / 2


def as_outcome(value: Any, *, source: str = "the program returned") -> Hashable:
    """A program's return value as an outcome of its law: a `Run` (anything with ``tokens``)
    counts as its tokens; a list, a numpy array or a torch tensor becomes a tuple of Python
    scalars (nested: a tuple of tuples; a tensor hashes by identity and an array not at all, so
    neither can be an outcome itself); any other hashable value is kept as is. The statistical
    audit converts its samples the same way. Anything still unhashable is refused.

    ``source`` starts the error message (who returned the value). This is the one conversion
    of outcomes: the statistical audit uses it for its samples.

    Raises:
        InvalidAuditError: an unhashable value that is none of the above (a dict, a set...).

    >>> import numpy as np
    >>> as_outcome([1, 0]), as_outcome(np.array([[1, 0]])), as_outcome("a")
    ((1, 0), ((1, 0),), 'a')
    """
    if type(value) is tuple and all(type(v) is int for v in value):
        return value  # the usual outcome: nothing to convert
    value = getattr(value, "tokens", value)
    if type(value).__module__.split(".")[0] in ("numpy", "torch") and hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return tuple(as_outcome(v, source=source) for v in value)
    try:
        hash(value)
    except TypeError:
        raise InvalidAuditError(f"{source} an unhashable value {value!r} "
                                f"({type(value).__name__}); return a tuple of tokens (e.g. "
                                "run.tokens), a list or an array") from None
    return cast(Hashable, value)


def check_program(program: object) -> None:
    """Refuse (`InvalidAuditError`) a ``program`` that is not a callable ``rng -> value``."""
    if not callable(program):
        raise InvalidAuditError(f"the program must be a callable rng -> outcome (e.g. lambda "
                                f"rng: decoder(..., rng).tokens), got {program!r}")

