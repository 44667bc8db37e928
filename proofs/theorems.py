"""The catalogue: every claim of the paper (docs/paper.md) about latency, as a `Theorem` on
`theory`.

Each claim is built from `theory`'s closed forms (the same functions the bridge tests compare
with the executable model), so a verdict is about the formulas the project actually computes.
Methods, per theorem (also in the table's notes and docs/theory.md):

* **per-k**: for each lookahead ``k = 1 … 32`` separately, every power of ``a`` is a polynomial
  of degree ≤ ``k + 2`` and z3's nlsat decides the claim over all real ``a``, ``c`` in range.
* **lemmas**: the paper model's min is an infinite expectation z3 cannot see; it is abstracted
  by a real ``D`` constrained by three lemmas, each proved in docs/theory.md and checked exactly
  in tests (tests/test_theory_closed_forms.py): L1 ``D ≤ 1`` (min ≤ target-only cost, and
  ``(1 − a)·E[M k + A + 1] = 1``), L2 ``D ≤`` the no-min form (min ≤ speculative cost), L3
  ``D < 1`` when ``a > 0`` and ``c < 1`` (the speculative cost is strictly smaller with positive
  probability).
* **symbolic**: integer and real variables, no power of ``a``; one check for all ``k``.

Negative results drop one assumption on purpose and must come out REFUTED, with a counterexample
that tests/test_proofs_counterexamples.py replays numerically (exact `Fraction`s, and the
token-level decoders where the claim is about them).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import sympy

from theory import (
    a,
    c,
    dsi_paper_latency_per_token_nomin,
    geometric_sum,
    si_delta,
    si_latency_per_token,
    si_lookahead_step,
    sp_requirement,
    sp_witness_schedule,
)

from .core import Theorem
from .solver import Verdict

__all__ = ["K_RANGE", "THEOREMS", "X", "by_name", "event_abstract", "event_spread",
           "lookahead_step_abstract"]

#: Lookaheads of every per-k theorem.
K_RANGE: tuple[int, ...] = tuple(range(1, 33))

#: The paper-model DSI per-token latency (with the min), abstracted as a real (method "lemmas").
D = sympy.Symbol("D", real=True)
#: Integer unknowns of the server theorems.
S = sympy.Symbol("S", integer=True)
V = sympy.Symbol("V", integer=True)
r = sympy.Symbol("r", integer=True)
w1 = sympy.Symbol("w1", integer=True)
w2 = sympy.Symbol("w2", integer=True)
kk = sympy.Symbol("k", integer=True)
#: Event model: relative position, its supplying window's end, the previous decision time.
i = sympy.Symbol("i", integer=True)
e = sympy.Symbol("e", integer=True)
t = sympy.Symbol("t", real=True)
prev = sympy.Symbol("d_prev", real=True)


def _le(x: Any, y: Any) -> Any:
    return sympy.Le(x, y, evaluate=False)


def _lt(x: Any, y: Any) -> Any:
    return sympy.Lt(x, y, evaluate=False)


def _eq(x: Any, y: Any) -> Any:
    return sympy.Eq(x, y, evaluate=False)


def _domain(*, a_min_strict: bool = False, a_max_strict: bool = False,
            c_max: Any = 1) -> list[Any]:
    """``0 ≤ a ≤ 1`` (either end strict on request) and ``0 < c ≤ c_max`` (``None``: no cap)."""
    out = [_lt(0, a) if a_min_strict else _le(0, a),
           _lt(a, 1) if a_max_strict else _le(a, 1), _lt(0, c)]
    return out + ([] if c_max is None else [_le(c, c_max)])


@cache
def _si(k: int) -> Any:
    return si_latency_per_token(a, c, k)


@cache
def _nomin(k: int) -> Any:
    return dsi_paper_latency_per_token_nomin(a, c, k)


X = sympy.Symbol("X", real=True)


def event_spread(k: int) -> Any:
    """The spread term ``Σ_{r<k} a^r (1 − a) min(r, k c)`` of the event model's renewal limit."""
    return sympy.Add(*[a**j * (1 - a) * sympy.Min(j, k * c) for j in range(k)])


@cache
def event_abstract(k: int) -> Any:
    """`theory.dsi_event_latency_per_token` with its spread term replaced by ``X``
    (faithful: substituting `event_spread` back gives theory's formula, a test checks it)."""
    return (1 - a) + (k * c * a**k + X) / geometric_sum(a, 0, k - 1)


def _spread_bounds(k: int) -> list[Any]:
    return [_le(0, X), _le(X, sympy.Add(*[a**j * (1 - a) * j for j in range(k)])),
            _le(X, k * c * (1 - a**k))]


