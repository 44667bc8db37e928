"""Stateful processors (`dsi_ref.base.stateful`, issue #15, item 2): penalties and a grammar with
advance and rollback.

The reference law is `recomputed` (the state folded over the whole generated prefix at every
call); `incremental` keeps the state as engines do, advanced on drafts and rolled back (or forked)
when a context leaves it. Proved here, exactly: the two are the same function of the prefix for
any sequence of calls; SI and DSI with every verification rule, run on incremental models, have
the recomputed target's law; and the incremental wrapper does fewer advances than recomputation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction as F
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsi_ref as dr
from dsi_ref.audit.strategies import exact_rows
from dsi_ref.audit.suite import default_suite
from dsi_ref.audit.zoo import MUTANTS, Mutant, hunt
from dsi_ref.audit.zoo_mutants.processors import _at_most_one_zero, _penalties, _stateful_variant
from dsi_ref.base.errors import ConstraintDeadEndError, InvalidParameterError
from dsi_ref.base.models import Prefix
from dsi_ref.base.stateful import (
    DEAD,
    FrequencyPenalty,
    GrammarConstraint,
    IncrementalLM,
    PresencePenalty,
    RepetitionPenalty,
    StatefulProcessor,
    TokenDFA,
    incremental,
    recomputed,
)

HALF = (F(1, 2), F(1, 2))


# -- each processor, by hand -------------------------------------------------------------------


def test_repetition_penalty_raises_seen_tokens_to_the_power_theta_prompt_included() -> None:
    model = dr.TableLM.context_free((F(1, 2), F(1, 4), F(1, 4)))
    m = recomputed(model, [RepetitionPenalty(2)], prompt=(1,))
    # seen: {1} (the prompt): weights 1/2, 1/16, 1/4, total 13/16
    assert m.probs((1,)) == (F(8, 13), F(1, 13), F(4, 13))
    # seen: {0, 1}: 1/4, 1/16, 1/4, total 9/16
    assert m.probs((1, 0, 0)) == (F(4, 9), F(1, 9), F(4, 9))
    assert recomputed(model, [RepetitionPenalty(1)]).probs((0, 1)) == model.probs(())


def test_presence_and_frequency_penalties_are_rational_factors_on_generated_tokens() -> None:
    model = dr.TableLM.context_free(HALF)
    presence = recomputed(model, [PresencePenalty(F(1, 3))], prompt=(1,))
    assert presence.probs((1,)) == HALF  # the prompt is not counted
    assert presence.probs((1, 0, 0)) == (F(1, 4), F(3, 4))  # 1/2 · 1/3 vs 1/2, once
    frequency = recomputed(model, [FrequencyPenalty(F(1, 3))])
    assert frequency.probs((0, 0)) == (F(1, 10), F(9, 10))  # 1/2 · (1/3)^2 vs 1/2
    assert frequency.probs((0, 1, 0)) == (F(1, 4), F(3, 4))  # 1/9 vs 1/3
    assert recomputed(model, [FrequencyPenalty(2)]).probs((1,)) == (F(1, 3), F(2, 3))


def test_processors_apply_in_order_each_renormalising() -> None:
    model = dr.TableLM.context_free((F(1, 2), F(1, 4), F(1, 4)))
    a = recomputed(model, [PresencePenalty(F(1, 2)), RepetitionPenalty(2)]).probs((0,))
    b = recomputed(model, [RepetitionPenalty(2), PresencePenalty(F(1, 2))]).probs((0,))
    assert a == (F(1, 7), F(3, 7), F(3, 7))   # (1/3, 1/3, 1/3), then (1/3)^2 vs 1/3, 1/3
    assert b == (F(1, 5), F(2, 5), F(2, 5))   # (1/3, 1/3, 1/3), then 1/3 · 1/2 vs 1/3, 1/3
    assert a != b


def test_a_regex_over_tokens_becomes_a_pruned_dfa() -> None:
    dfa = TokenDFA.from_regex("(01)*", vocab_size=3, eos=2)
    start = dfa.start
    assert dfa.allowed(start) == (0, 2)       # 0, or EOS: the empty word is in the language
    after0 = dfa.step(start, 0)
    assert dfa.allowed(after0) == (1,)        # not accepting: no EOS
    assert dfa.step(after0, 1) == start or dfa.allowed(dfa.step(after0, 1)) == (0, 2)
    assert dfa.step(start, 1) == DEAD and dfa.step(start, 2) == DEAD
    # a branch that can never reach an accepting state is pruned (state 2 loops forever)
    pruned = TokenDFA(3, 2, 0, {(0, 0): 1, (0, 1): 2, (2, 0): 2, (1, 1): 1}, frozenset({1}))
    assert pruned.allowed(pruned.start) == (0,) and pruned.allowed(1) == (1, 2)
    assert pruned.step(0, 1) == DEAD
    classes = TokenDFA.from_regex("a[bc]*", vocab_size=11, symbols={"a": {3}, "b": {4},
                                                                   "c": range(5, 11)})
    assert classes.allowed(classes.step(classes.start, 3)) == tuple(range(4, 11))


@pytest.mark.parametrize("pattern, why", [
    ("(01", "missing ')'"), ("0)", "unexpected ')'"), ("[01", "missing ']'"),
    ("7", "unknown symbol '7'"), ("*", "unexpected '*'"),
])
def test_bad_regexes_are_named(pattern: str, why: str) -> None:
    with pytest.raises(InvalidParameterError, match=why.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("*", r"\*")):
        TokenDFA.from_regex(pattern, vocab_size=3)


def test_grammars_that_cannot_generate_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="admits no token"):
        TokenDFA.from_regex("01", vocab_size=3)    # no EOS: after "01" nothing may follow
    with pytest.raises(InvalidParameterError, match="symbol '2' names"):
        TokenDFA.from_regex("0", vocab_size=3, eos=2, symbols={"2": {2}})
    with pytest.raises(InvalidParameterError, match="repetition penalty"):
        RepetitionPenalty(F(3, 2))  # type: ignore[arg-type]
    for bad in (0, -1, F(0), float("nan"), True):
        with pytest.raises(InvalidParameterError, match="presence factor"):
            PresencePenalty(bad)


def test_the_grammar_masks_renormalises_and_passes_through_outside_the_language() -> None:
    g = GrammarConstraint(TokenDFA.from_regex("0*1", vocab_size=3, eos=2))
    m = recomputed(dr.TableLM.context_free((F(1, 2), F(1, 4), F(1, 4)), eos=2), [g])
    assert m.probs(()) == (F(2, 3), F(1, 3), F(0))   # EOS masked until "…1"
    assert m.probs((1,)) == (F(0), F(0), F(1))       # accepted: only EOS
    assert m.probs((2,)) == (F(1, 2), F(1, 4), F(1, 4))  # after a forbidden token: unchanged


def test_a_dead_end_with_positive_probability_is_a_named_error() -> None:
    g = GrammarConstraint(TokenDFA.from_regex("00*1", vocab_size=3, eos=2))
    target = dr.TableLM(3, 1, {(): (F(1), F(0), F(0)), (0,): (F(0), F(0), F(1))}, eos=2)
    for m in (recomputed(target, [g]), incremental(target, [g])):
        assert m.probs(()) == (F(1), F(0), F(0))
        with pytest.raises(ConstraintDeadEndError, match="probability 0 to every token"):
            m.probs((0,))
    with pytest.raises(ConstraintDeadEndError):
        dr.target_distribution(recomputed(target, [g]), (), 2)


def test_a_prefix_outside_the_prompt_is_refused() -> None:
    m = incremental(dr.TableLM.context_free(HALF), [RepetitionPenalty(2)], prompt=(1,))
    with pytest.raises(InvalidParameterError, match="does not start with the prompt"):
        m.probs((0,))
    with pytest.raises(InvalidParameterError, match="not a StatefulProcessor"):
        recomputed(dr.TableLM.context_free(HALF), [object()])  # type: ignore[list-item]


def test_the_processors_satisfy_the_protocol() -> None:
    dfa = TokenDFA.from_regex("0*", vocab_size=2)
    for proc in (RepetitionPenalty(2), PresencePenalty(F(1, 2)), FrequencyPenalty(F(1, 2)),
                 GrammarConstraint(dfa)):
        assert isinstance(proc, StatefulProcessor) and proc.name


# -- incremental is observably recomputed ---------------------------------------------------------

V = 3
REGEXES = ("a*(b.*)?", "(ab)*a?", "[ab]*b", "a?(b|a.)*", "(a|b)(a|b)?.*")


@st.composite
def stateful(draw: Any, eos: int | None) -> list[StatefulProcessor]:
    """A processor stack: penalties drawn independently, and sometimes a grammar (symbols
    ``a`` = 0 and ``b`` = 1, ``.`` any non-EOS token)."""
    procs: list[StatefulProcessor] = []
    for kind in draw(st.lists(st.sampled_from(["repetition", "presence", "frequency",
                                               "grammar"]), max_size=3, unique=True)):
        if kind == "repetition":
            procs.append(RepetitionPenalty(draw(st.integers(1, 3))))
        elif kind == "presence":
            procs.append(PresencePenalty(draw(st.sampled_from([F(1, 3), F(1, 2), F(2)]))))
        elif kind == "frequency":
            procs.append(FrequencyPenalty(draw(st.sampled_from([F(1, 2), F(3, 2)]))))
        else:
            dfa = TokenDFA.from_regex(draw(st.sampled_from(REGEXES)), V, eos,
                                      symbols={"a": {0}, "b": {1}})
            procs.append(GrammarConstraint(dfa))
    ordered: list[StatefulProcessor] = draw(st.permutations(procs))
    return ordered


@st.composite
def positive_models(draw: Any, eos: int | None, name: str) -> dr.TableLM:
    """A bigram model without zeros (so that no grammar state is a dead end)."""
    table = {key: draw(exact_rows(V, allow_zeros=False)) for key in [(), (0,), (1,), (2,)]}
    return dr.TableLM(V, 1, table, eos=eos, name=name)


def _outcome(model: dr.LanguageModel, prefix: Prefix) -> object:
    try:
        return model.probs(prefix)
    except ConstraintDeadEndError as error:
        return ("dead end", str(error))


@settings(max_examples=40)
@given(data=st.data())
def test_incremental_rows_equal_recomputed_rows_for_any_sequence_of_calls(data: Any) -> None:
    eos = data.draw(st.sampled_from([None, 2]))
    model = data.draw(st.sampled_from([
        dr.TableLM.random(V, 1, seed=5, eos=eos), dr.TableLM.random(V, 2, seed=6, eos=eos)]))
    procs = data.draw(stateful(eos))
    prompt = data.draw(st.sampled_from([(), (1,), (0, 1)]))
    slots = data.draw(st.integers(1, 3))
    reference = recomputed(model, procs, prompt)
    engine = incremental(model, procs, prompt, slots=slots)
    calls = data.draw(st.lists(st.lists(st.integers(0, V - 1), max_size=6), max_size=12))
    for generated in calls:
        prefix = prompt + tuple(generated)
        assert _outcome(engine, prefix) == _outcome(reference, prefix), (calls, generated)
    assert engine.stats["calls"] == len(calls)


def test_rollback_and_forks_are_counted() -> None:
    model = dr.TableLM.context_free(HALF)
    one = incremental(model, [RepetitionPenalty(2)])
    one.probs((0, 1, 1))
    one.probs((0, 1, 1, 0))                       # extends: one advance, no rollback
    assert one.stats == {"calls": 2, "advances": 4, "rollbacks": 0, "discarded": 0, "forks": 0}
    one.probs((0, 0))                             # rejection of (1, 1, 0): back to (0,), then 0
    assert one.stats == {"calls": 3, "advances": 5, "rollbacks": 1, "discarded": 3, "forks": 0}
    two = incremental(model, [RepetitionPenalty(2)], slots=2)
    two.probs((0, 1, 1))
    two.probs((0, 0))                             # forked: (0, 1, 1) is kept in its slot
    two.probs((0, 1, 1, 1))                       # ... and extended: one advance
    assert two.stats == {"calls": 3, "advances": 5, "rollbacks": 0, "discarded": 0, "forks": 1}
    assert isinstance(two, IncrementalLM) and len(two.slots) == 2


# -- speculation on incremental models has the recomputed target's law -------------------------

RULES = tuple(dr.VERIFY_RULES)


def _si(rule: str, lookahead: int) -> Callable[..., tuple[int, ...]]:
    def decode(t: dr.LanguageModel, d: dr.LanguageModel, prompt: Sequence[int], n: int,
               rng: dr.Randomness) -> tuple[int, ...]:
        return dr.speculative(t, d, prompt, n, rng, lookahead=lookahead,
                              verify=rule).tokens  # type: ignore[arg-type]
    return decode


def _dsi(rule: str, lookahead: int) -> Callable[..., tuple[int, ...]]:
    def decode(t: dr.LanguageModel, d: dr.LanguageModel, prompt: Sequence[int], n: int,
               rng: dr.Randomness) -> tuple[int, ...]:
        return dr.dsi(t, d, prompt, n, rng, lookahead=lookahead, sp_degree=2,
                      verify=rule).tokens  # type: ignore[arg-type]
    return decode


def _lossless(decode: Callable[..., tuple[int, ...]], target: dr.LanguageModel,
              drafter: dr.LanguageModel, procs: list[StatefulProcessor],
              drafter_procs: list[StatefulProcessor], prompt: Prefix, n: int, rule: str,
              slots: int, merge: bool = True) -> tuple[IncrementalLM, dr.LosslessReport]:
    reference = recomputed(target, procs, prompt)
    t = incremental(target, procs, prompt, slots=slots)  # shared by every re-run of the program
    d = incremental(drafter, drafter_procs, prompt, slots=slots)
    report = dr.assert_lossless(lambda rng: decode(t, d, prompt, n, rng), reference, prompt, n,
                                greedy=rule == "greedy", merge=merge)
    return t, report


@settings(max_examples=12)
@given(data=st.data())
def test_si_with_incremental_models_has_the_recomputed_targets_law(data: Any) -> None:
    eos = data.draw(st.sampled_from([None, 2]))
    target = data.draw(positive_models(eos, "target"))
    drafter = data.draw(positive_models(eos, "drafter"))
    rule = data.draw(st.sampled_from(RULES))
    _lossless(_si(rule, data.draw(st.integers(1, 2))), target, drafter,
              data.draw(stateful(eos)), data.draw(stateful(eos)), data.draw(
                  st.sampled_from([(), (1,)])), 3, rule, data.draw(st.integers(1, 2)))


@settings(max_examples=4)
@given(data=st.data())
def test_dsi_with_incremental_models_has_the_recomputed_targets_law(data: Any) -> None:
    eos = data.draw(st.sampled_from([None, 2]))
    target = data.draw(positive_models(eos, "target"))
    drafter = data.draw(positive_models(eos, "drafter"))
    rule = data.draw(st.sampled_from(RULES))
    _lossless(_dsi(rule, 2), target, drafter, data.draw(stateful(eos)), [], (), 3, rule,
              data.draw(st.integers(1, 3)))


def _grammar_and_penalty(eos: int | None) -> list[StatefulProcessor]:
    dfa = TokenDFA.from_regex("a*(b[ac]*)?", V, eos, symbols={"a": {0}, "b": {1}, "c": {2}
                                                             if eos != 2 else set()})
    return [RepetitionPenalty(2), GrammarConstraint(dfa)]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("decoder", ["speculative", "dsi"])
def test_every_rule_is_lossless_for_a_grammar_and_a_penalty_with_forbidden_drafts(
        rule: str, decoder: str) -> None:
    """The drafter keeps no grammar and proposes token 1 again and again, which the grammar
    allows once: the target scores rows after forbidden drafts (outside the language) and rolls
    them back on rejection. SI is also enumerated plainly (``merge=False``): a resuming SI run
    draws a draft only once the one before it is accepted, so it never scores a row after a
    rejected draft, and only the plain run reaches the rollbacks."""
    target = dr.TableLM.random(V, 1, seed=31, zero_prob=0.0)
    drafter = dr.TableLM.context_free((F(1, 5), F(3, 5), F(1, 5)))
    decode = _si(rule, 2) if decoder == "speculative" else _dsi(rule, 2)
    for merge in ((True, False) if decoder == "speculative" else (True,)):
        t, _ = _lossless(decode, target, drafter, _grammar_and_penalty(None),
                         [PresencePenalty(F(1, 2))],
                         (), 3, rule, 1 if decoder == "speculative" else 3, merge=merge)
    assert t.stats["rollbacks"] + t.stats["forks"] > 0   # drafts were rolled back


def test_incremental_state_does_fewer_advances_than_recomputation() -> None:
    target = dr.TableLM.random(V, 1, seed=31, zero_prob=0.0)
    drafter = dr.TableLM.random(V, 1, seed=32)
    procs = _grammar_and_penalty(None)
    counts: dict[str, dict[str, int]] = {}
    wrappers: dict[str, Callable[..., Any]] = {"recomputed": recomputed,
                                               "incremental": incremental}
    for kind, wrap in wrappers.items():
        t, d = wrap(target, procs), wrap(drafter, [RepetitionPenalty(2)])

        def program(rng: dr.Randomness, t: Any = t, d: Any = d) -> tuple[int, ...]:
            return dr.speculative(t, d, (), 4, rng, lookahead=2).tokens

        dr.exact_distribution(program)
        counts[kind] = t.stats
    assert counts["incremental"]["calls"] == counts["recomputed"]["calls"]
    assert counts["incremental"]["rollbacks"] > 0
    # each call of the incremental wrapper advances over the new tokens only (measured: 364
    # advances against 699 for the same 209 calls)
    assert counts["incremental"]["advances"] < counts["recomputed"]["advances"]


def test_float_rows_are_processed_in_floats() -> None:
    model = dr.TableLM.context_free((0.5, 0.25, 0.25))
    row = incremental(model, [RepetitionPenalty(2), FrequencyPenalty(F(1, 2))]).probs((0,))
    assert all(isinstance(x, float) for x in row)
    expected = (0.2, 0.4, 0.4)  # (1/4, 1/4, 1/4) normalised, then 1/2 on token 0
    assert max(abs(float(a) - b) for a, b in zip(row, expected, strict=True)) < 1e-15


# -- the zoo's stateful mutants: killed, and only for the missing rollback ------------------------

STATEFUL_MUTANTS = ("penalty-counts-rejected-drafts", "grammar-not-rolled-back")


@pytest.mark.parametrize("name", STATEFUL_MUTANTS)
def test_the_stateful_mutants_are_killed_against_the_processed_target(name: str) -> None:
    mutant = MUTANTS[name]
    assert mutant.law is not None and "#" in mutant.pattern
    kill = hunt(mutant)
    assert kill is not None and kill.tv_distance is not None and kill.tv_distance > 0
    pair = next(p for p in default_suite() if p.name == kill.model)
    assert kill.worst_sequence is not None
    law = dr.target_distribution(mutant.law(pair.target), pair.prompt, 3)
    assert law.get(kill.worst_sequence, F(0)) == kill.target_probability  # the processed law


@pytest.mark.parametrize("stacks", [(_penalties, _penalties),
                                    (_at_most_one_zero, lambda model: [])],
                         ids=["penalties", "grammar"])
def test_the_same_wrappers_with_their_rollback_are_not_killed(stacks: Any) -> None:
    """The mutants' decoder with the correct `IncrementalLM`: lossless on every suite pair, so
    each kill above is the skipped rollback's."""
    target_processors, drafter_processors = stacks
    correct = Mutant("correct", "none", _stateful_variant(target_processors, drafter_processors),
                     "speculative", law=lambda t: recomputed(t, target_processors(t)))
    assert hunt(correct) is None
