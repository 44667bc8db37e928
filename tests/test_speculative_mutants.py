"""Tests that kill mutants of dsi_ref/decoders/speculative.py (issue #13, item 7): the config's
errors, whole runs pinned on one-hot models (every step, every counter, every trace event), the
window's boundary, EOS, non-SI, the seams, and the merge state the exact checker reads from a run
(`dsi_ref.audit.exact.state`), including the objects it names (an alias of a run part is not a
copy of it).

Models with one-hot rows make every run deterministic, so a `Run` is compared whole (``==``)."""

from __future__ import annotations

import re
from collections.abc import Hashable
from fractions import Fraction as F
from typing import Any, cast

import pytest
from recording_hooks import RecordingHooks

import dsi_ref as dr
from dsi_ref.audit.exact.state import Layout, NoMerge, States, fingerprint
from dsi_ref.base.errors import InvalidParameterError
from dsi_ref.base.exact_hooks import Checkpointing
from dsi_ref.base.latency import Latency
from dsi_ref.base.result import Event, Run
from dsi_ref.decoders.speculative import (
    NON_SI_STATS,
    STATS,
    SIRun,
    SpeculativeConfig,
    speculative,
)
from dsi_ref.decoders.verification import RejectionSampling

ONE = (F(0), F(1), F(0))  # always token 1
ZERO = (F(1), F(0), F(0))  # always token 0
TWO = (F(0), F(0), F(1))  # always token 2
TARGET = dr.TableLM(3, 0, {}, default=ONE, name="target")
AGREES = dr.TableLM(3, 0, {}, default=ONE, name="agrees")
DISAGREES = dr.TableLM(3, 0, {}, default=ZERO, name="disagrees")
LAT = Latency(drafter=F(1, 10), target=F(1), drafter_first=F(1, 2), target_first=F(3))


def _stats(**counts: int) -> dict[str, int]:
    return {name: counts.get(name, 0) for name in STATS}


def _commit(pos: int, kind: str, at: F) -> Event:
    return Event("committer", "commit", at, at, (pos,), kind)


# -- SpeculativeConfig ---------------------------------------------------------------------------


def test_the_config_defaults_and_the_lookahead_boundary() -> None:
    cfg = SpeculativeConfig(1)
    assert (cfg.lookahead, cfg.verify, cfg.latency) == (1, "rejection", Latency())
    with pytest.raises(InvalidParameterError,
                       match=re.escape("lookahead must be an int >= 1, got 0")):
        SpeculativeConfig(0)


def test_the_config_names_a_bad_rule_and_a_bad_latency() -> None:
    with pytest.raises(InvalidParameterError) as err:
        SpeculativeConfig(2, verify=cast(Any, "nope"))
    assert str(err.value) == ("verify must be one of ('rejection', 'exact_match', 'greedy', "
                              "'block') or a Rule, got 'nope'")
    assert err.value.__cause__ is None and err.value.__suppress_context__
    with pytest.raises(InvalidParameterError) as err:
        SpeculativeConfig(2, verify=cast(Any, 3))
    assert str(err.value) == ("verify must be a rule name ('rejection', 'exact_match', "
                              "'greedy', 'block') or a Rule object, got int")
    with pytest.raises(InvalidParameterError) as err:
        SpeculativeConfig(2, latency=cast(Any, F(1)))
    assert str(err.value) == "latency must be a dsi_ref.Latency"


class _Count(int):
    """An integer of another type than ``int``."""


def test_the_config_stores_the_lookahead_as_an_int() -> None:
    cfg = SpeculativeConfig(_Count(2))
    assert type(cfg.lookahead) is int and cfg.lookahead == 2


def test_the_rule_of_a_config_is_the_rule_a_run_uses() -> None:
    rule = RejectionSampling()
    run = SIRun(TARGET, AGREES, (), 2, dr.Sampler(0), SpeculativeConfig(2, verify=rule))
    assert run.rule is rule and run.lookahead == 2 and run.stat_names == STATS
    assert SIRun(TARGET, None, (), 2, dr.Sampler(0), SpeculativeConfig(2)).lookahead == 0


