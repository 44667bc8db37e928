"""Laws of accepted lengths per window, computed exactly from toy models.

The latency simulator (`dsi_ref.sim`) reads acceptance as the law of a **window**'s accepted
length ``L ∈ {0, …, k}`` (docs/acceptance-laws.md). This module computes that law exactly from a
target ``p`` and a drafter ``q``, for any verification rule, by running exactly one SI iteration
under the exact engine (`dsi_ref.audit.exact`):

* `window_acceptance_law` — one `SIRun.iterate` with ``k`` drafts (budget ``k + 1``), the law
  of ``stats["accepted"]``: how many of the window's drafts are committed;
* `tree_acceptance_law` — one `TreeRun.iterate` of tree speculation, the law of the accepted
  depth (the drafted tokens committed).

**Which window.** For a context-free pair (`TableLM.context_free`: the same rows ``p`` and ``q``
after every prefix), every window sees the same rows, so the law is the same at every window
and windows are independent: it *is* the simulator's per-window law (``AcceptanceLaw(law)``),
exactly. For a context-dependent pair the law depends on the context the window starts from;
here it is defined at ``prompt`` (the first window of a run from ``prompt``). With an EOS token
a drafted EOS cuts the window short, so the simulator's reading (a window of ``k`` drafts)
holds only for models without EOS.

**Block verification's survival in closed form.** With weights ``w_0 = 1``,
``w_i = min(1, w_{i−1} p_i(x_i) / q_i(x_i))`` along the drafts (`BlockVerification`),

    P(L >= i) = E_{x ~ q}[w_i(x_{1:i})]
              = Σ_{x_{1:i}} min_{0 <= j <= i} q(x_{1:j}) p(x_{j+1:i} | x_{1:j})

for every ``i <= k``, whatever ``k`` (`block_survival`; the second form is ``u_i = q(x_{1:i})
w_i``, with ``u_i = min(q(x_{1:i}), u_{i−1} p_i(x_i))``). Token-level rejection sampling
accepts the first ``i`` drafts with probability ``E_q[Π_{j<=i} min(1, p_j(x_j)/q_j(x_j))]``, and
``w_i >= Π_{j<=i} min(1, p_j/q_j)`` on every path, so block's law **stochastically dominates**
token-level's (``P(L >= i)`` never smaller, for every ``i``), not only in ``E[L]``. The identity
is checked against the engine's law in tests/test_acceptance_from_models.py; ``theory`` holds
the context-free closed form (`theory.block_acceptance`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from ..base.errors import InvalidParameterError
from ..base.latency import Latency
from ..base.models import LanguageModel, Number, TableLM
from ..base.randomness import Randomness
from ..base.validate import check_int
from ..decoders.common import check_inputs, model_reader
from ..decoders.speculative import SIRun, SpeculativeConfig
from ..decoders.tree import TreeRule, TreeRun, TreeVerifyRule, as_tree_rule, check_tree
from ..decoders.verification import Rule, VerifyRule, path_weight
from .exact import exact_distribution

__all__ = ["block_survival", "dominates", "law_from_survival", "survival", "tree_acceptance_law",
           "window_acceptance_law"]


def window_acceptance_law(target: LanguageModel, drafter: LanguageModel, lookahead: int,
                          verify: VerifyRule | Rule = "rejection", prompt: Sequence[int] = ()
                          ) -> dict[int, Fraction]:
    """The exact law ``{j: P(L = j)}`` of the drafts accepted in one SI window of ``k =
    lookahead`` drafts verified by ``verify`` (any rule of ``dr.VERIFY_RULES`` or a `Rule`).

    One `SIRun.iterate` from ``prompt`` with budget ``k + 1`` (so the window is the full ``k``),
    under `exact_distribution`; lengths of probability 0 are left out. Greedy is deterministic:
    a point mass. For a context-free pair this is the simulator's per-window law (module
    docstring); pass it as ``AcceptanceLaw.from_mapping(law, k)``.

    >>> from fractions import Fraction as F
    >>> t = TableLM.context_free((F(1, 2), F(1, 2)))
    >>> d = TableLM.context_free((F(3, 4), F(1, 4)))
    >>> window_acceptance_law(t, d, 2, "rejection")
    {0: Fraction(1, 4), 1: Fraction(3, 16), 2: Fraction(9, 16)}
    """
    k = check_int("lookahead", lookahead, low=1)
    start = check_inputs(target, prompt, k + 1, drafter)
    config = SpeculativeConfig(k, verify, Latency())

    def one_window(rng: Randomness) -> int:
        run = SIRun(target, drafter, start, k + 1, rng, config)
        run.iterate()
        return run.stats["accepted"]

    law = exact_distribution(one_window)
    return {j: law[j] for j in sorted(law) if law[j]}


def tree_acceptance_law(target: LanguageModel, drafter: LanguageModel, tree: Sequence[int],
                        verify: TreeVerifyRule | TreeRule = "rrs", prompt: Sequence[int] = ()
                        ) -> dict[int, Fraction]:
    """The exact law ``{d: P(depth = d)}`` of the accepted depth of one iteration of tree
    speculation (`dr.tree_speculative`) with widths ``tree`` and rule ``verify``: the drafted
    tokens one `TreeRun.iterate` commits from ``prompt``, with budget ``len(tree) + 1`` (every
    level drafted). Per tree instead of per window, it is the law a tree's latency depends on.

    >>> from fractions import Fraction as F
    >>> t = TableLM.context_free((F(1, 2), F(1, 2)))
    >>> d = TableLM.context_free((F(3, 4), F(1, 4)))
    >>> tree_acceptance_law(t, d, (2,), "rrs_without_replacement")
    {1: Fraction(1, 1)}
    """
    widths = check_tree(tree)
    rule = as_tree_rule(verify)
    n = len(widths) + 1
    start = check_inputs(target, prompt, n, drafter)

    def one_tree(rng: Randomness) -> int:
        run = TreeRun(target, drafter, start, n, rng, widths, rule, Latency())
        run.iterate()
        return run.stats["accepted"]

    law = exact_distribution(one_tree)
    return {j: law[j] for j in sorted(law) if law[j]}


def survival(law: Mapping[int, Number], k: int) -> tuple[Number, ...]:
    """``(P(L >= 0), P(L >= 1), …, P(L >= k))`` of a law ``{j: P(L = j)}`` on ``0 … k``.

    >>> from fractions import Fraction as F
    >>> survival({0: F(1, 4), 2: F(3, 4)}, 2)
    (Fraction(1, 1), Fraction(3, 4), Fraction(3, 4))
    """
    k = check_int("k", k, low=0)
    if any(j not in range(k + 1) for j in law):
        raise InvalidParameterError(f"survival: a length of {dict(law)!r} is outside 0..{k}")
    zero: Number = Fraction(0) if all(isinstance(v, Fraction) for v in law.values()) else 0.0
    return tuple(sum((v for j, v in law.items() if j >= i), zero) for i in range(k + 1))


def law_from_survival(values: Sequence[Number]) -> dict[int, Number]:
    """The law ``{j: S(j) − S(j + 1)}`` (``S(k + 1) = 0``) of a survival function ``S(0 … k)``
    with ``S(0) = 1``; lengths of probability 0 are left out.

    >>> from fractions import Fraction as F
    >>> law_from_survival((F(1), F(3, 4), F(3, 4)))
    {0: Fraction(1, 4), 2: Fraction(3, 4)}
    """
    if not values or values[0] != 1:
        raise InvalidParameterError(f"law_from_survival needs S(0) = 1, got {tuple(values)!r}")
    tail = (*values[1:], 0 * values[0])
    return {j: s - t for j, (s, t) in enumerate(zip(values, tail, strict=True)) if s - t}


def dominates(law: Mapping[int, Number], other: Mapping[int, Number], k: int) -> bool:
    """True when ``law`` stochastically dominates ``other`` on ``0 … k``: ``P(L >= i)`` under
    ``law`` is at least ``other``'s for every ``i`` (which implies a larger or equal mean).

    >>> from fractions import Fraction as F
    >>> dominates({1: F(1)}, {0: F(1, 2), 1: F(1, 2)}, 1), dominates({0: F(1)}, {1: F(1)}, 1)
    (True, False)
    """
    return all(s >= t for s, t in zip(survival(law, k), survival(other, k), strict=True))


def block_survival(target: LanguageModel, drafter: LanguageModel, lookahead: int,
                   prompt: Sequence[int] = ()) -> tuple[Number, ...]:
    """Block verification's ``(P(L >= 0), …, P(L >= k))`` from the weights alone:
    ``P(L >= i) = E_{x ~ q}[w_i(x_{1:i})]`` (module docstring), without running the rule.

    The expectation is a dynamic programme over ``(context that matters, w)``: the last
    ``max(context)`` tokens when both models are `TableLM` n-grams (nothing for context-free
    pairs, whose states are the distinct weights only), else the whole drafted context. So it
    reaches lookaheads the exact engine cannot (``k = 20`` on ``V = 2`` context-free pairs).

    >>> from fractions import Fraction as F
    >>> t = TableLM.context_free((F(1, 2), F(1, 2)))
    >>> d = TableLM.context_free((F(3, 4), F(1, 4)))
    >>> block_survival(t, d, 2)
    (Fraction(1, 1), Fraction(3, 4), Fraction(5, 8))
    """
    k = check_int("lookahead", lookahead, low=1)
    start = check_inputs(target, prompt, k + 1, drafter)
    read_p, read_q = model_reader(target), model_reader(drafter)
    order: int | None = None
    if isinstance(target, TableLM) and isinstance(drafter, TableLM):
        order = max(target.context, drafter.context)
    one: Number = Fraction(1)
    # state: (the drafted context, as much of it as the rows depend on; w_i) -> P(x_{1:i})
    states: dict[tuple[tuple[int, ...], Number], Number] = {((), one): one}
    values: list[Number] = [one]
    for _ in range(k):
        nxt: dict[tuple[tuple[int, ...], Number], Number] = {}
        for (context, w), mass in states.items():
            prefix = start + context if order is None else (start + context)[-order:] \
                if order else ()
            p, q = read_p(prefix), read_q(prefix)
            for x, qx in enumerate(q):
                if not qx:
                    continue
                new_w = path_weight(w, p[x], qx)
                grown = context + (x,)
                key = (grown if order is None else grown[-order:] if order else (), new_w)
                nxt[key] = nxt.get(key, 0 * one) + mass * qx
        states = nxt
        values.append(sum((mass * w for (_, w), mass in states.items()), 0 * one))
    return tuple(values)
