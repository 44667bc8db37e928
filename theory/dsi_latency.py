"""Closed forms for DSI: the paper model (the official simulator) and the event model.

**Paper model** (docs/paper.md, "DSI in the official offline simulator"). A *segment* is ``M`` fully
accepted windows of ``k`` drafts, ``P(M = m) = (1 − a^k) a^(k m)``, then the first window with a
rejection, in which ``A`` drafts are accepted, ``P(A = j) = a^j (1 − a) / (1 − a^k)`` for
``j < k`` (``M`` and ``A`` independent). It yields ``M k + A + 1`` tokens and costs
``U = (M + 1) k c + 1`` (drafting, plus the last verification), charged
``min(U, V)`` with ``V = M k + A + 1`` (a target-only thread restarted at the segment start).
Since ``M k + A`` is the geometric number of accepted drafts before the first rejection,
``E[V] = 1/(1 − a)``, and the renewal-reward theorem gives per token
``(1 − a) E[min(U, V)]``.

**Event model** (docs/dsi-semantics.md: frontier task, windows supplying ``p`` one position past
their last draft, finite servers). With ``c ≤ 1`` every decided position already has its draft
(theorem ``event_draft_ready``), so decisions are Bernoulli(``a``) verifications, and with no
waiting (enough servers, `event_verification_servers`) the run after each restart is
deterministic up to the position ``g`` of the first rejection: position ``i`` (counted from the
restart) is decided at ``d_i = min(max(W_i, d_{i−1}), d_{i−1} + 1)`` after the restart, where
``W_i`` is when the first window task supplying ``i`` finishes and ``d_{i−1} + 1`` is the
frontier task started at the previous commit. This gives the exact finite-``N`` recurrence
`dsi_event_expected_latency` and the renewal limit `dsi_event_latency_per_token`. **With
waiting** (fewer servers: tasks queue, FIFO/LIFO, and are preempted by rejections) the decision
times depend on the whole queue history; no closed form is derived here; the acceptance-level
simulator (``dsi_ref.expected_latency(..., model="event")``) computes it.
"""

from __future__ import annotations

from typing import Any

import sympy

from .si_latency import geometric_sum, si_best_lookahead, si_latency_per_token
from .symbols import TheoryDomainError, as_expr, check_domain, lookahead_int, tokens_int

__all__ = [
    "dsi_event_commit_offset",
    "dsi_event_commit_offsets",
    "dsi_event_expected_latency",
    "dsi_event_latency_per_token",
    "dsi_paper_latency_per_token",
    "dsi_paper_latency_per_token_nomin",
    "dsi_paper_thresholds",
    "dsi_si_speedup_at_best_lookaheads",
    "event_max_overlap",
    "event_verification_servers",
    "sp_requirement",
    "sp_witness_schedule",
]


def sp_requirement(c: Any, k: Any) -> Any:
    """``SP = ⌈1 / (k c)⌉``: servers needed so that no verification task waits when one is
    launched every ``k c`` and each lasts ``1`` (docs/paper.md; theorems ``sp_requirement_*``).

    >>> sp_requirement(sympy.Rational(1, 10), 2)
    5
    """
    check_domain(c=c, c_max=None)
    return sympy.ceiling(1 / (as_expr(k) * as_expr(c)))


def sp_witness_schedule(c: Any, k: Any, servers: int) -> list[tuple[Any, Any]] | None:
    """The schedule that makes a task wait when ``servers < ⌈1/(k c)⌉``: verification tasks
    ``1 … servers + 1`` launched at ``k c, 2 k c, …`` (every draft accepted), each running one
    target forward; all of them run at once at the last launch, ``(servers + 1) k c``, since
    ``servers · k c < 1``. Returns their ``(launch, end)`` pairs, or ``None`` when ``servers``
    suffice (no such overlap).

    >>> sp_witness_schedule(sympy.Rational(1, 2), 1, 1)
    [(1/2, 3/2), (1, 2)]
    """
    check_domain(c=c, c_max=None)
    c, kk = as_expr(c), lookahead_int(k)
    if servers < 1 or servers >= sp_requirement(c, kk):
        return None
    return [(w * kk * c, w * kk * c + 1) for w in range(1, servers + 2)]


