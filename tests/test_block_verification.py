"""Block verification (Sun et al. 2024): one rule that decides a whole window, for SI and DSI.

Exact checks only: the output law of every decoder below is computed with `Fraction`s and compared
with the target's, or the exact checker's witness is asserted. docs/dsi-semantics.md ("Block
decisions") gives the semantics of DSI with block decisions that these tests pin.
"""

from __future__ import annotations

from fractions import Fraction as F
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.audit.schedulers import check_scheduler_class
from dsi_ref.audit.strategies import model_pairs
from dsi_ref.base.errors import InvalidParameterError, ScheduleDependenceError
from dsi_ref.decoders.verification import (
    BlockVerification,
    Decision,
    RejectionSampling,
    decide_window,
    residual,
)

BLOCK = BlockVerification()


def _window(target: dr.LanguageModel, drafter: dr.LanguageModel, m: int,
            rng: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[int]]:
    """Draft ``m`` tokens from the drafter after the empty prompt; the rows along the chain."""
    drafts: list[int] = []
    draft_rows: list[tuple[Any, ...]] = []
    for i in range(m):
        row = drafter.probs(tuple(drafts))
        draft_rows.append(row)
        drafts.append(rng.categorical(row, key=("draft", i, tuple(drafts))))
    target_rows = [target.probs(tuple(drafts[:i])) for i in range(m + 1)]
    return target_rows, draft_rows, drafts


# -- the rule itself ------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(pair=model_pairs(max_vocab=3, eos=None), m=st.integers(1, 3))
def test_one_block_then_the_target_gives_the_target_law(
        pair: tuple[dr.LanguageModel, dr.LanguageModel], m: int) -> None:
    # one window decided by block verification, then the bonus (all accepted) and target tokens
    # up to m + 1: the law of the m + 1 tokens is the target's (the validity of Sun et al.)
    target, drafter = pair

    def program(rng: Any) -> tuple[int, ...]:
        target_rows, draft_rows, drafts = _window(target, drafter, m, rng)
        out = [d.token for d in BLOCK.decide_window(target_rows, draft_rows, drafts, rng, ())]
        while len(out) < m + 1:
            out.append(rng.categorical(target.probs(tuple(out)), key=("target", len(out),
                                                                      tuple(out))))
        return tuple(out)

    assert dr.exact_distribution(program) == dr.target_distribution(target, (), m + 1)


@settings(max_examples=40, deadline=None)
@given(pair=model_pairs(max_vocab=3, eos=None), m=st.integers(1, 3))
def test_the_correction_is_never_the_rejected_draft(
        pair: tuple[dr.LanguageModel, dr.LanguageModel], m: int) -> None:
    # the docstring's argument that keyed randomness never meets a context twice
    target, drafter = pair

    def program(rng: Any) -> bool:
        target_rows, draft_rows, drafts = _window(target, drafter, m, rng)
        decisions = BLOCK.decide_window(target_rows, draft_rows, drafts, rng, ())
        assert [d.token for d in decisions if d.accepted] == drafts[:len(decisions)
                                                                    - (not decisions[-1].accepted)]
        last = decisions[-1]
        return last.accepted or last.token != drafts[len(decisions) - 1]

    assert dr.exact_distribution(program) == {True: 1}


@settings(max_examples=40, deadline=None)
@given(pair=model_pairs(max_vocab=3, eos=None))
def test_a_window_of_one_is_token_level_rejection_sampling(
        pair: tuple[dr.LanguageModel, dr.LanguageModel]) -> None:
    target, drafter = pair

    def law(rule: Any) -> dict[Any, F]:
        def program(rng: Any) -> tuple[int, ...]:
            target_rows, draft_rows, drafts = _window(target, drafter, 1, rng)
            return tuple(decide_window(rule, target_rows, draft_rows, drafts, rng, ()))
        return dr.exact_distribution(program)

    assert law(BLOCK) == law(RejectionSampling())


