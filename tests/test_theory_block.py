"""`theory.block_acceptance` against the exact engine, both ways (issue #14, item 6).

The closed forms are built once as sympy expressions in symbolic rows ``p_0 … p_{V−1}``,
``q_0 … q_{V−1}``, then evaluated at seeded random rational rows (zeros included) and compared,
exactly, with the law of one SI window that the exact engine computes for the same context-free
pair (`dsi_ref.audit.acceptance.window_acceptance_law`). The other way: deliberately wrong
variants (token-level's formula, the prefix coupling bound, a min over fewer products) differ
from the engine on pairs where the rules differ, so the comparison can fail.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction as F
from functools import cache
from typing import Any

import pytest
import sympy

import dsi_ref as dr
import theory
from dsi_ref.audit.acceptance import survival, window_acceptance_law

SEEDS = range(6)


def to_fraction(value: Any) -> F:
    r = sympy.Rational(value)
    return F(int(r.p), int(r.q))


def rows(vocab: int, seed: int) -> tuple[tuple[F, ...], tuple[F, ...]]:
    """A seeded context-free pair with rational rows: zeros allowed in ``p``, and in ``q`` for
    even seeds (block differs from token-level only where some ``p(x) > q(x) > 0``)."""
    p = dr.TableLM.random(vocab, 0, seed).probs(())
    q = dr.TableLM.random(vocab, 0, seed + 100, zero_prob=0.25 if seed % 2 == 0 else 0).probs(())
    return tuple(F(v) for v in p), tuple(F(v) for v in q)


@cache
def symbolic(vocab: int, gamma: int) -> dict[str, Any]:
    """The closed forms in symbolic rows, built once per ``(V, γ)``."""
    p, q = theory.row_symbols(vocab, "p"), theory.row_symbols(vocab, "q")
    return {"p": p, "q": q,
            "block": theory.block_expected_accepted(p, q, gamma),
            "token": theory.token_expected_accepted(p, q, gamma),
            "pmf": theory.block_accepted_pmf(p, q, gamma),
            "bound": sympy.Add(*[theory.prefix_coupling_bound(p, q, i)
                                 for i in range(1, gamma + 1)])}


def evaluate(expr: Any, forms: dict[str, Any], p: Sequence[F], q: Sequence[F]) -> F:
    values = {**dict(zip(forms["p"], p, strict=True)), **dict(zip(forms["q"], q, strict=True))}
    return to_fraction(expr.xreplace({s: sympy.Rational(v.numerator, v.denominator)
                                  for s, v in values.items()}))


def engine_law(p: Sequence[F], q: Sequence[F], gamma: int, verify: str) -> dict[int, F]:
    return window_acceptance_law(dr.TableLM.context_free(p), dr.TableLM.context_free(q), gamma,
                                 verify)  # type: ignore[arg-type]


def mean(law: dict[int, F]) -> F:
    return sum((j * v for j, v in law.items()), F(0))


@pytest.mark.parametrize(("vocab", "gamma"), [(2, 1), (2, 2), (2, 3), (3, 1), (3, 2), (3, 3)])
def test_closed_forms_equal_the_exact_engine(vocab: int, gamma: int) -> None:
    forms = symbolic(vocab, gamma)
    for seed in SEEDS:
        p, q = rows(vocab, seed)
        block, token = engine_law(p, q, gamma, "block"), engine_law(p, q, gamma, "rejection")
        assert evaluate(forms["block"], forms, p, q) == mean(block)
        assert evaluate(forms["token"], forms, p, q) == mean(token)
        assert [evaluate(e, forms, p, q) for e in forms["pmf"]] == \
            [block.get(j, F(0)) for j in range(gamma + 1)]


def test_symbolic_forms_for_gamma_one_and_two() -> None:
    """``γ = 1``: both rules accept with ``a = Σ min(p, q)``. ``γ = 2``: block adds
    ``Σ_{x,y} min(q_x q_y, q_x p_y, p_x p_y)``, token-level ``a²``."""
    p, q = theory.row_symbols(2, "p"), theory.row_symbols(2, "q")
    a = sympy.Min(p[0], q[0]) + sympy.Min(p[1], q[1])
    assert sympy.simplify(theory.block_expected_accepted(p, q, 1) - a) == 0
    assert sympy.simplify(theory.token_expected_accepted(p, q, 1) - a) == 0
    second = sum((sympy.Min(q[x] * q[y], q[x] * p[y], p[x] * p[y])
                  for x, y in itertools.product(range(2), repeat=2)), sympy.Integer(0))
    assert sympy.simplify(theory.block_expected_accepted(p, q, 2) - a - second) == 0


@pytest.mark.parametrize("vocab", [2, 3])
def test_wrong_variants_differ_from_the_engine(vocab: int) -> None:
    """Token-level's formula, and the prefix coupling bound, are not block's law: on every
    seed where the engine's two laws differ, each wrong variant misses block's ``E[L]``; and a
    min over the two end products only (the bound's) overshoots block's ``P(L >= 2)``. (The rules
    agree when every weight is 0 or 1: no draft with ``0 < p(x) < q(x)`` beside one with
    ``p(x) > q(x)``; such seeds are skipped, and at least four are left.)"""
    forms = symbolic(vocab, 2)
    differing = 0
    for seed in range(12):
        p, q = rows(vocab, seed)
        block, token = engine_law(p, q, 2, "block"), engine_law(p, q, 2, "rejection")
        if mean(block) == mean(token):
            continue
        differing += 1
        assert evaluate(forms["token"], forms, p, q) != mean(block)
        assert evaluate(forms["bound"], forms, p, q) > mean(block)
        wrong = sum((min(p[x] * p[y], q[x] * q[y])
                     for x, y in itertools.product(range(vocab), repeat=2)), F(0))
        assert wrong > survival(block, 2)[2]
    assert differing >= 4


def test_bound_and_token_sandwich_block_survival() -> None:
    """``a^i <= P_block(L >= i) <= Σ min(p(x_{1:i}), q(x_{1:i}))`` for ``i <= 3``."""
    for vocab, seed in itertools.product((2, 3), SEEDS):
        p, q = rows(vocab, seed)
        for i in (1, 2, 3):
            block = to_fraction(theory.block_survival(p, q, i))
            assert to_fraction(theory.token_survival(p, q, i)) <= block
            assert block <= to_fraction(theory.prefix_coupling_bound(p, q, i))


def test_rows_are_checked() -> None:
    with pytest.raises(theory.TheoryDomainError):
        theory.block_survival((F(1, 2), F(1, 3)), (F(1, 2), F(1, 2)), 1)
    with pytest.raises(theory.TheoryDomainError):
        theory.block_survival((F(1),), (F(1, 2), F(1, 2)), 1)
    with pytest.raises(theory.TheoryDomainError):
        theory.block_expected_accepted((F(1),), (F(1),), 0)
