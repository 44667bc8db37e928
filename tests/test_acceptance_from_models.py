"""Laws of accepted lengths per window computed exactly from toy models (issue #14, item 6).

* `window_acceptance_law` for every rule of ``VERIFY_RULES``: a law on ``0 … k``; token-level
  rejection on a context-free pair is exactly ``AcceptanceLaw.iid(Σ min(p, q), k)``; greedy is
  a point mass;
* block verification's survival ``P(L >= i) = E_q[w_i]`` (`block_survival`) equals the engine's,
  on context-free and context-dependent pairs, from the empty prompt and from another one;
* block's law stochastically dominates token-level's (every ``P(L >= i)``, hence ``E[L]``) on
  every pair tried;
* `tree_acceptance_law`: a chain tree under ``rrs`` is SI's window;
* bridges to the simulator: on a context-free pair the token-level engine's exact ``E[T]`` of
  SI equals ``expected_latency("si", acceptance=law)`` for rejection and for block; DSI with
  rejection equals the event model with the law; DSI with block (fixed windows) equals the
  event model with block's law and ``decisions="window"``, while the default position
  decisions are strictly smaller (they let the frontier task commit a draft of a window whose
  task has not finished, which the fixed-window committer never does).
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

import dsi_ref as dr
from dsi_ref.audit.acceptance import (
    block_survival,
    dominates,
    law_from_survival,
    survival,
    tree_acceptance_law,
    window_acceptance_law,
)
from dsi_ref.sim import AcceptanceLaw

#: Context-free pairs (p, q): zeros in either row, p == q, a point-mass drafter, V = 2 .. 4.
CONTEXT_FREE = [
    ((F(1, 2), F(1, 3), F(1, 6)), (F(1, 5), F(1, 5), F(3, 5))),
    ((F(1, 2), F(1, 2)), (F(3, 4), F(1, 4))),
    ((F(0), F(1, 4), F(3, 4)), (F(1, 2), F(1, 2), F(0))),
    ((F(1, 4), F(1, 4), F(1, 4), F(1, 4)), (F(1, 10), F(2, 5), F(1, 5), F(3, 10))),
    ((F(2, 3), F(1, 3)), (F(2, 3), F(1, 3))),
    ((F(3, 5), F(2, 5)), (F(1), F(0))),
]


def pair(p: tuple[F, ...], q: tuple[F, ...]) -> tuple[dr.TableLM, dr.TableLM]:
    return dr.TableLM.context_free(p), dr.TableLM.context_free(q)


def random_pairs() -> list[tuple[dr.TableLM, dr.TableLM]]:
    """Seeded n-gram pairs (zeros allowed): V = 2 .. 4, context 0 .. 2."""
    return [(dr.TableLM.random(v, ctx, seed), dr.TableLM.random(v, ctx, seed + 100))
            for v in (2, 3, 4) for ctx in (0, 1, 2) for seed in range(3)]


@pytest.mark.parametrize(("p", "q"), CONTEXT_FREE)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_token_level_law_is_iid_with_rate_sum_of_min(p: tuple[F, ...], q: tuple[F, ...],
                                                     k: int) -> None:
    target, drafter = pair(p, q)
    a = sum((min(x, y) for x, y in zip(p, q, strict=True)), F(0))
    law = AcceptanceLaw.from_mapping(window_acceptance_law(target, drafter, k, "rejection"), k)
    assert law == AcceptanceLaw.iid(a, k)


@pytest.mark.parametrize("verify", dr.VERIFY_RULES)
def test_every_rule_gives_a_law_on_the_window(verify: str) -> None:
    target, drafter = dr.TableLM.random(3, 1, 4), dr.TableLM.random(3, 1, 104)
    for k in (1, 2, 3):
        law = window_acceptance_law(target, drafter, k, verify)  # type: ignore[arg-type]
        assert sum(law.values()) == 1 and set(law) <= set(range(k + 1))
        assert all(v > 0 for v in law.values())
        if verify == "greedy":
            assert len(law) == 1  # deterministic: a point mass


def test_greedy_accepts_the_common_argmax_run() -> None:
    target, drafter = pair((F(1, 2), F(1, 3), F(1, 6)), (F(3, 5), F(1, 5), F(1, 5)))
    assert window_acceptance_law(target, drafter, 3, "greedy") == {3: F(1)}
    target, drafter = pair((F(1, 2), F(1, 3), F(1, 6)), (F(1, 5), F(3, 5), F(1, 5)))
    assert window_acceptance_law(target, drafter, 3, "greedy") == {0: F(1)}


@pytest.mark.parametrize("k", [1, 2, 3])
def test_block_survival_from_weights_equals_the_engine(k: int) -> None:
    for target, drafter in random_pairs():
        if k == 3 and target.vocab_size == 4:
            continue  # the engine's 4^3 windows: covered at k <= 2
        for prompt in ((), (1,)):
            law = window_acceptance_law(target, drafter, k, "block", prompt)
            assert survival(law, k) == block_survival(target, drafter, k, prompt)


def test_block_survival_on_a_function_model_equals_the_table_model() -> None:
    target, drafter = dr.TableLM.random(3, 2, 5), dr.TableLM.random(3, 2, 105)
    wrapped = (dr.FunctionLM(3, target.probs), dr.FunctionLM(3, drafter.probs))
    assert block_survival(*wrapped, 3) == block_survival(target, drafter, 3)


def test_block_survival_does_not_depend_on_the_window() -> None:
    """``P(L >= i)`` is the same for every ``k >= i``, so a window cut to ``m`` drafts accepts
    ``min(L, m)``: what the simulator assumes."""
    for target, drafter in random_pairs()[:9]:
        laws = {k: window_acceptance_law(target, drafter, k, "block") for k in (1, 2, 3)}
        for k in (1, 2):
            assert survival(laws[k], k) == survival(laws[3], 3)[:k + 1]


def test_block_dominates_token_level_everywhere_tried() -> None:
    compared = 0
    for target, drafter in random_pairs() + [pair(p, q) for p, q in CONTEXT_FREE]:
        for k in (1, 2, 3):
            if k == 3 and target.vocab_size == 4:
                continue
            block = window_acceptance_law(target, drafter, k, "block")
            token = window_acceptance_law(target, drafter, k, "rejection")
            assert dominates(block, token, k), (target, drafter, k, block, token)
            assert sum(j * v for j, v in block.items()) >= sum(j * v for j, v in token.items())
            compared += 1
    pairs = [t for t, _ in random_pairs()] + [dr.TableLM.context_free(p) for p, _ in CONTEXT_FREE]
    assert compared == sum(2 if t.vocab_size == 4 else 3 for t in pairs)


def test_block_is_strictly_better_on_a_pair_where_the_rules_differ() -> None:
    target, drafter = pair(*CONTEXT_FREE[0])
    block = window_acceptance_law(target, drafter, 2, "block")
    token = window_acceptance_law(target, drafter, 2, "rejection")
    assert block == {0: F(13, 30), 1: F(13, 75), 2: F(59, 150)}
    assert survival(block, 2)[2] > survival(token, 2)[2]
    assert not dominates(token, block, 2)


def test_survival_and_its_inverse() -> None:
    law = {0: F(1, 4), 2: F(3, 4)}
    assert law_from_survival(survival(law, 2)) == law
    with pytest.raises(dr.InvalidParameterError):
        survival({3: F(1)}, 2)
    with pytest.raises(dr.InvalidParameterError):
        law_from_survival((F(1, 2),))


def test_chain_tree_under_rrs_is_the_si_window() -> None:
    target, drafter = dr.TableLM.random(3, 1, 2), dr.TableLM.random(3, 1, 102)
    assert tree_acceptance_law(target, drafter, (1, 1), "rrs") == \
        window_acceptance_law(target, drafter, 2, "rejection")


@pytest.mark.parametrize("verify", dr.TREE_VERIFY_RULES)
def test_tree_laws_sum_to_one_and_wider_trees_accept_more(verify: str) -> None:
    target, drafter = dr.TableLM.random(3, 0, 3), dr.TableLM.random(3, 0, 103)
    law = tree_acceptance_law(target, drafter, (2, 1), verify)  # type: ignore[arg-type]
    assert sum(law.values()) == 1 and set(law) <= {0, 1, 2}
    if verify != "greedy":  # a sampling rule with two children beats one child at depth 1
        one = tree_acceptance_law(target, drafter, (1, 1), verify)  # type: ignore[arg-type]
        assert survival(law, 2)[1] >= survival(one, 2)[1]


@pytest.mark.parametrize(("cf", "n", "k", "c"), [
    (0, 4, 2, F(1, 3)), (1, 5, 2, F(1, 3)), (1, 4, 3, F(1, 10)), (3, 3, 1, F(1, 2)),
    (2, 4, 3, F(1, 4))])
@pytest.mark.parametrize("verify", ["rejection", "block"])
def test_si_latency_from_the_law_equals_the_token_level_engine(cf: int, n: int, k: int, c: F,
                                                               verify: str) -> None:
    """Windows cut short by the budget (``n <= k``) included: their law is ``min(L, m)``."""
    target, drafter = pair(*CONTEXT_FREE[cf])
    token_level = dr.exact_expectation(
        lambda rng: dr.speculative(target, drafter, (), n, rng, k, verify,  # type: ignore[arg-type]
                                   latency=dr.Latency(drafter=c)).time)
    law = AcceptanceLaw.from_mapping(window_acceptance_law(target, drafter, k, verify), k)  # type: ignore[arg-type]
    assert dr.expected_latency("si", c=c, acceptance=law, lookahead=k, n_tokens=n) == token_level


@pytest.mark.parametrize(("n", "k", "sp"), [(4, 2, 2), (4, 2, 3), (5, 2, 2), (4, 3, 2)])
def test_dsi_event_model_with_the_law_equals_token_level_dsi_under_rejection(
        n: int, k: int, sp: int) -> None:
    target, drafter = pair(*CONTEXT_FREE[1])
    c = F(1, 3)
    token_level = dr.exact_expectation(
        lambda rng: dr.dsi(target, drafter, (), n, rng, lookahead=k, sp_degree=sp,
                           latency=dr.Latency(drafter=c)).time, scheduler="first")
    law = AcceptanceLaw.from_mapping(window_acceptance_law(target, drafter, k, "rejection"), k)
    assert dr.expected_latency("dsi", c=c, acceptance=law, lookahead=k, n_tokens=n,
                               model="event", sp_degree=sp) == token_level


#: (pair index in CONTEXT_FREE, N, k, SP, c): SP = 1 (the frontier task queues with the rest),
#: ties (c = 1: a draft and a task finish together; c = 1/2, k = 2: a window's task and the
#: frontier task), windows cut by N - 1, a point-mass drafter, p == q, zeros in the rows.
BLOCK_BRIDGE = [
    (1, 4, 2, 2, F(1, 3)), (1, 4, 2, 3, F(1, 3)), (1, 5, 2, 2, F(1, 3)), (1, 4, 3, 2, F(1, 3)),
    (1, 4, 2, 1, F(1, 3)), (1, 5, 2, 1, F(1)), (1, 5, 2, 2, F(1)), (1, 5, 3, 3, F(1, 4)),
    (1, 5, 2, 3, F(1, 2)), (1, 4, 2, 2, F(2)), (0, 4, 2, 2, F(1, 3)), (0, 4, 3, 2, F(1, 3)),
    (2, 4, 2, 2, F(1, 2)), (4, 4, 2, 2, F(1, 3)), (5, 5, 2, 2, F(1, 4)), (3, 3, 2, 1, F(1)),
]


@pytest.mark.parametrize(("cf", "n", "k", "sp", "c"), BLOCK_BRIDGE)
def test_dsi_event_model_with_window_decisions_equals_token_level_block_dsi(
        cf: int, n: int, k: int, sp: int, c: F) -> None:
    """The bridge for block verification: token-level DSI with ``verify="block"`` (fixed
    windows, canonical tie order) has exactly the latency of the event model with block's
    per-window law and ``decisions="window"`` (a window decided at once when it is complete and
    ``p`` is supplied at all of it)."""
    target, drafter = pair(*CONTEXT_FREE[cf])
    token_level = dr.exact_expectation(
        lambda rng: dr.dsi(target, drafter, (), n, rng, k, sp, dr.Latency(drafter=c),
                           verify="block", record=False).time, scheduler="first")
    law = AcceptanceLaw.from_mapping(window_acceptance_law(target, drafter, k, "block"), k)
    predicted = dr.expected_latency("dsi", c=c, acceptance=law, lookahead=k, n_tokens=n,
                                    model="event", sp_degree=sp, decisions="window")
    assert isinstance(predicted, F) and predicted == token_level


@pytest.mark.parametrize(("n", "k", "sp", "token_level", "event"), [
    (4, 2, 2, F(625, 192), F(183, 64)), (4, 2, 3, F(195, 64), F(173, 64)),
    (5, 2, 2, F(2893, 768), F(843, 256)), (4, 3, 2, F(95, 32), F(21, 8)),
])
def test_position_decisions_are_an_optimistic_bound_for_block_dsi(
        n: int, k: int, sp: int, token_level: F, event: F) -> None:
    """With position decisions (the default) the event model decides each draft when ``p``
    arrives there (the frontier task may decide one before its window's task finishes);
    fixed-window block DSI decides a window only when its task has supplied ``p`` at all of it.
    Same law of ``L``, later commits: position decisions are a strict lower bound here, and
    window decisions are the token-level value (pinned values, both ways)."""
    target, drafter = pair(*CONTEXT_FREE[1])
    c = F(1, 3)
    measured = dr.exact_expectation(
        lambda rng: dr.dsi(target, drafter, (), n, rng, lookahead=k, sp_degree=sp,
                           latency=dr.Latency(drafter=c), verify="block").time,
        scheduler="first")
    law = AcceptanceLaw.from_mapping(window_acceptance_law(target, drafter, k, "block"), k)
    kw = {"c": c, "acceptance": law, "lookahead": k, "n_tokens": n, "model": "event",
          "sp_degree": sp}
    optimistic = dr.expected_latency("dsi", **kw)  # type: ignore[arg-type]
    windowed = dr.expected_latency("dsi", decisions="window", **kw)  # type: ignore[arg-type]
    assert (measured, optimistic, windowed) == (token_level, event, token_level)
    assert optimistic < measured
