"""Closed forms for non-SI and SI (speculative inference, Leviathan et al. 2023; docs/paper.md).

Model (docs/paper.md, "SI and non-SI"): one SI iteration drafts ``m`` tokens (cost ``m·c``),
runs one target forward (cost ``1``) and commits ``X + 1`` tokens, where ``X = min(G, m)`` counts
the accepted drafts and ``P(G ≥ j) = a^j`` (each draft accepted i.i.d. with probability ``a``, up to
the first rejection). Away from the end ``m = k``; the last iteration drafts only
``min(k, remaining − 1)`` (there must be room for the bonus/residual token).

Every function returns an exact sympy expression: numbers for numeric arguments (pass
`Fraction`s or ints), formulas in ``a``, ``c`` (and ``k`` where stated) for symbolic ones.
docs/theory.md derives each formula step by step.
"""

from __future__ import annotations

from typing import Any

import sympy

from .symbols import TheoryDomainError, as_expr, check_domain, lookahead_int, tokens_int

__all__ = [
    "geometric_sum",
    "nonsi_latency",
    "si_accepted_pmf",
    "si_best_lookahead",
    "si_delta",
    "si_expected_latency",
    "si_expected_tokens",
    "si_latency_per_token",
    "si_lookahead_bound",
    "si_lookahead_step",
    "si_speedup",
]


def geometric_sum(x: Any, lo: Any, hi: Any) -> Any:
    """``Σ_{i=lo}^{hi} x^i``: a polynomial for integer bounds, sympy's piecewise closed form
    (``(x^lo − x^(hi+1)) / (1 − x)``, or ``hi − lo + 1`` at ``x = 1``) for symbolic ones.

    >>> geometric_sum(sympy.Rational(1, 2), 0, 3)
    15/8
    """
    lo, hi, x = as_expr(lo), as_expr(hi), as_expr(x)
    if lo.is_Integer and hi.is_Integer:
        return sympy.Add(*[x**i for i in range(int(lo), int(hi) + 1)])
    i = sympy.Dummy("i", integer=True)
    return sympy.Sum(x**i, (i, lo, hi)).doit()


def nonsi_latency(n_tokens: Any, ttft: Any = 1, tpot: Any = 1) -> Any:
    """Non-SI latency: ``T = TTFT + (N − 1)·TPOT`` (``= N`` with a unit target; 0 for N = 0).

    Source: docs/paper.md, "SI and non-SI" (one target forward per token).

    >>> nonsi_latency(5), nonsi_latency(5, ttft=sympy.Rational(9, 5), tpot=1)
    (5, 29/5)
    """
    n = as_expr(n_tokens)
    if n.is_number and (not n.is_Integer or n < 0):
        raise TheoryDomainError(f"n_tokens must be an integer >= 0, got {n_tokens!r}")
    if n == 0:
        return sympy.Integer(0)
    return as_expr(ttft) + (n - 1) * as_expr(tpot)


def si_accepted_pmf(a: Any, k: Any) -> list[Any]:
    """The law of ``X = min(G, k)``, the accepted drafts of one SI iteration:
    ``P(X = j) = a^j (1 − a)`` for ``j < k`` and ``P(X = k) = a^k`` (a list indexed by j).

    >>> si_accepted_pmf(sympy.Rational(1, 2), 2)
    [1/2, 1/4, 1/4]
    """
    check_domain(a=a)
    a, kk = as_expr(a), lookahead_int(k)
    return [a**j * (1 - a) for j in range(kk)] + [a**kk]


def si_expected_tokens(a: Any, k: Any) -> Any:
    """``E[X + 1] = 1 + a + … + a^k = (1 − a^(k+1)) / (1 − a)`` tokens per SI iteration.

    Source: docs/paper.md (Leviathan et al. 2023, eq. 1). ``k`` may be symbolic (then sympy's
    piecewise sum, equal to ``k + 1`` at ``a = 1``).

    >>> si_expected_tokens(sympy.Rational(1, 2), 2)
    7/4
    """
    check_domain(a=a)
    return geometric_sum(a, 0, k)


def si_latency_per_token(a: Any, c: Any, k: Any) -> Any:
    """Per-token SI latency in the renewal limit: ``(k c + 1) / (1 + a + … + a^k)``
    ``= (k c + 1)(1 − a) / (1 − a^(k+1))``.

    Source: docs/paper.md, ``E[T_SI] ≈ N (k c + 1)(1 − a) / (1 − a^(k+1))``; the polynomial
    denominator keeps the formula valid at ``a = 1``.

    >>> si_latency_per_token(sympy.Rational(1, 2), sympy.Rational(1, 10), 2)
    24/35
    """
    check_domain(a=a, c=c, c_max=None)
    return (as_expr(k) * as_expr(c) + 1) / si_expected_tokens(a, k)


def si_speedup(a: Any, c: Any, k: Any) -> Any:
    """SI's speedup over non-SI (unit target) in the renewal limit:
    ``(1 + a + … + a^k) / (k c + 1)``; ``> 1`` exactly when `si_delta` ``> 0``.

    >>> si_speedup(sympy.Rational(1, 2), sympy.Rational(1, 10), 2)
    35/24
    """
    return 1 / si_latency_per_token(a, c, k)


def si_delta(a: Any, c: Any, k: Any) -> Any:
    """``Δ = (a + a² + … + a^k) − k c``: expected accepted drafts per iteration minus the
    drafting cost. SI is slower than non-SI exactly when ``Δ < 0`` (docs/paper.md; the theorem
    ``si_slower_than_nonsi_iff`` proves it), and the same ``Δ`` decides DSI vs SI without the
    per-segment min.

    >>> si_delta(sympy.Rational(1, 2), sympy.Rational(1, 10), 2)
    11/20
    """
    check_domain(a=a, c=c, c_max=None)
    return geometric_sum(a, 1, k) - as_expr(k) * as_expr(c)