def dsi_paper_latency_per_token_nomin(a: Any, c: Any, k: Any) -> Any:
    """Paper-model DSI per token **without** the per-segment min:
    ``(1 − a)(1 + k c / (1 − a^k)) = (1 − a) + k c / (1 + a + … + a^(k−1))``.

    ``E[U] = (E[M] + 1) k c + 1`` with ``E[M] = a^k / (1 − a^k)``; the polynomial form holds at
    ``a = 1`` too (value ``c``). Source: docs/paper.md (the upper bound of the renewal limit).

    >>> dsi_paper_latency_per_token_nomin(sympy.Rational(1, 2), sympy.Rational(1, 10), 2)
    19/30
    """
    check_domain(a=a, c=c, c_max=None)
    a, c, kk = as_expr(a), as_expr(c), as_expr(k)
    return (1 - a) + kk * c / geometric_sum(a, 0, kk - 1)


def dsi_paper_thresholds(c: Any, k: Any) -> list[int | None]:
    """``t_j``, for ``j = 0 … k−1``: the smallest ``m ≥ 0`` with ``(m + 1) k c ≤ m k + j``, i.e.
    from which the speculative cost ``U`` wins the min; ``t_j = max(0, ⌈(k c − j)/(k (1 − c))⌉)``
    for ``c < 1``, ``None`` (never) for ``c ≥ 1``.

    >>> dsi_paper_thresholds(sympy.Rational(1, 2), 2)
    [1, 0]
    """
    check_domain(c=c, c_max=None)
    c, kk = as_expr(c), lookahead_int(k)
    if not c.is_number:
        raise TheoryDomainError("the thresholds of the min need a numeric c")
    if c >= 1:
        return [None] * kk
    return [max(0, int(sympy.ceiling((kk * c - j) / (kk * (1 - c))))) for j in range(kk)]


def dsi_paper_latency_per_token(a: Any, c: Any, k: Any) -> Any:
    """Paper-model DSI per token **with** the per-segment min (the official simulator), in the
    renewal limit: ``(1 − a) E[min((M + 1) k c + 1, M k + A + 1)]``.

    Closed form (numeric ``k`` and ``c``; ``a`` numeric or symbolic on ``0 ≤ a < 1``): with
    ``r = a^k`` and the thresholds ``t_j`` of `dsi_paper_thresholds`, conditioning on ``A = j``
    and summing the two geometric tails,

        ``E[min | A=j] = k (ρ − r^t (t + ρ)) + (j + 1)(1 − r^t) + k c r^t (t + 1 + ρ) + r^t``

    with ``ρ = r/(1 − r)``, ``t = t_j``. At ``a = 1`` (every window accepted, the segment never
    ends) the value is the limit ``min(c, 1)``; for ``c ≥ 1`` the min is always the target-only
    cost and the value is ``1``.

    >>> dsi_paper_latency_per_token(sympy.Rational(1, 2), sympy.Rational(1, 10), 2)
    7/12
    """
    check_domain(a=a, c=c, c_max=None)
    a, c, kk = as_expr(a), as_expr(c), lookahead_int(k)
    if a == 1:
        return sympy.Min(c, 1)
    thresholds = dsi_paper_thresholds(c, kk)
    if thresholds[0] is None:
        return sympy.Integer(1)
    r = a**kk
    rho = r / (1 - r)
    total = sympy.Integer(0)
    for j, t in enumerate(thresholds):
        assert t is not None  # c < 1 here
        rt = r**t
        e_min = (kk * (rho - rt * (t + rho)) + (j + 1) * (1 - rt) + kk * c * rt * (t + 1 + rho)
                 + rt)
        total += a**j * (1 - a) / (1 - r) * e_min
    value = (1 - a) * total
    return value if a.is_number else sympy.cancel(sympy.together(value))


def dsi_event_commit_offset(g: Any, k: Any, c: Any) -> Any:
    """Event model, no waiting, far from the end: the time after a restart at which relative
    position ``g = q k + r`` (``0 ≤ r < k``) is decided, ``d_g = 1 + q k c + min(r, k c)``.

    Derivation (docs/theory.md): ``d_g = min_j (W_j + g − j)`` over the positions ``j ≤ g``
    supplied by a window task (``W_j = ⌈j/k⌉ k c + 1``, window 1 for ``j = 0``), followed by
    frontier-task steps of ``1``; the best ``j`` is the last multiple of ``k`` or ``g`` itself.
    Needs ``c ≤ 1`` (drafts ready, theorem ``event_draft_ready``).

    >>> [dsi_event_commit_offset(g, 2, sympy.Rational(1, 4)) for g in range(5)]
    [1, 3/2, 3/2, 2, 2]
    """
    check_domain(c=c)
    gg, kk, c = as_expr(g), lookahead_int(k), as_expr(c)
    if not (gg.is_Integer and gg >= 0):
        raise TheoryDomainError(f"position g must be an integer >= 0, got {g!r}")
    q, r = divmod(int(gg), kk)
    return 1 + q * kk * c + sympy.Min(r, kk * c)