# -- whole runs on one-hot models ----------------------------------------------------------------


def test_a_run_whose_drafts_are_all_accepted_pinned_whole() -> None:
    """k = 2, N = 5: windows 2 then ``min(2, 5 − 3 − 1) = 1``; a bonus each iteration."""
    run = SIRun(TARGET, AGREES, (), 5, dr.Sampler(0), SpeculativeConfig(2, latency=LAT)).run()
    t = [F(0), F(1, 2), F(6, 10), F(36, 10), F(37, 10), F(47, 10)]
    assert run == Run((1, 1, 1, 1, 1), t[5], (
        Event("drafter", "draft", t[0], t[1], (0,), ""),
        Event("drafter", "draft", t[1], t[2], (1,), ""),
        Event("target", "verify", t[2], t[3], (0, 1, 2), ""),
        _commit(0, "accepted", t[3]), _commit(1, "accepted", t[3]), _commit(2, "bonus", t[3]),
        Event("drafter", "draft", t[3], t[4], (3,), ""),
        Event("target", "verify", t[4], t[5], (3, 4), ""),
        _commit(3, "accepted", t[5]), _commit(4, "bonus", t[5]),
    ), _stats(iterations=2, drafts=3, accepted=3, bonus=2, target_forwards=2,
              drafter_forwards=3))


def test_a_run_whose_drafts_are_all_rejected_shrinks_its_window_to_zero() -> None:
    """k = 2, N = 3: windows 2, 1, 0; a rejection stops an iteration (no bonus); the empty
    window is one target ``forward`` and a bonus."""
    run = SIRun(TARGET, DISAGREES, (), 3, dr.Sampler(0), SpeculativeConfig(2)).run()
    d, one = F(1, 10), F(1)
    assert run == Run((1, 1, 1), 3 * d + 3 * one, (
        Event("drafter", "draft", 0 * d, d, (0,), ""),
        Event("drafter", "draft", d, 2 * d, (1,), ""),
        Event("target", "verify", 2 * d, 2 * d + one, (0, 1, 2), ""),
        _commit(0, "rejected", 2 * d + one),
        Event("drafter", "draft", 2 * d + one, 3 * d + one, (1,), ""),
        Event("target", "verify", 3 * d + one, 3 * d + 2 * one, (1, 2), ""),
        _commit(1, "rejected", 3 * d + 2 * one),
        Event("target", "forward", 3 * d + 2 * one, 3 * d + 3 * one, (2,), ""),
        _commit(2, "bonus", 3 * d + 3 * one),
    ), _stats(iterations=3, drafts=3, rejected=2, bonus=1, target_forwards=3,
              drafter_forwards=3))


def test_a_window_of_exactly_one_below_the_budget() -> None:
    """``m = min(k, N − 1)``: k = 3 with N = 4 drafts 3 (not 2, not 4) in one iteration."""
    run = SIRun(TARGET, AGREES, (), 4, dr.Sampler(0), SpeculativeConfig(3)).run()
    assert run.tokens == (1, 1, 1, 1)
    assert run.stats == _stats(iterations=1, drafts=3, accepted=3, bonus=1, target_forwards=1,
                               drafter_forwards=3)
    run = SIRun(TARGET, AGREES, (), 4, dr.Sampler(0), SpeculativeConfig(4)).run()
    assert run.stats["drafts"] == 3 and run.stats["iterations"] == 1


def test_a_drafted_eos_ends_the_window_and_a_committed_eos_the_run() -> None:
    target = dr.TableLM(3, 0, {}, default=TWO, eos=2)
    drafter = dr.TableLM(3, 0, {}, default=TWO, eos=2)
    run = SIRun(target, drafter, (), 5, dr.Sampler(0), SpeculativeConfig(3)).run()
    d = F(1, 10)
    assert run == Run((2,), d + 1, (
        Event("drafter", "draft", F(0), d, (0,), ""),
        Event("target", "verify", d, d + 1, (0, 1), ""),
        _commit(0, "accepted", d + 1),
    ), _stats(iterations=1, drafts=1, accepted=1, target_forwards=1, drafter_forwards=1))