def _lemmas(k: int, *, strict: bool) -> list[Any]:
    out = [_le(D, 1), _le(D, _nomin(k))]
    if strict:
        out.append(sympy.Implies(sympy.And(_lt(0, a), _lt(c, 1)), _lt(D, 1)))
    return out


def _sp_definition(k: Any) -> list[Any]:
    """``S = ⌈1/(k c)⌉`` (theory's `sp_requirement`), as the integer with
    ``(S − 1) k c < 1 ≤ S k c``."""
    return [_eq(S, sp_requirement(c, k)), _lt((S - 1) * k * c, 1), _le(1, S * k * c)]


def _event_step(c_max: Any) -> list[Any]:
    """Induction hypotheses of the event model's decision recursion: position ``i`` is supplied
    by a window task ending at ``e ≥ i`` (finished at ``e c + 1``), and ``d_{i−1} ≥ i c``."""
    return [_le(0, i), _le(i, e), _lt(0, c), _le(i * c, prev)] + (
        [] if c_max is None else [_le(c, c_max)])


def _decision() -> Any:
    """``d_i = min(max(W_i, d_{i−1}), d_{i−1} + 1)`` with ``W_i = e c + 1``."""
    return sympy.Min(sympy.Max(e * c + 1, prev), prev + 1)


#: Abstract powers for the all-k proof: ``S_k = 1 + … + a^k`` and ``u = a^(k+1)``.
S_k = sympy.Symbol("S_k", real=True)
u = sympy.Symbol("u", real=True)


def lookahead_step_abstract(shift: int) -> Any:
    """`theory.si_lookahead_step` at ``k + shift`` (shift 0 or 1) with symbolic ``k`` and the
    powers abstracted: ``g(k) = c (S_k − k u) − u`` and, by the exact recurrences
    ``S_{k+1} = S_k + u``, ``a^(k+2) = a u``, ``g(k+1) = c (S_k + u − (k + 1) a u) − a u``
    (a test substitutes ``S_k``, ``u`` back and gets theory's formula)."""
    if shift == 0:
        return c * (S_k - kk * u) - u
    return c * (S_k + u - (kk + 1) * a * u) - a * u


def _schedule_text(schedule: list[tuple[Any, Any]] | None, servers: int) -> str:
    """``tasks run [1/2, 3/2), [1, 2): 2 at once on 1 server(s), one waits``."""
    if schedule is None:
        return "no overlap"
    spans = ", ".join(f"[{start}, {end})" for start, end in schedule)
    return (f"every draft accepted, tasks launched at k c, 2 k c, … run {spans}: "
            f"{len(schedule)} at once on {servers} server(s), so one waits")


PER_K = f"per-k (k = {K_RANGE[0]}..{K_RANGE[-1]}), polynomial in a, all real a, c in range"

