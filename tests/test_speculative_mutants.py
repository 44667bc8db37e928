"""Tests that kill mutants of dsi_ref/decoders/speculative.py (issue #13, item 7): the config's
errors, whole runs pinned on one-hot models (every step, every counter, every trace event), the
window's boundary, EOS, non-SI, the seams, and the merge state `SIRun.state` offers the exact
engine, including the objects `SIRun._known` names (an alias of a run part is not a copy of it).

Models with one-hot rows make every run deterministic, so a `Run` is compared whole (``==``)."""

from __future__ import annotations

import re
from collections.abc import Hashable
from fractions import Fraction as F
from typing import Any, cast

import pytest

import dsi_ref as dr
from dsi_ref.base.errors import InvalidParameterError
from dsi_ref.base.latency import Latency
from dsi_ref.base.result import Event, Run
from dsi_ref.decoders.common import NoMerge, Recorder
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


def _fresh(cls: type[SIRun] = SIRun) -> SIRun:
    return cls(TARGET, AGREES, (), 4, dr.Sampler(0), SpeculativeConfig(2))


class _Sub(SIRun):
    pass


def test_the_library_state_and_done() -> None:
    run = _fresh()
    assert run.state() == (run.rec.state(run.tokens), (False, (), ()))
    run.done = True
    assert run.state() == (run.rec.state(run.tokens), (True, (), ()))


def test_a_recorder_of_its_own_or_another_latency_offers_no_merge() -> None:
    class OwnRecorder(Recorder):
        __slots__ = ()

    run = _fresh()
    run.rec = OwnRecorder(run.cfg.latency, STATS)
    assert isinstance(run.own_state(), NoMerge)
    run = _fresh()
    run.rec = Recorder(Latency(), STATS)  # equal, but not the config's latency object
    assert isinstance(run.own_state(), NoMerge)
    run = _fresh()
    run.rec = Recorder(run.cfg.latency, STATS)  # the config's latency: merges
    run.stats = run.rec.stats
    assert run.own_state() == (False, (), ())


def test_a_rebound_stats_dict_is_read() -> None:
    a, b = _fresh(), _fresh()
    a.stats, b.stats = {"x": 1}, {"x": 2}
    assert a.state() != b.state() and a.state() == a.state()
    b.stats = {"x": 1}
    assert a.state() == b.state()


def test_a_rebound_part_is_read_as_data() -> None:
    a, b = _fresh(), _fresh()
    b.n = 5
    assert a.state() != b.state() and b.state() == b.state()
    b.n = 4
    assert a.state() == b.state()


def test_the_scratch_is_read_when_run_alone_is_overridden() -> None:
    class OwnRun(SIRun):
        def run(self) -> Run:
            return super().run()

    class OwnIterate(SIRun):
        def iterate(self) -> None:
            super().iterate()

    class OwnStep(SIRun):
        def draft(self) -> None:
            super().draft()

    for cls, read in ((_Sub, False), (OwnStep, False), (OwnRun, True), (OwnIterate, True)):
        a, b = _fresh(cls), _fresh(cls)
        a.start, b.start = 0, 1
        a.drafts, b.drafts = [0], [1]
        assert (a.state() != b.state()) is read, cls.__name__


def test_a_fresh_run_has_empty_scratch() -> None:
    run = _fresh()
    assert (run.tokens, run.done, run.start, run.context, run.drafts, run.draft_rows,
            run.target_rows) == ([], False, 0, (), [], [], ())


def test_a_subclass_attribute_is_read_in_dict_and_slots() -> None:
    class Slotted(SIRun):
        __slots__ = ("extra",)

    a, b = _fresh(_Sub), _fresh(_Sub)
    a.note, b.note = 1, 2  # type: ignore[attr-defined]
    assert a.state() != b.state()
    b.note = 1  # type: ignore[attr-defined]
    assert a.state() == b.state()
    c, d = cast(Any, _fresh(Slotted)), cast(Any, _fresh(Slotted))
    assert c.state() == d.state()
    c.extra, d.extra = 1, 2
    assert c.state() != d.state()
    d.extra = 1
    assert c.state() == d.state()


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
        before = run.state()
        assert before == run.state()
        rule.calls += 1
        assert run.state() != before


@pytest.mark.parametrize("part", ["tokens", "stats", "trace", "first"])
def test_an_alias_of_a_run_container_is_not_a_copy_of_it(part: str) -> None:
    """``_known`` names the run's own containers: an attribute that *is* the token list (which
    grows with the run) differs from one that holds a copy of it (which does not), though both
    read the same now. Merging the two would be unsound."""
    def container(run: SIRun) -> object:
        return {"tokens": run.tokens, "stats": run.rec.stats, "trace": run.rec.trace,
                "first": run.rec.first}[part]

    a, b = _fresh(_Sub), _fresh(_Sub)
    alias, original = container(a), container(b)
    cast(Any, a).mine = alias
    cast(Any, b).mine = original.copy()  # type: ignore[attr-defined]
    assert a.state() == a.state() and b.state() == b.state()
    assert a.state() != b.state()
    c = _fresh(_Sub)
    cast(Any, c).mine = container(c)
    assert a.state() == c.state()


@pytest.mark.parametrize("part", ["self", "rec"])
def test_a_reference_to_the_run_or_its_recorder_still_merges(part: str) -> None:
    """The run and its recorder are not data; ``_known`` names them, so holding one merges."""
    a, b = _fresh(_Sub), _fresh(_Sub)
    cast(Any, a).back = a if part == "self" else a.rec
    cast(Any, b).back = b if part == "self" else b.rec
    assert not isinstance(cast(tuple[Hashable, ...], a.own_state())[2], NoMerge)
    assert a.state() == b.state()


class _AliasOrCopy(SIRun):
    """Correct or not depending on sharing: after its first bonus a fair coin picks whether
    ``seen`` is the token list itself or a copy of it; from then on its bonus token is 0 while
    ``seen`` holds every committed token, 1 otherwise. The coin leaves no trace in the recorder,
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


class _Hints(dr.Sampler):
    """A sampler that records the merge points a run offers (the exact engine's protocol)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.hints: list[tuple[Hashable, bool, tuple[int, ...] | None]] = []

    def merge_point(self, state: Hashable, *, entry: bool = False,
                    committed: tuple[int, ...] | None = None) -> None:
        self.hints.append((state, entry, committed))


def test_a_merge_point_before_each_iteration_with_entry_and_the_committed_tokens() -> None:
    rng = _Hints(0)
    run = SIRun(TARGET, AGREES, (), 5, rng, SpeculativeConfig(2))
    run.run()
    other = SIRun(TARGET, AGREES, (), 5, dr.Sampler(0), SpeculativeConfig(2))
    first = other.state()
    other.iterate()
    assert rng.hints == [(first, True, ()), (other.state(), False, (1, 1, 1))]
    assert first == (Recorder(other.cfg.latency, STATS).state([]), (False, (), ()))


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


def test_a_part_rebound_before_the_run_starts_is_a_part_of_the_run() -> None:
    """`run` takes the parts the run is built on as they stand when it starts: a model set after
    construction (here code, which has no fingerprint) is named, not read, so merging stays on."""
    rng = _Hints(0)
    run = SIRun(TARGET, AGREES, (), 5, rng, SpeculativeConfig(2))
    run.drafter = dr.FunctionLM(3, lambda prefix: ONE)
    run.readers["drafter"] = run.drafter.probs
    run.run()
    assert [cast(tuple[Hashable, ...], hint[0])[1] for hint in rng.hints] == [(False, (), ())] * 2


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