def test_an_eos_bonus_ends_the_run() -> None:
    target = dr.TableLM(3, 0, {}, default=TWO, eos=2)
    drafter = dr.TableLM(3, 0, {}, default=ZERO, eos=2)
    run = SIRun(target, drafter, (), 5, dr.Sampler(0), SpeculativeConfig(1)).run()
    assert run.tokens == (2,)
    assert run.stats == _stats(iterations=1, drafts=1, rejected=1, target_forwards=1,
                               drafter_forwards=1)


def test_an_accepted_draft_before_a_rejected_one() -> None:
    """The drafter agrees on the first position only (a context-1 drafter): the second draft is
    rejected and the iteration stops there; the last token is a window of 0 and a bonus."""
    drafter = dr.TableLM(3, 1, {(1,): ZERO}, default=ONE)
    run = SIRun(TARGET, drafter, (), 3, dr.Sampler(0), SpeculativeConfig(2)).run()
    assert run.tokens == (1, 1, 1)
    assert run.stats == _stats(iterations=2, drafts=2, accepted=1, rejected=1, bonus=1,
                               target_forwards=2, drafter_forwards=2)
    assert [e.note for e in run.trace if e.resource == "committer"] == [
        "accepted", "rejected", "bonus"]


def test_a_budget_of_zero_runs_no_iteration() -> None:
    run = SIRun(TARGET, AGREES, (), 0, dr.Sampler(0), SpeculativeConfig(2)).run()
    assert run == Run((), F(0), (), _stats())


def test_non_si_is_one_forward_and_one_bonus_per_token_with_its_own_counters() -> None:
    run = SIRun(TARGET, None, (), 2, dr.Sampler(0), SpeculativeConfig(3, latency=LAT)).run()
    assert run == Run((1, 1), F(4), (
        Event("target", "forward", F(0), F(3), (0,), ""), _commit(0, "bonus", F(3)),
        Event("target", "forward", F(3), F(4), (1,), ""), _commit(1, "bonus", F(4)),
    ), {"target_forwards": 2, "bonus": 2})
    assert tuple(run.stats) == NON_SI_STATS


def test_speculative_defaults_to_three_drafts_rejection_and_the_default_latency() -> None:
    run = speculative(TARGET, AGREES, [], 5, dr.Sampler(0))
    assert run == SIRun(TARGET, AGREES, (), 5, dr.Sampler(0), SpeculativeConfig(3)).run()
    assert run.stats["drafts"] == 3 and run.stats["iterations"] == 2 and run.time == F(23, 10)
    assert speculative(TARGET, AGREES, [0], 5, dr.Sampler(0), 2, "greedy", latency=LAT) == \
        SIRun(TARGET, AGREES, (0,), 5, dr.Sampler(0), SpeculativeConfig(2, "greedy", LAT)).run()
    with pytest.raises(InvalidParameterError,
                       match=re.escape("max_new_tokens must be an int >= 0, got -1")):
        speculative(TARGET, AGREES, [], -1, dr.Sampler(0))


def test_speculative_checks_the_drafter_and_the_rng() -> None:
    wide = dr.TableLM(4, 0, {}, default=(F(1, 4),) * 4)
    with pytest.raises(InvalidParameterError,
                       match=re.escape("target and drafter vocabularies differ: 3 vs 4")):
        speculative(TARGET, wide, [], 2, dr.Sampler(0))
    with pytest.raises(InvalidParameterError, match=re.escape(
            "rng must be a dsi_ref.Randomness (categorical, bernoulli and choose), e.g. "
            "dsi_ref.Sampler(0), got int (a seed: use dsi_ref.Sampler(seed))")):
        speculative(TARGET, AGREES, [], 2, cast(Any, 0))


def test_the_law_of_si_is_the_target_law_on_random_models() -> None:
    target = dr.TableLM.random(3, 1, seed=1)
    drafter = dr.TableLM.random(3, 1, seed=2)
    law = dr.exact_distribution(lambda rng: speculative(target, drafter, [0], 3, rng, 2).tokens)
    assert law == dr.target_distribution(target, (0,), 3)