THEOREMS: tuple[Theorem, ...] = (
    Theorem(
        "si_slower_than_nonsi_iff",
        "SI is slower than non-SI exactly when k c > a + a² + … + a^k (both directions).",
        PER_K + "; any c > 0",
        lambda k: _domain(c_max=None),
        lambda k: sympy.Equivalent(sympy.Gt(_si(k), 1, evaluate=False),
                                   sympy.Gt(k * c, geometric_sum(a, 1, k), evaluate=False)),
        K_RANGE),
    Theorem(
        "dsi_paper_never_slower",
        "DSI is never slower than either SI or non-SI (paper model, per token, any drafter).",
        PER_K + "; lemmas L1, L2 for the min",
        lambda k: _domain() + _lemmas(k, strict=False),
        lambda k: sympy.And(_le(D, 1), _le(D, _si(k))),
        K_RANGE),
    Theorem(
        "dsi_paper_strictly_faster_than_si",
        "DSI is faster than SI for any drafter (strictly, when a < 1).",
        PER_K + "; lemmas L1, L2, L3",
        lambda k: _domain(a_max_strict=True) + _lemmas(k, strict=True),
        lambda k: _lt(D, _si(k)),
        K_RANGE),
    Theorem(
        "dsi_paper_strictly_faster_than_si_at_a_1",
        "DSI is faster than SI for any drafter, now allowing a = 1.",
        PER_K + "; lemmas L1, L2, L3",
        lambda k: _domain() + _lemmas(k, strict=True),
        lambda k: _lt(D, _si(k)),
        K_RANGE, Verdict.REFUTED, dropped="a < 1 (the a = 1 boundary, with c = 1)"),
    Theorem(
        "dsi_nomin_si_sign_identity",
        "Without the min, DSI − SI and SI − non-SI both carry the sign of −Δ: "
        "DSI − SI = −Δ a^k / (S_{k−1} S_k) and SI − 1 = −Δ / S_k.",
        PER_K + " (a polynomial identity)",
        lambda k: _domain(c_max=None),
        lambda k: sympy.And(
            _eq(_nomin(k) - _si(k),
                -si_delta(a, c, k) * a**k / (geometric_sum(a, 0, k - 1) * geometric_sum(a, 0, k))),
            _eq(_si(k) - 1, -si_delta(a, c, k) / geometric_sum(a, 0, k))),
        K_RANGE),
    Theorem(
        "dsi_nomin_le_si_iff_delta",
        "Without the min, DSI beats SI exactly when SI beats non-SI: DSI ≤ SI ⟺ Δ ≥ 0.",
        PER_K + "; 0 < a ≤ 1, any c > 0",
        lambda k: _domain(a_min_strict=True, c_max=None),
        lambda k: sympy.Equivalent(_le(_nomin(k), _si(k)), _le(0, si_delta(a, c, k))),
        K_RANGE),
    Theorem(
        "dsi_nomin_le_si_iff_delta_at_a_0",
        "Without the min, DSI ≤ SI ⟺ Δ ≥ 0, now allowing a = 0.",
        PER_K,
        lambda k: _domain(c_max=None),
        lambda k: sympy.Equivalent(_le(_nomin(k), _si(k)), _le(0, si_delta(a, c, k))),
        K_RANGE, Verdict.REFUTED, dropped="a > 0 (at a = 0, DSI = SI but Δ = −k c < 0)"),
    Theorem(
        "dsi_k1_beats_si_at_any_lookahead",
        "The DSI/SI speedup left at SI's best lookahead: DSI at k = 1 (⌈1/c⌉ servers) is at "
        "least as fast as SI at every lookahead, hence at SI's best.",
        PER_K + " (k = SI's lookahead); D = DSI at k = 1: L1 gives D ≤ 1, and L2 at k = 1 "
        "chained with dsi_nomin_best_lookahead_is_smallest (1 … k) gives D ≤ no-min(k)",
        lambda k: _domain() + [_le(D, 1), _le(D, _nomin(k))],
        lambda k: _le(D, _si(k)),
        K_RANGE),
    Theorem(
        "dsi_nomin_best_lookahead_is_smallest",
        "Without the min, DSI's per-token latency is non-decreasing in k: its best lookahead is "
        "the smallest the servers allow, k = ⌈1/(SP c)⌉.",
        PER_K + "; any c > 0",
        lambda k: _domain(c_max=None),
        lambda k: _le(_nomin(k), _nomin(k + 1)),
        K_RANGE),
    Theorem(
        "si_lookahead_step_sign",
        "SI latency(k + 1) ≥ latency(k) ⟺ g(k) = c (S_k − k a^(k+1)) − a^(k+1) ≥ 0.",
        PER_K + "; any c > 0",
        lambda k: _domain(c_max=None),
        lambda k: sympy.Equivalent(_le(_si(k), _si(k + 1)), _le(0, si_lookahead_step(a, c, k))),
        K_RANGE),
    Theorem(
        "si_lookahead_unimodal",
        "g(k) ≥ 0 ⟹ g(k + 1) ≥ 0: SI's latency is unimodal in k, so its best lookahead is the "
        "first k with g(k) ≥ 0.",
        PER_K + "; any c > 0",
        lambda k: _domain(c_max=None) + [_le(0, si_lookahead_step(a, c, k))],
        lambda k: _le(0, si_lookahead_step(a, c, k + 1)),
        K_RANGE),
    Theorem(
        "si_lookahead_unimodal_all_k",
        "g(k) ≥ 0 ⟹ g(k + 1) ≥ 0 for every lookahead k ≥ 1 (not only k ≤ 32).",
        "symbolic k (integer): powers abstracted, u = a^(k+1) with its sound bounds 0 ≤ u ≤ 1, "
        "S_k ≥ 1, and the exact recurrences S_{k+1} = S_k + u, a^(k+2) = a u",
        lambda k: [*_domain(c_max=None), _le(1, kk), _le(0, u), _le(u, 1), _le(1, S_k),
                   _le(0, lookahead_step_abstract(0))],
        lambda k: _le(0, lookahead_step_abstract(1)),
        (None,)),
    Theorem(
        "si_lookahead_bound",
        "a^(k+1) ≤ c ⟹ g(k) ≥ 0: SI's best lookahead is at most the first such k "
        "(⌈ln c / ln a⌉ − 1).",
        PER_K + "; any c > 0",
        lambda k: _domain(c_max=None) + [_le(a ** (k + 1), c)],
        lambda k: _le(0, si_lookahead_step(a, c, k)),
        K_RANGE),
    Theorem(
        "sp_requirement_sufficient",
        "SP ≥ ⌈1/(k c)⌉ servers: no verification task waits when one is launched every k c "
        "(no S + 1 launches fall in one target forward).",
        "symbolic in k (integer), c, launch indices w1 < w2 and time t",
        lambda k: [_le(1, kk), _lt(0, c), _le(c, 1), *_sp_definition(kk), _le(1, w1),
                   _le(w1 + S, w2)],
        lambda k: sympy.Not(sympy.And(_lt(t - 1, w1 * kk * c), _le(w2 * kk * c, t))),
        (None,)),
    Theorem(
        "sp_requirement_below_waits",
        "With V < ⌈1/(k c)⌉ servers, still no task waits (claim: task V + 1, launched at "
        "(V + 1) k c, starts after task 1 ends at k c + 1).",
        "per-k (k = 1..32), V servers, V < ⌈1/(k c)⌉",
        lambda k: [_lt(0, c), _le(c, 1), _le(1, V), _lt(V, sp_requirement(c, k))],
        lambda k: _le(k * c + 1, (V + 1) * k * c),
        K_RANGE, Verdict.REFUTED, dropped="SP ≥ ⌈1/(k c)⌉", witness=lambda values, k:
        _schedule_text(sp_witness_schedule(values["c"], k, int(values["V"])), int(values["V"]))),
    Theorem(
        "event_sp_requirement_with_partial_window",
        "In the event model (finite N), ⌈1/(k c)⌉ verification servers suffice: the partial "
        "last window (r < k drafts, launched r c after the last full one) never finds them all "
        "busy.",
        "per-k (k = 2..32: with k = 1 no window is partial), S = ⌈1/(k c)⌉, r drafts in the "
        "last window",
        lambda k: [_lt(0, c), _le(c, 1), *_sp_definition(k), _le(1, r), _le(r, k - 1)],
        lambda k: _le(1, (S - 1) * k * c + r * c),
        K_RANGE[1:], Verdict.REFUTED, dropped="every window full (N → ∞, or k divides N)"),
    Theorem(
        "event_draft_ready",
        "Event model, c ≤ 1: when position i is decided its draft exists (d_i ≥ (i + 1) c), so "
        "no bonus restarts; induction step of d_i = min(max(W_i, d_{i−1}), d_{i−1} + 1).",
        "symbolic (integers i ≤ e, reals c, d_{i−1})",
        lambda k: _event_step(1),
        lambda k: _le((i + 1) * c, _decision()),
        (None,)),
    Theorem(
        "event_draft_ready_c_above_1",
        "Event model: when position i is decided its draft exists, now allowing c > 1.",
        "symbolic (integers i ≤ e, reals c, d_{i−1})",
        lambda k: _event_step(None),
        lambda k: _le((i + 1) * c, _decision()),
        (None,), Verdict.REFUTED, dropped="c ≤ 1"),
    Theorem(
        "event_commit_within_one_forward",
        "Event model: a commit happens at most one target forward after the previous one (the "
        "frontier task), so DSI is never slower than non-SI: T ≤ N.",
        "symbolic (integers i ≤ e, reals c, d_{i−1})",
        lambda k: _event_step(None),
        lambda k: _le(_decision(), prev + 1),
        (None,)),
    Theorem(
        "event_never_slower",
        "Event-model DSI (no waiting) is never slower than non-SI, nor than the paper model "
        "without the min, per token (renewal limit of theory.dsi_event_latency_per_token); "
        "so it satisfies L1 and L2, and dsi_paper_never_slower (D := it) makes it ≤ SI too.",
        PER_K + "; 0 < c ≤ 1; the spread term X = Σ_{r<k} a^r (1 − a) min(r, k c) abstracted "
        "by its sound bounds 0 ≤ X ≤ Σ_r a^r (1 − a) r and X ≤ k c (1 − a^k)",
        lambda k: _domain() + _spread_bounds(k),
        lambda k: sympy.And(_le(event_abstract(k), 1), _le(event_abstract(k), _nomin(k))),
        K_RANGE),
)


def by_name(name: str) -> Theorem:
    """The theorem called ``name`` (KeyError with the known names otherwise)."""
    for theorem in THEOREMS:
        if theorem.name == name:
            return theorem
    raise KeyError(f"no theorem {name!r}; known: {', '.join(t.name for t in THEOREMS)}")