def test_the_weights_stop_probabilities_and_residual_by_hand() -> None:
    p = [(F(1, 2), F(1, 2)), (F(3, 4), F(1, 4)), (F(1, 3), F(2, 3))]
    q = [(F(3, 4), F(1, 4)), (F(1, 2), F(1, 2))]
    drafts = [0, 1]
    w = BLOCK.weights(p, q, drafts)
    # w1 = min(1, (1/2)/(3/4)) = 2/3; w2 = min(1, 2/3 * (1/4)/(1/2)) = 1/3
    assert w == [1, F(2, 3), F(1, 3)]
    # h1: rho = sum (2/3 * p2 - q2)+ = (1/2 - 1/2)+ + (1/6 - 1/2)+ = 0 -> 0 / (0 + 1/3) = 0
    assert BLOCK.stop_probability(w[1], p[1], q[1]) == 0
    assert BLOCK.stop_probability(w[2], None, None) == F(1, 3)
    # the residual at tau = 0 is (p1 - q1)+ = (0, 1/4): token 1 whatever the uniform
    assert residual(p[0], q[0]) == [0, F(1, 4)]

    class Always:
        def __init__(self, value: bool) -> None:
            self.value = value

        def bernoulli(self, prob: Any, key: Any = None) -> bool:
            return self.value and prob > 0

        def categorical(self, weights: Any, key: Any = None) -> int:
            return max(range(len(weights)), key=lambda i: weights[i])

    # every coin succeeds with h > 0: tau = 2 (h2 = 1/3 > 0), both accepted
    assert BLOCK.decide_window(p, q, drafts, Always(True), ()) == [
        Decision(0, True, "accepted"), Decision(1, True, "accepted")]
    # every coin fails: tau = 0, correction from (p1 - q1)+ = token 1
    assert BLOCK.decide_window(p, q, drafts, Always(False), ()) == [
        Decision(1, False, "rejected")]


@pytest.mark.parametrize("seed", range(6))
def test_block_accepts_at_least_as_much_as_token_level_in_expectation(seed: int) -> None:
    # Sun et al.: block verification's expected accepted length is at least token-level's (equal
    # on seed 3, whose first target row is one-hot; strictly more on the others)
    t, d = dr.TableLM.random(3, 2, seed=seed), dr.TableLM.random(3, 2, seed=40 + seed)

    def accepted(verify: str) -> F:
        return dr.exact_expectation(lambda rng: F(dr.speculative(
            t, d, (), 4, rng, 3, verify).stats["accepted"]))  # type: ignore[arg-type]

    block, token = accepted("block"), accepted("rejection")
    assert block >= token if seed == 3 else block > token, (block, token)


def test_block_accepts_more_on_a_context_free_pair() -> None:
    t = dr.TableLM.context_free((F(1, 2), F(1, 2)))
    d = dr.TableLM.context_free((F(3, 4), F(1, 4)))

    def accepted(verify: str) -> F:
        return dr.exact_expectation(lambda rng: F(dr.speculative(
            t, d, (), 4, rng, 3, verify).stats["accepted"]))  # type: ignore[arg-type]

    assert accepted("block") > accepted("rejection")


# -- SI --------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(pair=model_pairs(max_vocab=3), n=st.integers(1, 4), k=st.integers(1, 3))
def test_si_with_block_verification_is_lossless(
        pair: tuple[dr.LanguageModel, dr.LanguageModel], n: int, k: int) -> None:
    target, drafter = pair
    dr.assert_lossless(lambda rng: dr.speculative(target, drafter, (), n, rng, k,
                                                  verify="block").tokens,
                       target=target, prompt=(), max_new_tokens=n)


def test_si_block_counts_and_trace_agree() -> None:
    t, d = dr.TableLM.random(3, 2, seed=1), dr.TableLM.random(3, 2, seed=41)
    for seed in range(20):
        run = dr.speculative(t, d, (), 8, dr.Sampler(seed), 3, verify="block")
        s = run.stats
        assert s["accepted"] + s["rejected"] + s["bonus"] == len(run.tokens) == 8
        assert s["accepted"] <= s["drafts"]
        assert s["bonus"] <= s["iterations"]


# -- DSI: block decisions --------------------------------------------------------------------------