def test_a_random_latency_is_drawn_with_the_run_rng() -> None:
    lat = Latency(drafter={F(1, 10): F(1, 2), F(3, 10): F(1, 2)})
    law = dr.exact_distribution(
        lambda rng: SIRun(TARGET, AGREES, (), 2, rng, SpeculativeConfig(1, latency=lat)).run().time)
    assert law == {F(11, 10): F(1, 2), F(13, 10): F(1, 2)}


# -- the seams -----------------------------------------------------------------------------------


def test_model_rows_reads_the_last_count_prefixes_of_prompt_and_context() -> None:
    target = dr.TableLM(3, 1, {(0,): ZERO, (1,): ONE, (2,): TWO}, default=ONE)
    drafter = dr.TableLM(3, 1, {(0,): TWO, (1,): ZERO, (2,): ONE}, default=ZERO)
    run = SIRun(target, drafter, (2,), 5, dr.Sampler(0), SpeculativeConfig(2))
    assert run.model_rows("target", (0, 1), 3) == [TWO, ZERO, ONE]
    assert run.model_rows("target", (0, 1), 1) == [ONE]
    assert run.model_rows("drafter", (0,), 2) == [ONE, TWO]
    assert run.model_rows("drafter", (), 1) == [ONE]


def test_the_counters_of_a_fresh_run() -> None:
    run = SIRun(TARGET, AGREES, (), 2, dr.Sampler(0), SpeculativeConfig(2))
    assert run.counters() == _stats()
    assert run.result() == Run((), F(0), (), _stats())


# -- the merge state -----------------------------------------------------------------------------


def _fresh(cls: type[SIRun] = SIRun, rng: Any = None) -> SIRun:
    return cls(TARGET, AGREES, (), 4, dr.Sampler(0) if rng is None else rng,
               SpeculativeConfig(2))


class _Sub(SIRun):
    pass


def _states(*runs: SIRun) -> list[Hashable]:
    """The merge states of ``runs`` now, as the exact checker reads them (`States.merge_state`,
    one table for all: equal traces get equal ids)."""
    states = States()
    return [states.merge_state(run, run.checkpointing()) for run in runs]


def _extras(run: SIRun) -> Any:
    """What the merge state of ``run`` adds beside its fields (`States.extras`)."""
    state = cast(tuple[Any, ...], _states(run)[0])
    assert len(state) == 2, "a plain merge state: nothing beside the fields"
    return state[1]


#: How the checker treats `SIRun`'s own code with a built-in rule, recording and lean.
RECORDING = Checkpointing(own=True, resumable=True, history=True, absolute_time=True,
                          derived=False)
LEAN = RECORDING._replace(history=False, absolute_time=False)


def test_the_fields_and_their_roles() -> None:
    """The fields of a run, in order, with their roles: the committed tokens, the clock, the
    history (trace and counters) and what `SIRun`'s own code derives from the tokens (the
    drafts' ``q`` and the iteration's ``p``)."""
    assert [(f.name, f.role) for f in Layout(SIRun).fields] == [
        ("tokens", "committed"), ("done", None), ("time", "clock"), ("first", None),
        ("trace", "history"), ("stats", "history"), ("start", None), ("context", None),
        ("drafts", None), ("draft_rows", "derived"), ("target_rows", "derived"),
        ("step", None), ("resuming", None), ("lazy", None)]
    run = _fresh()
    assert run.checkpointing() == RECORDING
    lean = SIRun(TARGET, AGREES, (), 4, dr.Sampler(0),
                 SpeculativeConfig(2, record=False, keep_time=False))
    assert lean.checkpointing() == LEAN
    assert _fresh(_Sub).checkpointing() == RECORDING  # a subclass that replaces nothing
    assert OwnStepRun(TARGET, AGREES, (), 4, dr.Sampler(0), SpeculativeConfig(2)
                      ).checkpointing() == Checkpointing(own=False, resumable=False,
                                                         history=True, absolute_time=True,
                                                         derived=True)


class OwnStepRun(SIRun):
    def draft(self) -> None:
        super().draft()


