"""The one z3 solver factory, the sympy → z3 translation, and three-valued verdicts.

Every proof in this package goes through `make_solver` (fixed seed, a timeout and a resource
limit, so a verdict is reproducible and never hangs) and `check_claim`, which proves by
refutation: it asserts the hypotheses and the *negation* of the claim; ``unsat`` means no
counterexample exists (PROVED), ``sat`` yields one (REFUTED, with the model as exact numbers),
anything else is UNKNOWN, which never counts as proved.
"""

from __future__ import annotations

import enum
import itertools
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import sympy
import z3

__all__ = ["RLIMIT", "SEED", "TIMEOUT_MS", "Check", "TranslationError", "Verdict", "check_claim",
           "make_solver", "to_z3"]

#: Seed of every solver (z3's SMT core and nlsat).
SEED = 0
#: Wall-clock cap per check, milliseconds (a safety net; `RLIMIT` is what binds in practice).
TIMEOUT_MS = 30_000
#: z3 resource limit per check (deterministic, unlike the timeout).
RLIMIT = 50_000_000


class Verdict(enum.Enum):
    """Outcome of a check. Only `PROVED` counts as a proof."""

    PROVED = "PROVED"
    REFUTED = "REFUTED"
    UNKNOWN = "UNKNOWN"


class TranslationError(TypeError):
    """A sympy expression uses a construct the z3 translation does not support."""


def make_solver(*, seed: int = SEED, timeout_ms: int = TIMEOUT_MS, rlimit: int = RLIMIT,
                ctx: z3.Context | None = None) -> z3.Solver:
    """A fresh z3 solver with a fixed seed, a timeout and a resource limit (in ``ctx``; a
    fresh context per check makes models independent of what the process solved before)."""
    solver = z3.Solver(ctx=ctx)
    solver.set("random_seed", seed)
    solver.set("timeout", timeout_ms)
    solver.set("rlimit", rlimit)
    return solver


def _number(value: Any, ctx: z3.Context) -> z3.ArithRef:
    if value.is_Integer:
        return z3.IntVal(int(value), ctx)
    if value.is_Rational:
        return z3.RealVal(f"{int(value.p)}/{int(value.q)}", ctx)
    raise TranslationError(f"non-rational constant {value!r} (z3 needs exact rationals)")


def to_z3(expr: Any, env: Mapping[Any, Any], memo: dict[Any, Any] | None = None) -> Any:
    """Translate a sympy arithmetic/boolean expression into z3 over the variables ``env``
    (sympy symbol → z3 constant). Supported: rationals, ``+ − × ÷``, integer powers, ``Min``,
    ``Max``, ``floor``, ``ceiling``, relations, ``And Or Not Implies Equivalent``. ``memo``
    shares the translation of repeated sub-expressions."""
    memo = {} if memo is None else memo
    if expr not in memo:
        ctx = next(iter(env.values())).ctx if env else z3.main_ctx()
        memo[expr] = _to_z3(expr, env, memo, ctx)
    return memo[expr]


def _to_z3(expr: Any, env: Mapping[Any, Any], memo: dict[Any, Any], ctx: z3.Context) -> Any:
    if expr is sympy.true or expr is True:
        return z3.BoolVal(True, ctx)
    if expr is sympy.false or expr is False:
        return z3.BoolVal(False, ctx)
    if isinstance(expr, sympy.Symbol):
        if expr not in env:
            raise TranslationError(f"free symbol {expr} has no z3 variable")
        return env[expr]
    if expr.is_Number:
        return _number(expr, ctx)
    args = [to_z3(arg, env, memo) for arg in expr.args] if not isinstance(expr, sympy.Pow) else []
    if isinstance(expr, sympy.Add):
        return z3.Sum(*args)
    if isinstance(expr, sympy.Mul):
        return z3.Product(*args)
    if isinstance(expr, sympy.Pow):
        base, exponent = expr.args
        if not exponent.is_Integer:
            raise TranslationError(f"non-integer power in {expr}")
        zb, n = to_z3(base, env, memo), int(exponent)
        one = z3.RealVal(1, ctx)
        power = one if n == 0 else zb if abs(n) == 1 else zb ** z3.IntVal(abs(n), ctx)
        return power if n >= 0 else one / power
    if isinstance(expr, sympy.Min | sympy.Max):
        out = args[0]
        for arg in args[1:]:
            smaller = (arg < out) if isinstance(expr, sympy.Min) else (arg > out)
            out = z3.If(smaller, arg, out)
        return out
    if isinstance(expr, sympy.floor):
        return z3.ToInt(args[0])
    if isinstance(expr, sympy.ceiling):
        return -z3.ToInt(-args[0])
    if isinstance(expr, sympy.Rel):
        return _relation(expr.rel_op, args[0], args[1])
    if isinstance(expr, sympy.And):
        return z3.And(*args)
    if isinstance(expr, sympy.Or):
        return z3.Or(*args)
    if isinstance(expr, sympy.Not):
        return z3.Not(args[0])
    if isinstance(expr, sympy.Implies):
        return z3.Implies(args[0], args[1])
    if isinstance(expr, sympy.Equivalent):
        return z3.And(*[x == y for x, y in itertools.pairwise(args)])
    raise TranslationError(f"unsupported construct {type(expr).__name__} in {expr}")


