"""The symbols of docs/paper.md's notation, with their assumptions, and the domain checks of
`theory`.

Time unit: one target forward. Symbols (sympy assumptions carry what sympy can express; the
bounds it cannot, such as ``a ≤ 1``, are listed in `DOMAIN` and checked by `check_domain` for
numeric arguments):

=====  ==========================================  ==========================
``a``  acceptance rate of one draft (i.i.d.)        ``0 ≤ a ≤ 1``
``c``  drafter forward / target forward             ``0 < c ≤ 1`` (paper regime)
``k``  lookahead (drafts per verification task)     integer ``k ≥ 1``
``SP`` target servers                               integer ``SP ≥ 1``
``N``  tokens to generate                           integer ``N ≥ 1``
=====  ==========================================  ==========================
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import sympy

__all__ = ["DOMAIN", "SP", "N", "TheoryDomainError", "a", "as_expr", "c", "check_domain", "k",
           "lookahead_int", "tokens_int"]

a = sympy.Symbol("a", real=True, nonnegative=True)
c = sympy.Symbol("c", real=True, positive=True)
k = sympy.Symbol("k", integer=True, positive=True)
SP = sympy.Symbol("SP", integer=True, positive=True)
N = sympy.Symbol("N", integer=True, positive=True)

#: The paper's domain as sympy relations (the hypotheses every theorem starts from).
DOMAIN: tuple[Any, ...] = (sympy.Le(0, a), sympy.Le(a, 1), sympy.Lt(0, c), sympy.Le(c, 1),
                           sympy.Ge(k, 1), sympy.Ge(SP, 1), sympy.Ge(N, 1))


class TheoryDomainError(ValueError):
    """A numeric argument lies outside the domain where a closed form holds (message says which)."""


def as_expr(value: Any) -> Any:
    """A sympy expression for ``value`` (ints and `Fraction`s become exact `Rational`s).

    Floats are refused: the closed forms are exact, and a float would silently make them
    approximate. Pass ``Fraction(x).limit_denominator()`` or a sympy ``Float`` explicitly.

    >>> as_expr(Fraction(1, 3))
    1/3
    """
    if isinstance(value, bool):
        raise TheoryDomainError(f"expected a number or a sympy expression, got {value!r}")
    if isinstance(value, float):
        raise TheoryDomainError(f"float {value!r}: pass a Fraction (exact) or a sympy Float")
    if isinstance(value, Fraction):
        return sympy.Rational(value.numerator, value.denominator)
    return sympy.sympify(value)


def lookahead_int(value: Any, name: str = "k") -> int:
    """``value`` as a Python int ``>= 1`` (a lookahead, a server count, …)."""
    expr = as_expr(value)
    if not (expr.is_Integer and expr >= 1):
        raise TheoryDomainError(f"{name} must be an integer >= 1 here, got {value!r}")
    return int(expr)


def tokens_int(value: Any, name: str = "n_tokens") -> int:
    """``value`` as a Python int ``>= 0`` (a number of tokens to generate)."""
    expr = as_expr(value)
    if not (expr.is_Integer and expr >= 0):
        raise TheoryDomainError(f"{name} must be an integer >= 0, got {value!r}")
    return int(expr)


def check_domain(*, a: Any = None, c: Any = None, c_max: Any = 1) -> None:
    """Raise `TheoryDomainError` when a *numeric* ``a`` or ``c`` is outside the domain.

    Symbolic arguments pass (their domain is the theorems' business). ``c_max`` is the largest
    drafter cost the calling formula admits (``None``: any ``c > 0``).
    """
    if a is not None:
        av = as_expr(a)
        if av.is_number and not (0 <= av <= 1):
            raise TheoryDomainError(f"acceptance rate a must lie in [0, 1], got {a!r}")
    if c is not None:
        cv = as_expr(c)
        if cv.is_number and not cv > 0:
            raise TheoryDomainError(f"drafter cost c must be > 0, got {c!r}")
        if cv.is_number and c_max is not None and cv > c_max:
            raise TheoryDomainError(f"drafter cost c must be <= {c_max} for this formula, "
                                    f"got {c!r}")