def test_the_library_state_and_done() -> None:
    """The merge state of `SIRun`'s own code is its fields alone, the trace as the id of its
    contents (empty: 0); ``done`` is in it."""
    run = _fresh()
    flags = (("drafter", True), ("target", True))
    assert _states(run) == [((), False, F(0), flags, 0, tuple(dict.fromkeys(STATS, 0).items()),
                             0, (), (), None, False, False)]
    run.done = True
    assert _states(run) == [((), True, F(0), flags, 0, tuple(dict.fromkeys(STATS, 0).items()),
                             0, (), (), None, False, False)]
    lean = SIRun(TARGET, AGREES, (), 4, dr.Sampler(0),
                 SpeculativeConfig(2, record=False, keep_time=False))
    lean.time = F(5)  # a lean run that returns no time leaves the clock out, with the history
    lean.stats["bonus"] = 3
    assert _states(lean) == [((), False, flags, 0, (), (), None, False, False)]


def test_a_rebound_config_is_read_and_its_latency_used() -> None:
    """The costs are the configuration's: a configuration rebound after construction is read
    as data in the merge state, and the clock follows its latency."""
    a, b = _fresh(), _fresh()
    b.cfg = SpeculativeConfig(2, latency=LAT)
    state_a, state_b = _states(a, b)
    assert state_a != state_b and len(cast(tuple[Any, ...], state_b)) == 2
    b.iterate()
    assert b.time == F(1, 2) + F(1, 10) + F(3)  # two drafts (TTFT, then TPOT), the target
    assert [e.end for e in b.trace if e.resource != "committer"] == [F(1, 2), F(6, 10),
                                                                    F(6, 10) + F(3)]


def test_a_rebound_stats_dict_is_read() -> None:
    a, b = _fresh(), _fresh()
    a.stats, b.stats = {"x": 1}, {"x": 2}
    state_a, state_b = _states(a, b)
    assert state_a != state_b and state_a == _states(a)[0]
    b.stats = {"x": 1}
    assert _states(a) == _states(b)


def test_a_rebound_part_is_read_as_data() -> None:
    a, b = _fresh(), _fresh()
    b.n = 5
    assert _states(a) != _states(b) and _states(b) == _states(b)
    assert _extras(b) == (fingerprint({"n": 5}, {}), ())
    b.n = 4
    assert _states(a) == _states(b)




def test_the_scratch_is_read_only_when_iterate_is_overridden() -> None:
    """At the merge point at the top of the loop, the per-iteration fields are dead when
    `iterate` is `SIRun`'s (it resets them before any step reads them): the loop resets them
    first, so a leftover scratch merges. A subclass with an `iterate` of its own (or a `run`
    that calls `SIRun`'s) may read them: they are kept as they are."""
    class OwnRun(SIRun):
        def run(self) -> Run:
            return super().run()

    class OwnIterate(SIRun):
        def iterate(self) -> None:
            super().iterate()

    for cls, read in ((_Sub, False), (OwnStepRun, False), (OwnRun, False),
                      (OwnIterate, True)):
        rng = RecordingHooks(0)
        a, b = _fresh(cls, rng), _fresh(cls, rng)
        a.start, b.start = 0, 1
        a.drafts, b.drafts = [0], [1]
        a.merge_point()
        b.merge_point()
        (state_a, _), (state_b, _) = rng.hints
        assert (state_a != state_b) is read, cls.__name__
        assert (b.drafts == [1]) is read and b.step is None


def test_a_fresh_run_has_empty_scratch() -> None:
    run = _fresh()
    assert (run.tokens, run.done, run.start, run.context, run.drafts, run.draft_rows,
            run.target_rows) == ([], False, 0, (), [], [], ())


def test_a_subclass_attribute_is_read_in_dict_and_slots() -> None:
    class Slotted(SIRun):
        __slots__ = ("extra",)

    a, b = _fresh(_Sub), _fresh(_Sub)
    a.note, b.note = 1, 2  # type: ignore[attr-defined]
    assert _states(a) != _states(b)
    b.note = 1  # type: ignore[attr-defined]
    assert _states(a) == _states(b)
    c, d = cast(Any, _fresh(Slotted)), cast(Any, _fresh(Slotted))
    assert _states(c) == _states(d)
    c.extra, d.extra = 1, 2
    assert _states(c) != _states(d)
    d.extra = 1
    assert _states(c) == _states(d)