def si_expected_latency(a: Any, c: Any, k: Any, n_tokens: Any, *, target_first: Any = None,
                        drafter_first: Any = None) -> Any:
    """Exact ``E[T_SI(N)]`` for ``N`` tokens, with the shortened last iteration.

    Recurrence on the tokens still to generate, ``T(0) = 0`` and for ``n ≥ 1``, with
    ``m = min(k, n − 1)``:

        ``T(n) = m c + 1 + Σ_{j<m} a^j (1 − a) T(n − j − 1) + a^m T(n − m − 1)``

    (the iteration drafts ``m``, verifies once, and commits ``j + 1`` tokens when the first
    rejection is at draft ``j``, or ``m + 1`` when all ``m`` drafts are accepted). First-forward
    costs (TTFT, in units of the target's TPOT) add ``target_first − 1``, and
    ``drafter_first − c`` when the first iteration drafts at all (``N ≥ 2``). ``a`` and ``c``
    may be symbolic; ``k`` and ``N`` must be integers.

    >>> si_expected_latency(sympy.Rational(1, 2), sympy.Rational(1, 10), 2, 3)
    9/4
    """
    check_domain(a=a, c=c, c_max=None)
    a, c, kk = as_expr(a), as_expr(c), lookahead_int(k)
    n_max = tokens_int(n_tokens)
    t: list[Any] = [sympy.Integer(0)]
    for n in range(1, int(n_max) + 1):
        m = min(kk, n - 1)
        value = m * c + 1 + a**m * t[n - m - 1]
        value += sympy.Add(*[a**j * (1 - a) * t[n - j - 1] for j in range(m)])
        t.append(value if a.is_number else sympy.expand(value))
    total = t[int(n_max)]
    if n_max >= 1 and target_first is not None:
        total += as_expr(target_first) - 1
    if n_max >= 2 and drafter_first is not None:
        total += as_expr(drafter_first) - c
    return total if a.is_number and c.is_number else sympy.expand(total)


def si_lookahead_step(a: Any, c: Any, k: Any) -> Any:
    """``g(k) = c (1 + a + … + a^k − k a^(k+1)) − a^(k+1)``: the sign of
    ``latency(k + 1) − latency(k)`` (per token, `si_latency_per_token`).

    ``latency(k+1) ≥ latency(k) ⟺ ((k+1)c + 1) S_k ≥ (k c + 1)(S_k + a^(k+1)) ⟺ g(k) ≥ 0``
    with ``S_k = 1 + … + a^k > 0``; ``g`` is non-decreasing in ``k`` (theorem
    ``si_lookahead_unimodal``), so the best lookahead is the first ``k`` with ``g(k) ≥ 0``.

    >>> si_lookahead_step(sympy.Rational(1, 2), sympy.Rational(1, 10), 2)
    1/40
    """
    check_domain(a=a, c=c, c_max=None)
    a, c, kk = as_expr(a), as_expr(c), as_expr(k)
    return c * (geometric_sum(a, 0, kk) - kk * a ** (kk + 1)) - a ** (kk + 1)


def _numeric_ac(a: Any, c: Any, caller: str) -> tuple[Any, Any]:
    """``a`` and ``c`` as numeric sympy expressions in the domain (any ``c > 0``), or
    `TheoryDomainError` naming ``caller``."""
    check_domain(a=a, c=c, c_max=None)
    a, c = as_expr(a), as_expr(c)
    if not (a.is_number and c.is_number):
        raise TheoryDomainError(f"{caller} needs numeric a and c")
    return a, c


def si_best_lookahead(a: Any, c: Any, k_max: int = 10_000) -> int | None:
    """The lookahead ``k ≥ 1`` minimising SI's per-token latency at numeric ``(a, c)``.

    No elementary closed form exists (the optimality condition `si_lookahead_step` ``= 0`` mixes
    ``k`` and ``a^k``; its continuous relaxation needs Lambert's W), so this returns the first
    ``k`` with ``g(k) ≥ 0``, which is optimal because ``g`` is non-decreasing (theorem
    ``si_lookahead_unimodal``); ties (``g(k) = 0``) resolve to the smaller ``k``. It is at most
    `si_lookahead_bound`. Returns ``None`` when no finite optimum exists: ``a = 1`` and ``c < 1``,
    where the latency ``(k c + 1)/(k + 1)`` decreases forever (theorem
    ``si_finite_best_lookahead``).

    >>> si_best_lookahead(sympy.Rational(4, 5), sympy.Rational(1, 10))
    6
    """
    a, c = _numeric_ac(a, c, "si_best_lookahead")
    if a == 1 and c < 1:
        return None
    for kk in range(1, k_max + 1):
        if si_lookahead_step(a, c, kk) >= 0:
            return kk
    raise TheoryDomainError(f"no best lookahead found up to k_max={k_max}; raise k_max")


def si_lookahead_bound(a: Any, c: Any) -> int | None:
    """The smallest ``K ≥ 1`` with ``a^(K+1) ≤ c``: an upper bound on `si_best_lookahead`
    (``K = max(1, ⌈ln c / ln a⌉ − 1)`` for ``0 < a < 1``; theorem ``si_lookahead_bound``).
    ``None`` for ``a = 1 > c`` (no finite bound, and no finite optimum).

    >>> si_lookahead_bound(sympy.Rational(4, 5), sympy.Rational(1, 10))
    10
    """
    a, c = _numeric_ac(a, c, "si_lookahead_bound")
    if a == 1 and c < 1:
        return None
    kk = 1
    while a ** (kk + 1) > c:
        kk += 1
    return kk
