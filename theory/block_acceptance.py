"""Closed forms for the accepted length of one window: block verification vs token-level.

Setting: a **context-free** pair, the target row ``p`` and the drafter row ``q`` over a
vocabulary ``V`` (the same rows after every prefix), ``γ`` drafts ``x_1 … x_γ`` i.i.d. from
``q``, and ``L`` the drafts accepted in the window (docs/acceptance-laws.md).

**Token-level rejection sampling** (Leviathan et al. 2023) accepts each draft with probability
``a = Σ_y min(p(y), q(y))``, independently until the first rejection:

    P(L >= i) = a^i,        E[L] = a + a² + … + a^γ.

**Block verification** (Sun et al. 2024, arXiv 2403.10444) keeps a weight ``w_0 = 1``,
``w_i = min(1, w_{i−1} p(x_i) / q(x_i))``; then ``P(L >= i) = E_{x ~ q^i}[w_i]`` for every
``i <= γ`` (whatever ``γ``: the law of a shorter window is the longer one's ``min(L, m)``).
Writing ``u_i = q(x_{1:i}) w_i = min(q(x_{1:i}), u_{i−1} p(x_i))`` removes the division:

    P(L >= i) = Σ_{x ∈ V^i} min_{0 <= j <= i} q(x_1) ⋯ q(x_j) · p(x_{j+1}) ⋯ p(x_i),

    E[L] = Σ_{i=1}^{γ} P(L >= i).

For ``γ = 1`` both are ``a``. For ``γ = 2``: ``E[L] = a + Σ_{x,y} min(q_x q_y, q_x p_y, p_x p_y)``
against token-level's ``a + (Σ_x min(p_x, q_x))² = a + Σ_{x,y} min(p_x, q_x) min(p_y, q_y)``.
Since ``min(p_x, q_x) min(p_y, q_y)`` is at most each of the three products, block's
``P(L >= i)`` is never below ``a^i``: block's law stochastically dominates token-level's, for
every ``i`` (the same term-by-term argument for any ``i``). Both are at most the prefix
coupling bound ``Σ_{x ∈ V^i} min(p(x_{1:i}), q(x_{1:i}))`` (`prefix_coupling_bound`: the
``j = 0`` and ``j = i`` terms only), the largest ``P(L >= i)`` of any valid verifier taken one
``i`` at a time; block does not attain it for ``i >= 2`` in general.

Rows may be numbers (``Fraction``s or ints: exact) or sympy symbols (`row_symbols`). This module
never imports ``dsi_ref``; tests/test_theory_block.py compares it with the exact engine.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import sympy

from .si_latency import geometric_sum
from .symbols import TheoryDomainError, as_expr, lookahead_int

__all__ = ["block_accepted_pmf", "block_expected_accepted", "block_survival",
           "prefix_coupling_bound", "row_symbols", "token_acceptance_rate",
           "token_expected_accepted", "token_survival"]


def row_symbols(vocab_size: int, name: str) -> tuple[Any, ...]:
    """Nonnegative symbols ``name_0 … name_{V−1}`` for a row (their sum is the caller's
    business: substitute numbers that sum to 1).

    >>> row_symbols(2, "p")
    (p_0, p_1)
    """
    size = lookahead_int(vocab_size, "vocab_size")
    return tuple(sympy.Symbol(f"{name}_{y}", real=True, nonnegative=True) for y in range(size))


def _rows(p: Sequence[Any], q: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """``p`` and ``q`` as sympy rows of one length; numeric rows must be distributions."""
    if len(p) != len(q) or not p:
        raise TheoryDomainError(f"p and q must be rows of one vocabulary, got lengths {len(p)} "
                                f"and {len(q)}")
    rows = [as_expr(v) for v in p], [as_expr(v) for v in q]
    for name, row in zip("pq", rows, strict=True):
        if all(v.is_number for v in row) and (any(v < 0 for v in row) or sum(row) != 1):
            raise TheoryDomainError(f"{name} must be a probability row (entries >= 0 summing "
                                    f"to 1), got {tuple(row)}")
    return rows


def token_acceptance_rate(p: Sequence[Any], q: Sequence[Any]) -> Any:
    """``a = Σ_y min(p(y), q(y)) = 1 − TV(p, q)``: token-level acceptance of one draft.

    >>> token_acceptance_rate((sympy.Rational(1, 2), sympy.Rational(1, 2)), (1, 0))
    1/2
    """
    pr, qr = _rows(p, q)
    return sympy.Add(*[sympy.Min(x, y) for x, y in zip(pr, qr, strict=True)])


def token_survival(p: Sequence[Any], q: Sequence[Any], i: int) -> Any:
    """Token-level ``P(L >= i) = a^i``.

    >>> token_survival((sympy.Rational(1, 2), sympy.Rational(1, 2)), (1, 0), 2)
    1/4
    """
    return token_acceptance_rate(p, q) ** _index(i)


def token_expected_accepted(p: Sequence[Any], q: Sequence[Any], gamma: int) -> Any:
    """Token-level ``E[L] = Σ_{i=1}^{γ} a^i``.

    >>> token_expected_accepted((sympy.Rational(1, 2), sympy.Rational(1, 2)), (1, 0), 2)
    3/4
    """
    return geometric_sum(token_acceptance_rate(p, q), 1, lookahead_int(gamma, "gamma"))


def _index(i: int) -> int:
    expr = as_expr(i)
    if not (expr.is_Integer and expr >= 0):
        raise TheoryDomainError(f"i must be an integer >= 0, got {i!r}")
    return int(expr)


def block_survival(p: Sequence[Any], q: Sequence[Any], i: int) -> Any:
    """Block verification's ``P(L >= i) = Σ_{x ∈ V^i} min_{0<=j<=i} q(x_{1:j}) p(x_{j+1:i})``
    (module docstring; ``1`` at ``i = 0``).

    >>> half = sympy.Rational(1, 2)
    >>> block_survival((half, half), (sympy.Rational(3, 4), sympy.Rational(1, 4)), 2)
    5/8
    """
    pr, qr = _rows(p, q)
    n = _index(i)
    terms = []
    for xs in itertools.product(range(len(pr)), repeat=n):
        products = [sympy.Mul(*[qr[x] for x in xs[:j]], *[pr[x] for x in xs[j:]])
                    for j in range(n + 1)]
        terms.append(sympy.Min(*products))
    return sympy.Add(*terms)


def block_expected_accepted(p: Sequence[Any], q: Sequence[Any], gamma: int) -> Any:
    """Block verification's ``E[L] = Σ_{i=1}^{γ} P(L >= i)`` for a window of ``γ`` drafts.

    >>> half = sympy.Rational(1, 2)
    >>> block_expected_accepted((half, half), (sympy.Rational(3, 4), sympy.Rational(1, 4)), 2)
    11/8
    """
    g = lookahead_int(gamma, "gamma")
    return sympy.Add(*[block_survival(p, q, i) for i in range(1, g + 1)])


def block_accepted_pmf(p: Sequence[Any], q: Sequence[Any], gamma: int) -> list[Any]:
    """Block verification's law of ``L``: ``[P(L = 0), …, P(L = γ)]``, from
    ``P(L = j) = P(L >= j) − P(L >= j + 1)``.

    >>> half = sympy.Rational(1, 2)
    >>> block_accepted_pmf((half, half), (sympy.Rational(3, 4), sympy.Rational(1, 4)), 2)
    [1/4, 1/8, 5/8]
    """
    g = lookahead_int(gamma, "gamma")
    values = [block_survival(p, q, i) for i in range(g + 1)] + [sympy.Integer(0)]
    return [values[j] - values[j + 1] for j in range(g + 1)]


def prefix_coupling_bound(p: Sequence[Any], q: Sequence[Any], i: int) -> Any:
    """``Σ_{x ∈ V^i} min(p(x_{1:i}), q(x_{1:i})) = 1 − TV(p^{⊗i}, q^{⊗i})``: the largest
    ``P(L >= i)`` any valid verifier can reach for one ``i`` (an accepted ``x_{1:i}`` is both a
    draft and the output's prefix). Block verification's `block_survival` keeps only two of its
    ``i + 1`` products when it equals this; in general it is smaller for ``i >= 2``.

    >>> half = sympy.Rational(1, 2)
    >>> prefix_coupling_bound((half, half), (sympy.Rational(3, 4), sympy.Rational(1, 4)), 2)
    11/16
    """
    pr, qr = _rows(p, q)
    n = _index(i)
    return sympy.Add(*[sympy.Min(sympy.Mul(*[pr[x] for x in xs]), sympy.Mul(*[qr[x] for x in xs]))
                       for xs in itertools.product(range(len(pr)), repeat=n)])