def test_the_attributes_of_a_rule_are_read_in_dict_and_slots() -> None:
    class Counting(RejectionSampling):
        def __init__(self) -> None:
            self.calls = 0

    class SlottedCounting(RejectionSampling):
        __slots__ = ("calls",)

        def __init__(self) -> None:
            self.calls = 0

    class OwnSlottedRule:
        """A rule of its own (not a `RejectionSampling`): slots and no ``__dict__``."""

        __slots__ = ("calls",)
        name = "own"
        greedy = False

        def __init__(self) -> None:
            self.calls = 0

        def draft(self, draft_probs: Any, rng: Any, context: tuple[int, ...]) -> int:
            return RejectionSampling().draft(draft_probs, rng, context)

        def decide(self, target_probs: Any, draft_probs: Any, draft: int | None, rng: Any,
                   context: tuple[int, ...]) -> Any:
            return RejectionSampling().decide(target_probs, draft_probs, draft, rng, context)

    assert not hasattr(OwnSlottedRule(), "__dict__")
    for rule in (Counting(), SlottedCounting(), OwnSlottedRule()):
        run = SIRun(TARGET, AGREES, (), 4, dr.Sampler(0), SpeculativeConfig(2, verify=rule))
        assert run.checkpointing().data_parts == (rule,) and not run.checkpointing().resumable
        before = _states(run)[0]
        assert before == _states(run)[0]
        rule.calls += 1
        assert _states(run)[0] != before


@pytest.mark.parametrize("part", ["tokens", "stats", "trace", "first"])
def test_an_alias_of_a_run_container_is_not_a_copy_of_it(part: str) -> None:
    """The checker names the run's own containers: an attribute that *is* the token list
    (which grows with the run) differs from one that holds a copy of it (which does not),
    though both read the same now. Merging the two would be unsound."""
    def container(run: SIRun) -> Any:
        return getattr(run, part)

    a, b = _fresh(_Sub), _fresh(_Sub)
    alias, original = container(a), container(b)
    cast(Any, a).mine = alias
    cast(Any, b).mine = original.copy()
    assert _states(a) == _states(a) and _states(b) == _states(b)
    assert _states(a) != _states(b)
    c = _fresh(_Sub)
    cast(Any, c).mine = container(c)
    assert _states(a) == _states(c)


@pytest.mark.parametrize("part", ["self", "rng"])
def test_a_reference_to_the_run_or_a_part_of_it_still_merges(part: str) -> None:
    """The run and its parts are not data; the checker names them, so holding one merges."""
    a, b = _fresh(_Sub), _fresh(_Sub)
    cast(Any, a).back = a if part == "self" else a.rng
    cast(Any, b).back = b if part == "self" else b.rng
    own, _ = _extras(a)
    assert not isinstance(own, NoMerge)
    assert _states(a) == _states(b)


class _AliasOrCopy(SIRun):
    """Correct or not depending on sharing: after its first bonus a fair coin picks whether
    ``seen`` is the token list itself or a copy of it; from then on its bonus token is 0 while
    ``seen`` holds every committed token, 1 otherwise. The coin leaves no trace in the fields,
    so only the fingerprint of ``seen`` (an alias named ``tokens``, not a list) keeps the two
    paths apart at the next merge point."""

    def bonus(self) -> None:
        if not hasattr(self, "seen"):
            super().bonus()
            alias = self.rng.bernoulli(F(1, 2))
            self.seen: list[int] = self.tokens if alias else list(self.tokens)
        else:
            self.commit(ZERO if len(self.seen) == len(self.tokens) else ONE)


def test_merging_an_alias_with_a_copy_would_change_the_law() -> None:
    def program(rng: Any) -> tuple[int, ...]:
        return _AliasOrCopy(TARGET, AGREES, (), 4, rng, SpeculativeConfig(1)).run().tokens

    law = dr.exact_distribution(program)
    assert law == dr.exact_distribution(program, merge=False)
    assert law == {(1, 1, 1, 0): F(1, 2), (1, 1, 1, 1): F(1, 2)}