LATENCY = dr.Latency(target=1, drafter=F(1, 3))


@pytest.mark.parametrize(("k", "sp"), [(2, 2), (3, 3), (2, 1), (3, 1)])
@pytest.mark.parametrize("seed", [0, 1])
def test_dsi_block_with_fixed_windows_is_lossless_under_every_adaptive_schedule(
        k: int, sp: int, seed: int) -> None:
    # the exact checker quantifies over every tie and queue choice, each may see delivered drafts
    t, d = dr.TableLM.random(3, 2, seed=seed), dr.TableLM.random(3, 2, seed=40 + seed)
    verdict = check_scheduler_class("adaptive", t, d, (), 4, lookahead=k, sp_degree=sp,
                                    latency=LATENCY, verify="block", queue="any")
    assert verdict.lossless, verdict


def test_dsi_block_with_maximal_windows_is_lossless_only_for_oblivious_schedulers() -> None:
    # the witness of docs/dsi-semantics.md: a scheduler that sees delivered drafts chooses
    # whether the frontier task (a block of one draft) or the window's task (a block of three)
    # decides first
    t, d = dr.TableLM.random(3, 2, seed=0), dr.TableLM.random(3, 2, seed=40)
    kwargs: dict[str, Any] = {"lookahead": 3, "sp_degree": 3, "latency": LATENCY,
                              "verify": "block", "block_windows": "maximal"}
    assert check_scheduler_class("oblivious", t, d, (), 4, **kwargs).lossless
    adaptive = check_scheduler_class("adaptive", t, d, (), 4, **kwargs)
    assert not adaptive.lossless and adaptive.witness is not None
    with pytest.raises(ScheduleDependenceError, match=r"task#2\(frontier"):
        dr.exact_distribution(lambda rng: dr.dsi(t, d, (), 4, rng, verify="block",
                                                 block_windows="maximal", lookahead=3,
                                                 sp_degree=3, latency=LATENCY).tokens)
    # the same instance with fixed windows is lossless
    fixed = {**kwargs, "block_windows": "fixed"}
    assert check_scheduler_class("adaptive", t, d, (), 4, **fixed).lossless


def test_dsi_block_counters_add_up() -> None:
    t, d = dr.TableLM.random(3, 2, seed=2), dr.TableLM.random(3, 2, seed=42)
    for mode in ("fixed", "maximal"):
        for seed in range(10):
            run = dr.dsi(t, d, (), 8, dr.Sampler(seed), 3, 2, LATENCY, verify="block",
                         block_windows=mode)  # type: ignore[arg-type]
            s = run.stats
            assert s["accepted"] + s["rejected"] + s["bonus"] == len(run.tokens) == 8
            assert s["accepted"] + s["rejected"] <= s["drafts"]


def test_block_windows_is_validated() -> None:
    t = dr.TableLM.random(2, 1, seed=0)
    with pytest.raises(InvalidParameterError, match="block_windows"):
        dr.dsi(t, t, (), 2, dr.Sampler(0), verify="block",
               block_windows="widest")  # type: ignore[arg-type]


@pytest.mark.parametrize(("seed", "k"), [(1, 2), (2, 3), (5, 3)])
def test_traversal_verification_on_a_chain_accepts_as_block_verification_does(
        seed: int, k: int) -> None:
    # Traversal Verification's update is derived in dsi_ref.decoders.tree (the paper's formula
    # was not reachable); on a chain it must reduce to Sun et al.'s block verification: the same
    # law of accepted drafts in one window
    t, d = dr.TableLM.random(3, 2, seed=seed), dr.TableLM.random(3, 2, seed=40 + seed)

    def accepted(run: Any) -> int:
        return int(run.stats["accepted"])

    chain = dr.exact_distribution(lambda rng: accepted(dr.tree_speculative(
        t, d, (), k + 1, rng, tree=(1,) * k, verify="traversal")))
    block = dr.exact_distribution(lambda rng: accepted(dr.speculative(
        t, d, (), k + 1, rng, k, verify="block")))
    assert chain == block