def dsi_event_commit_offsets(k: Any, c: Any, n_tokens: Any) -> list[Any]:
    """Event model, no waiting: decision times ``d_0 … d_{n−1}`` after a restart with ``n``
    tokens to go (the last window may be partial: it is submitted when the drafter completes
    position ``n − 1``, at ``n c``):

        ``W_j = min(max(1, ⌈j/k⌉) k, n) c + 1``,  ``d_{−1} = 0``,
        ``d_i = min(max(W_i, d_{i−1}), d_{i−1} + 1)``.

    >>> dsi_event_commit_offsets(2, sympy.Rational(1, 4), 3)
    [1, 3/2, 3/2]
    """
    check_domain(c=c)
    kk, c, n = lookahead_int(k), as_expr(c), tokens_int(n_tokens)
    out: list[Any] = []
    previous: Any = sympy.Integer(0)
    for i in range(int(n)):
        window_end = min(max(1, -(-i // kk)) * kk, int(n))
        supplied = window_end * c + 1
        previous = sympy.Min(sympy.Max(supplied, previous), previous + 1)
        out.append(previous)
    return out


def dsi_event_expected_latency(a: Any, c: Any, k: Any, n_tokens: Any) -> Any:
    """Event-model DSI, exact ``E[T(N)]`` when no verification task waits (at least
    `event_verification_servers` verification servers, i.e. ``SP`` one more) and ``c ≤ 1``.

    Renewal at each rejection: with ``n`` tokens to go, the first rejection is at relative
    position ``g`` with probability ``a^g (1 − a)`` (it commits ``g + 1`` tokens at ``d_g(n)``,
    then everything restarts), or every draft is accepted (probability ``a^n``, last commit at
    ``d_{n−1}(n)``):

        ``T(n) = Σ_{g<n} a^g (1 − a)(d_g(n) + T(n − g − 1)) + a^n d_{n−1}(n)``, ``T(0) = 0``.

    >>> dsi_event_expected_latency(sympy.Rational(1, 2), sympy.Rational(1, 4), 2, 3)
    19/8
    """
    check_domain(a=a, c=c)
    a, c, kk = as_expr(a), as_expr(c), lookahead_int(k)
    n_max = tokens_int(n_tokens)
    t: list[Any] = [sympy.Integer(0)]
    for n in range(1, int(n_max) + 1):
        d = dsi_event_commit_offsets(kk, c, n)
        value = a**n * d[n - 1] + sympy.Add(*[a**g * (1 - a) * (d[g] + t[n - g - 1])
                                              for g in range(n)])
        t.append(value if a.is_number else sympy.expand(value))
    return t[int(n_max)]


def dsi_event_latency_per_token(a: Any, c: Any, k: Any) -> Any:
    """Event-model DSI per token in the renewal limit (no waiting, ``c ≤ 1``):
    ``(1 − a) E[d_G]`` with ``G`` geometric, which with `dsi_event_commit_offset` is

        ``(1 − a) + [k c a^k + Σ_{r<k} a^r (1 − a) min(r, k c)] / (1 + a + … + a^(k−1))``

    ``= (1 − a) + a k c / (1 + … + a^(k−1))`` when ``k c ≤ 1``: the drafting term of the paper
    model's no-min form times ``a`` (a rejection at a window's first position is decided by the
    frontier task, and position ``q k`` by window ``q``'s task, one window early). ``a``, ``c``
    may be symbolic (``k`` numeric); value ``c`` at ``a = 1``.

    >>> dsi_event_latency_per_token(sympy.Rational(1, 2), sympy.Rational(1, 10), 2)
    17/30
    """
    check_domain(a=a, c=c)
    a, c, kk = as_expr(a), as_expr(c), lookahead_int(k)
    spread = sympy.Add(*[a**r * (1 - a) * sympy.Min(r, kk * c) for r in range(kk)])
    return (1 - a) + (kk * c * a**kk + spread) / geometric_sum(a, 0, kk - 1)


def event_max_overlap(c: Any, k: Any, n_tokens: int) -> int:
    """Most verification tasks running at once in the event model after a restart with
    ``n_tokens`` to go when every draft is accepted and no task waits: the largest number of
    submission times (``w k c`` for full windows, ``n c`` for a partial last one) in a
    half-open interval ``(t − 1, t]`` (each task lasts one target forward).

    >>> c = sympy.Rational(1, 10)
    >>> event_max_overlap(c, 4, 13), event_max_overlap(c, 4, 12)
    (4, 3)
    """
    check_domain(c=c)
    c, kk = as_expr(c), lookahead_int(k)
    n = int(n_tokens)
    times = [w * kk * c for w in range(1, n // kk + 1)]
    if n % kk:
        times.append(n * c)
    return max((sum(1 for s in times if t - 1 < s <= t) for t in times), default=0)


def event_verification_servers(c: Any, k: Any, n_tokens: int | None = None) -> int:
    """Verification servers (``SP − 1`` in the event model, server 0 runs the frontier task)
    that guarantee that no verification task ever waits.

    ``n_tokens = None``: the steady state, ``⌈1/(k c)⌉`` (the paper's SP requirement). With a
    finite ``N``: the largest `event_max_overlap` over the tokens left at any restart
    (``1 … N``); the partial last window can need **one more** server than ``⌈1/(k c)⌉``
    (theorem ``event_sp_requirement_with_partial_window``, refuted).

    >>> c = sympy.Rational(1, 10)
    >>> event_verification_servers(c, 4), event_verification_servers(c, 4, 13)
    (3, 4)
    """
    if n_tokens is None:
        return int(sp_requirement(c, k))
    return max((event_max_overlap(c, k, n) for n in range(1, int(n_tokens) + 1)), default=0)


def dsi_si_speedup_at_best_lookaheads(a: Any, c: Any, sp_degree: int, *,
                                      k_max: int = 64) -> tuple[Any, int, int]:
    """The DSI/SI speedup left when each algorithm takes its best lookahead (paper model, per
    token, renewal limit): ``(SI(k_SI) / DSI(k_DSI), k_SI, k_DSI)``.

    ``k_SI`` is exact (`theory.si_latency.si_best_lookahead`: first ``k`` with ``g(k) ≥ 0``,
    optimal by
    theorem ``si_lookahead_unimodal``). ``k_DSI`` ranges over the lookaheads the servers allow,
    ``⌈1/(SP c)⌉ ≤ k ≤ k_max`` (``sp_requirement(c, k) ≤ SP``): without the min the smallest is
    best (theorem ``dsi_nomin_best_lookahead_is_smallest``), but no such monotonicity is proved
    with the min, so the minimum is searched exactly over that range. The ratio is ``≥ 1``
    whenever ``k = 1`` is allowed (theorem ``dsi_k1_beats_si_at_any_lookahead``). Numeric
    ``0 ≤ a < 1``, ``0 < c ≤ 1``.

    >>> ratio, k_si, k_dsi = dsi_si_speedup_at_best_lookaheads(
    ...     sympy.Rational(1, 2), sympy.Rational(1, 10), 7)
    >>> ratio, k_si, k_dsi
    (288/245, 2, 2)
    """
    check_domain(a=a, c=c)
    a, c = as_expr(a), as_expr(c)
    if not (a.is_number and c.is_number) or a == 1:
        raise TheoryDomainError("needs numeric a < 1 and c (at a = 1 SI has no best lookahead)")
    servers = lookahead_int(sp_degree, "sp_degree")
    k_si = si_best_lookahead(a, c)
    assert k_si is not None  # a < 1
    feasible = [kk for kk in range(1, k_max + 1) if sp_requirement(c, kk) <= servers]
    if not feasible:
        raise TheoryDomainError(f"no lookahead <= k_max={k_max} runs on {servers} servers")
    k_dsi = min(feasible, key=lambda kk: (dsi_paper_latency_per_token(a, c, kk), kk))
    ratio = si_latency_per_token(a, c, k_si) / dsi_paper_latency_per_token(a, c, k_dsi)
    return ratio, k_si, k_dsi