def test_a_merge_point_before_each_iteration_with_the_committed_tokens() -> None:
    """The run enters once, then offers a merge point at the top of each iteration: the fields
    with the per-iteration ones reset and the step at the top of the loop, and the committed
    tokens."""
    rng = RecordingHooks(0)
    run = SIRun(TARGET, AGREES, (), 5, rng, SpeculativeConfig(2))
    run.run()
    assert rng.entered == [RECORDING] and rng.plain == [True, True]
    other = SIRun(TARGET, AGREES, (), 5, dr.Sampler(0), SpeculativeConfig(2))
    other.step = ("top",)
    first = rng.states.merge_state(other, RECORDING)
    other.step = None
    other.iterate()
    other.begin()
    other.step = ("top",)
    assert rng.hints == [(first, ()), (rng.states.merge_state(other, RECORDING), (1, 1, 1))]
    flags = (("drafter", True), ("target", True))
    assert first == ((), False, F(0), flags, 0, tuple(dict.fromkeys(STATS, 0).items()), 0, (),
                     (), ("top",), False, False)


def test_a_step_sees_the_scratch_reset_by_iterate() -> None:
    """`iterate` resets the per-iteration scratch before any step: nothing of the earlier
    iteration is visible to an overridden `draft` (the class docstring's contract)."""
    class Peeks(SIRun):
        peeked: list[object]

        def draft(self) -> None:
            self.peeked.append((self.start, self.context, list(self.drafts),
                                list(self.draft_rows), self.target_rows))
            super().draft()

    run = Peeks(TARGET, AGREES, (), 5, dr.Sampler(0), SpeculativeConfig(2))
    run.peeked = []
    run.run()
    assert run.peeked == [(0, (), [], [], ()), (3, (1, 1, 1), [], [], ())]


def test_the_parts_are_what_init_set_and_read_only() -> None:
    """The parts a run is built on are what its ``__init__`` set: a model rebound after
    construction (here code, which has no fingerprint) is read as data, so those merge points
    merge nothing; the readers cannot be changed in place (a swapped reader would go unseen)."""
    rng = RecordingHooks(0)
    run = SIRun(TARGET, AGREES, (), 5, rng, SpeculativeConfig(2))
    with pytest.raises(TypeError):
        run.readers["drafter"] = run.readers["target"]  # type: ignore[index]
    run.drafter = dr.FunctionLM(3, lambda prefix: ONE)
    run.readers = {**run.readers, "drafter": run.drafter.probs}
    run.run()
    assert rng.plain == [False, False]
    for state, _ in rng.hints:
        own, _parts = cast(tuple[Any, ...], state)[1]
        assert isinstance(own, NoMerge)
    plain = RecordingHooks(0)
    SIRun(TARGET, AGREES, (), 5, plain, SpeculativeConfig(2)).run()
    assert plain.plain == [True, True]


@pytest.mark.parametrize(("target", "drafter", "n", "k"), [
    (TARGET, AGREES, 5, 2), (TARGET, DISAGREES, 3, 2),
    (TARGET, dr.TableLM(3, 1, {(1,): ZERO}, default=ONE), 3, 2),
    (dr.TableLM(3, 0, {}, default=TWO, eos=2), dr.TableLM(3, 0, {}, default=TWO, eos=2), 5, 3),
    (dr.TableLM(3, 0, {}, default=TWO, eos=2), dr.TableLM(3, 0, {}, default=ZERO, eos=2), 5, 1)])
def test_block_verification_on_one_hot_models_is_the_token_level_run_whole(
        target: dr.TableLM, drafter: dr.TableLM, n: int, k: int) -> None:
    """On one-hot rows every weight is 0 or 1 and block verification decides as token-level
    rejection sampling does, so `verify_window` must record the same run: tokens, time, every
    trace event (decision kinds included), every counter, EOS."""
    block = SIRun(target, drafter, (), n, dr.Sampler(0), SpeculativeConfig(k, "block", LAT)).run()
    token = SIRun(target, drafter, (), n, dr.Sampler(0), SpeculativeConfig(k, latency=LAT)).run()
    assert block == token