def _relation(op: str, x: Any, y: Any) -> Any:
    if op == "==":
        return x == y
    if op == "!=":
        return x != y
    if op == "<":
        return x < y
    if op == "<=":
        return x <= y
    if op == ">":
        return x > y
    if op == ">=":
        return x >= y
    raise TranslationError(f"unsupported relation {op}")


def _variables(symbols: Iterable[Any], ctx: z3.Context) -> dict[Any, Any]:
    """A z3 constant per sympy symbol: Int for integer symbols, Real otherwise."""
    return {s: (z3.Int(s.name, ctx) if s.is_integer else z3.Real(s.name, ctx))
            for s in sorted(symbols, key=lambda s: s.name)}


def _assumptions(symbol: Any, variable: Any) -> list[Any]:
    """z3 constraints for a sympy symbol's sign assumptions (integrality is the sort)."""
    out = []
    if symbol.is_positive:
        out.append(variable > 0)
    elif symbol.is_nonnegative:
        out.append(variable >= 0)
    if symbol.is_negative:
        out.append(variable < 0)
    elif symbol.is_nonpositive:
        out.append(variable <= 0)
    return out


def _model_value(value: Any) -> Fraction | int | str:
    if z3.is_int_value(value):
        return int(value.as_long())
    if z3.is_rational_value(value):
        return Fraction(int(value.numerator_as_long()), int(value.denominator_as_long()))
    if z3.is_algebraic_value(value):
        return f"≈{value.approx(12).as_decimal(12)}"
    return str(value)


@dataclass(frozen=True)
class Check:
    """The result of one refutation check: verdict, solver time, counterexample (exact values
    by symbol name; an irrational algebraic value is shown as an ``≈`` string)."""

    verdict: Verdict
    seconds: float
    counterexample: dict[str, Fraction | int | str] | None = None
    reason: str = ""


def check_claim(hypotheses: Iterable[Any], claim: Any, *, seed: int = SEED,
                timeout_ms: int = TIMEOUT_MS, rlimit: int = RLIMIT) -> Check:
    """Prove ``hypotheses ⟹ claim`` by refutation (sympy booleans in, a `Check` out).

    The sign assumptions of the sympy symbols (``a ≥ 0``, ``c > 0``, ``k ≥ 1``: those sympy may
    already have used to simplify a relation) are asserted too, integer symbols are z3 Ints."""
    hypotheses = [sympy.sympify(h) for h in hypotheses]
    claim = sympy.sympify(claim)
    symbols: set[Any] = set(claim.free_symbols)
    for h in hypotheses:
        symbols |= h.free_symbols
    ctx = z3.Context()
    env = _variables(symbols, ctx)
    solver = make_solver(seed=seed, timeout_ms=timeout_ms, rlimit=rlimit, ctx=ctx)
    memo: dict[Any, Any] = {}
    for symbol, variable in env.items():  # sympy may have used these to simplify: z3 must too
        solver.add(*_assumptions(symbol, variable))
    for h in hypotheses:
        solver.add(to_z3(h, env, memo))
    solver.add(z3.Not(to_z3(claim, env, memo)))
    start = time.perf_counter()
    answer = solver.check()
    seconds = time.perf_counter() - start
    if answer == z3.unsat:
        return Check(Verdict.PROVED, seconds)
    if answer == z3.sat:
        model = solver.model()
        values = {s.name: _model_value(model.eval(v, model_completion=True))
                  for s, v in env.items()}
        return Check(Verdict.REFUTED, seconds, values)
    return Check(Verdict.UNKNOWN, seconds, reason=solver.reason_unknown())
