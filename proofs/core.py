"""`Theorem` objects and `prove`: one named claim, its hypotheses, the paper's wording it
formalises, the proof method, and the lookaheads it is proved for.

A theorem is checked per instance (one lookahead ``k`` at a time, because z3 handles ``a^k``
with symbolic ``k`` poorly: for a numeric ``k`` every power is a polynomial, which z3's nlsat
decides), or once when its formula does not involve ``k`` symbolically-as-an-exponent. Its verdict
is PROVED when every instance is proved, REFUTED as soon as one instance has a counterexample
(reported with its ``k``), and UNKNOWN otherwise; UNKNOWN never counts as proved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .solver import Check, Verdict, check_claim

__all__ = ["Theorem", "TheoremResult", "prove"]

#: ``instance -> list of sympy booleans`` (the instance is a lookahead ``k``, or ``None``).
Formula = Callable[[Any], Any]


@dataclass(frozen=True)
class Theorem:
    """A named claim about `theory`'s closed forms.

    Args:
        name: identifier (snake case), shown in the table.
        wording: the sentence of the paper (or of docs/paper.md / the issue) that it formalises.
        method: how it is proved, stated for the reader (per-k range, abstraction, lemmas).
        hypotheses: ``instance -> list`` of sympy booleans (the domain included explicitly, so
            that dropping an assumption is visible).
        claim: ``instance -> sympy boolean``.
        instances: the lookaheads it is checked for (``(None,)`` for one symbolic check).
        expected: PROVED for a theorem, REFUTED for a negative result (an assumption dropped on
            purpose); the audit fails when the verdict differs.
        dropped: for a negative result, the assumption that was dropped.
        witness: optional ``(counterexample, k) -> text`` describing what the counterexample
            means (e.g. the schedule in which a task waits), shown under the table.
    """

    name: str
    wording: str
    method: str
    hypotheses: Formula
    claim: Formula
    instances: tuple[int | None, ...] = (None,)
    expected: Verdict = Verdict.PROVED
    dropped: str = ""
    witness: Callable[[dict[str, Any], int | None], str] | None = None

    def __post_init__(self) -> None:
        if not self.instances:
            raise ValueError(f"theorem {self.name}: no instances to check")
        if self.expected is Verdict.UNKNOWN:
            raise ValueError(f"theorem {self.name}: expected verdict must be PROVED or REFUTED")
        if self.expected is Verdict.REFUTED and not self.dropped:
            raise ValueError(f"theorem {self.name}: a negative result must say what it drops")

    @property
    def range_label(self) -> str:
        """``k=1..32`` or ``symbolic``."""
        ks = [i for i in self.instances if i is not None]
        if not ks:
            return "symbolic"
        if ks == list(range(ks[0], ks[-1] + 1)):
            return f"k={ks[0]}..{ks[-1]}"
        return "k=" + ",".join(map(str, ks))


@dataclass(frozen=True)
class TheoremResult:
    """The verdict of a theorem over its instances."""

    theorem: Theorem
    verdict: Verdict
    seconds: float
    instances_checked: int
    counterexample: dict[str, Fraction | int | str] | None = None
    counterexample_k: int | None = None
    reason: str = ""

    @property
    def proved(self) -> bool:
        """True only for PROVED (UNKNOWN never counts)."""
        return self.verdict is Verdict.PROVED

    @property
    def as_expected(self) -> bool:
        """The verdict is the one the theorem's statement predicts."""
        return self.verdict is self.theorem.expected

    def counterexample_text(self) -> str:
        """``k=2, a=1, c=1`` (deterministic order), or ``-``."""
        if self.counterexample is None:
            return "-"
        parts = [] if self.counterexample_k is None else [f"k={self.counterexample_k}"]
        parts += [f"{name}={value}" for name, value in sorted(self.counterexample.items())]
        return ", ".join(parts)


def prove(theorem: Theorem, *, instances: Sequence[int | None] | None = None,
          **solver_options: Any) -> TheoremResult:
    """Check ``theorem`` on each instance (its own, or ``instances``), stopping at the first
    counterexample. ``solver_options`` go to `check_claim` (seed, timeout_ms, rlimit)."""
    seconds, checked, unknown = 0.0, 0, ""
    for instance in instances if instances is not None else theorem.instances:
        result: Check = check_claim(theorem.hypotheses(instance), theorem.claim(instance),
                                    **solver_options)
        seconds += result.seconds
        checked += 1
        if result.verdict is Verdict.REFUTED:
            return TheoremResult(theorem, Verdict.REFUTED, seconds, checked,
                                 result.counterexample, instance)
        if result.verdict is Verdict.UNKNOWN and not unknown:
            unknown = f"k={instance}: {result.reason}" if instance is not None else result.reason
    verdict = Verdict.UNKNOWN if unknown else Verdict.PROVED
    return TheoremResult(theorem, verdict, seconds, checked, reason=unknown)
