"""Automatic, sound merge points for decoders written on the step API (issue #13, item 5).

A subclass of `SIRun` or `DSIRun` writes no ``merge_point``: the run offers the engine its state
at every iteration, and that state now includes a fingerprint of whatever the subclass keeps on
``self``. These tests check that the merged law is the law (``merge=False`` enumerates plainly),
that a lossy subclass whose bug hides in its own attributes is judged LOSSY, that a correct one
still merges, and that what cannot be read as data turns merging off instead of being guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Any, cast

import pytest

import dsi_ref as dr
from dsi_ref.audit.exact.state import Layout, States
from dsi_ref.audit.exact.state import NoMerge as NoMergeOfState
from dsi_ref.audit.exact.state import fingerprint as fingerprint_of_state
from dsi_ref.base.exact_hooks import Checkpointing, ExactHooks, StepRun
from dsi_ref.base.models import Number
from dsi_ref.base.result import Event
from dsi_ref.decoders.dsi import DraftForward, DSIConfig, DSIRun, Task
from dsi_ref.decoders.speculative import STATS, SIRun, SpeculativeConfig
from dsi_ref.decoders.verification import RejectionSampling

F = Fraction
T = dr.TableLM.random(3, 1, seed=1, name="target")
D = dr.TableLM.random(3, 1, seed=2, name="drafter")


# -- SIRun subclasses ----------------------------------------------------------------------------


class _ZeroCounting(SIRun):
    """LOSSY: once the drafter has proposed token 0 twice (a count kept on ``self``, which the
    recorder's state does not show: rejected drafts leave no token in the trace), the next bonus
    token is drawn from the drafter."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.zero_drafts = 0

    def draft(self) -> None:
        super().draft()
        self.zero_drafts += self.drafts.count(0)

    def bonus(self) -> None:
        if self.zero_drafts == 2:  # BUG
            self.commit(self.model_rows("drafter", self.context, 1)[0])
        else:
            super().bonus()


class _Tally(Enum):
    LOW = 1
    HIGH = 2


@dataclass
class _Log:
    accepted: list[int]
    last: Fraction | None = None


class _KeepsNotes(SIRun):
    """Correct (its own verifier, rejection sampling), with harmless state of its own: a tally,
    a dataclass log of accepted drafts and an enum."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.log = _Log([])
        self.tally = _Tally.LOW

    def verify(self) -> bool:
        for j in range(len(self.drafts)):
            decision = self.commit(self.target_rows[j], j)
            if not decision.accepted or self.done:
                return False
            self.log.accepted.append(decision.token)
            self.log.last = F(self.target_rows[j][decision.token])
        self.tally = _Tally.HIGH if len(self.log.accepted) > 1 else _Tally.LOW
        return True


class _Opaque:
    """An arbitrary object: its state cannot be read as data."""


class _HoldsAnObject(SIRun):
    """Correct; from the second iteration on it holds an arbitrary object, so it offers no merge
    point there."""

    def iterate(self) -> None:
        super().iterate()
        self.helper = _Opaque()


def _si(cls: type[SIRun], n: int, lookahead: int = 2,
        calls: list[int] | None = None) -> Callable[[Any], tuple[int, ...]]:
    def program(rng: Any) -> tuple[int, ...]:
        if calls is not None:
            calls[0] += 1
        return cls(T, D, (), n, rng, SpeculativeConfig(lookahead)).run().tokens
    return program


def _law_and_runs(program_of: Callable[[list[int]], Callable[[Any], Any]], merge: bool
                  ) -> tuple[dict[Any, Fraction], int]:
    calls = [0]
    law = dr.exact_distribution(program_of(calls), merge=merge)
    return law, calls[0]


def test_a_bug_that_depends_on_a_subclass_counter_is_judged_lossy_with_merging_on() -> None:
    merged, runs = _law_and_runs(lambda c: _si(_ZeroCounting, 3, calls=c), merge=True)
    plain, plain_runs = _law_and_runs(lambda c: _si(_ZeroCounting, 3, calls=c), merge=False)
    assert merged == plain  # merging is sound: the law of plain enumeration
    assert runs < plain_runs  # and it still merges (paths with equal counts)
    report = dr.check_lossless(_si(_ZeroCounting, 3), T, (), 3)
    assert not report and report.tv_distance > 0
    with pytest.raises(AssertionError):
        dr.assert_lossless(_si(_ZeroCounting, 3), T, (), 3)


def test_without_the_subclass_attributes_in_the_state_the_merge_is_wrong(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the teeth of the test above: a checker that reads the fields alone, leaving the counter
    # (all the subclass keeps beside them) out of the merge state, merges paths whose counts
    # differ
    plain = dr.exact_distribution(_si(_ZeroCounting, 3), merge=False)
    extras = States.extras
    left_out: list[int] = []

    def without_the_counter(self: States, run: StepRun, layout: Layout,
                            built: Mapping[str, object], checkpointing: Checkpointing
                            ) -> Hashable:
        kept = extras(self, run, layout, built, checkpointing)
        zeros = cast(_ZeroCounting, run).zero_drafts
        assert kept == (fingerprint_of_state({"zero_drafts": zeros}), ())  # the counter alone
        left_out.append(zeros)
        return ()

    monkeypatch.setattr(States, "extras", without_the_counter)
    assert dr.exact_distribution(_si(_ZeroCounting, 3)) != plain
    assert 2 in left_out  # the count that turns the bug on was among those left out


def test_a_correct_subclass_with_state_of_its_own_is_lossless_and_merges() -> None:
    merged, runs = _law_and_runs(lambda c: _si(_KeepsNotes, 4, calls=c), merge=True)
    plain, plain_runs = _law_and_runs(lambda c: _si(_KeepsNotes, 4, calls=c), merge=False)
    assert merged == plain == dr.target_distribution(T, (), 4)
    assert runs < plain_runs
    dr.assert_lossless(_si(_KeepsNotes, 4), T, (), 4)


def test_an_attribute_that_is_not_data_turns_merging_off_at_that_point() -> None:
    merged, runs = _law_and_runs(lambda c: _si(_HoldsAnObject, 4, calls=c), merge=True)
    plain, plain_runs = _law_and_runs(lambda c: _si(_HoldsAnObject, 4, calls=c), merge=False)
    assert merged == plain == dr.target_distribution(T, (), 4)
    # only the first iteration (before the object exists) can merge, and it is the entry
    _, library_runs = _law_and_runs(lambda c: _si(SIRun, 4, calls=c), merge=True)
    assert library_runs < runs <= plain_runs


def _fresh(cls: type[SIRun] = SIRun) -> SIRun:
    return cls(T, D, (), 4, dr.Sampler(0), SpeculativeConfig(2))


def _states(*runs: SIRun) -> list[Hashable]:
    """The merge states of ``runs`` now, as the exact checker reads them (one table)."""
    states = States()
    return [states.merge_state(run, run.checkpointing()) for run in runs]


def test_the_library_run_offers_its_fields_alone() -> None:
    run = _fresh()
    states = States()
    checkpointing = run.checkpointing()
    assert checkpointing.own and checkpointing.resumable
    assert states.plain(run, states.layout(SIRun), run.built_on(), checkpointing)
    assert states.merge_state(run, checkpointing) == (
        (), False, F(0), (("drafter", True), ("target", True)), 0,
        tuple(dict.fromkeys(STATS, 0).items()), 0, (), (), None, False,
        False)


def test_the_per_iteration_scratch_is_reset_at_the_merge_point_unless_iterate_is_overridden(
        ) -> None:
    class OwnLoop(SIRun):
        def iterate(self) -> None:
            super().iterate()

    class Offer(dr.Sampler, ExactHooks):
        """Records the merge states a run offers (the exact checker's reader)."""

        def __init__(self) -> None:
            super().__init__(0)
            self.states = States()
            self.offered: list[Hashable] = []

        def merge_point(self, state: Hashable, **kwargs: Any) -> None:
            raise AssertionError("not a free-form decoder")

        def resume_point(self, snapshot: Callable[[], object]) -> None:
            raise AssertionError("not resuming")

        def enter(self, run: StepRun, checkpointing: Checkpointing) -> None:
            pass

        def merge(self, run: StepRun) -> None:
            self.offered.append(self.states.merge_state(run, run.checkpointing()))

        def pause(self, run: StepRun) -> None:
            raise AssertionError("not resuming")

    for cls, read in ((SIRun, False), (OwnLoop, True)):
        rng = Offer()
        a, b = (cls(T, D, (), 4, rng, SpeculativeConfig(2)) for _ in range(2))
        a.drafts, b.drafts = [0], [1]
        a.merge_point()
        b.merge_point()
        assert (rng.offered[0] != rng.offered[1]) is read, cls.__name__


def test_a_rebound_part_is_read_as_data_and_a_rebound_model_stops_merging() -> None:
    a, b = _fresh(), _fresh()
    b.lookahead = 1  # plain data: read
    assert _states(a) != _states(b) and _states(b) == _states(b)
    b.drafter = T  # the run's own target: named as such
    assert _states(b) == _states(b) and _states(b) != _states(a)
    b.drafter = dr.TableLM.random(3, 1, seed=5)  # a table model: a dataclass of plain data
    assert _states(b) == _states(b)
    b.drafter = dr.FunctionLM(3, lambda prefix: (F(1, 3),) * 3)  # code: not data
    own = cast(tuple[Any, ...], _states(b)[0])[1][0]
    assert isinstance(own, NoMergeOfState) and _states(b) != _states(b)
    c = _fresh()
    with pytest.raises(TypeError):  # the readers are read only: a swap in place is impossible
        c.readers["drafter"] = c.readers["target"]  # type: ignore[index]
    c.readers = {"target": c.readers["target"], "drafter": c.readers["target"]}  # rebound
    assert _states(c) != _states(c)


def test_a_subclass_attribute_that_refers_to_a_run_part_is_named_not_read() -> None:
    class Aliases(SIRun):
        pass

    a, b = _fresh(Aliases), _fresh(Aliases)
    a.model, b.model = a.target, b.drafter  # type: ignore[attr-defined]
    a.mine, b.mine = a.tokens, list(b.tokens)  # type: ignore[attr-defined]  # the run's token list itself vs a copy
    assert _states(a) == _states(a) and _states(b) == _states(b) and _states(a) != _states(b)


def test_a_stateful_rule_has_its_attributes_read() -> None:
    class CountingRule(RejectionSampling):
        def __init__(self) -> None:
            self.calls = 0

    rule = CountingRule()
    run = SIRun(T, D, (), 4, dr.Sampler(0), SpeculativeConfig(2, verify=rule))
    before = _states(run)[0]
    rule.calls += 1
    assert _states(run)[0] != before


# -- the fingerprint -----------------------------------------------------------------------------


#: The reader of plain data: the exact checker's for step-wise runs (`dsi_ref.audit.exact.state`),
#: with its `NoMerge` class.
FINGERPRINTS = [pytest.param((fingerprint_of_state, NoMergeOfState), id="audit.exact.state")]


@pytest.mark.parametrize("reader", FINGERPRINTS)
def test_fingerprints_tell_apart_what_code_can_tell_apart(
        reader: tuple[Callable[[object], Hashable], type]) -> None:
    fingerprint = reader[0]
    same = [(1, 1), ([1], [1]), ({"a": (1, F(1, 2))}, {"a": (1, F(1, 2))}), (_Tally.LOW,
            _Tally.LOW), (_Log([1]), _Log([1])), (frozenset({1}), frozenset({1}))]
    for x, y in same:
        assert fingerprint(x) == fingerprint(y), (x, y)
        hash(fingerprint(x))
    different = [(1, True), (1, 1.0), (1, F(1)), (0.0, -0.0), ((1,), [1]), ({1: 2, 3: 4},
                 {3: 4, 1: 2}), (_Tally.LOW, 1), (_Log([1]), _Log([1], F(0))), ("1", 1),
                 ((1, 2), (2, 1))]
    for x, y in different:
        assert fingerprint(x) != fingerprint(y), (x, y)
    shared = [0]
    assert fingerprint([shared, shared]) != fingerprint([[0], [0]])  # one list, or two
    cycle: list[Any] = [1]
    cycle.append(cycle)
    assert fingerprint(cycle) == fingerprint(cycle)


@pytest.mark.parametrize("reader", FINGERPRINTS)
def test_what_is_not_data_has_a_fingerprint_equal_to_nothing(
        reader: tuple[Callable[[object], Hashable], type]) -> None:
    fingerprint, no_merge = reader
    for value in (_Opaque(), [1, _Opaque()], {"f": print}, int, (lambda: 0)):
        a, b = fingerprint(value), fingerprint(value)
        assert isinstance(a, no_merge) and a != b and a == a


# -- DSIRun subclasses ---------------------------------------------------------------------------


class _DSIZeroCounting(DSIRun):
    """LOSSY: after the drafter has delivered token 0 twice (a count on ``self``), the target
    rows are read from the drafter."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.zeros = 0

    def finish_draft(self, d: DraftForward) -> None:
        position = len(self.committed) + len(self.drafts)
        super().finish_draft(d)
        self.zeros += self.spec()[position:position + 1] == (0,)

    def target_rows(self, task: Task) -> dict[int, tuple[Number, ...]]:
        rows = super().target_rows(task)
        if self.zeros >= 2:  # BUG
            return {pos: D.probs(self.prompt + task.context[:pos]) for pos in rows}
        return rows


class _DSICounted(DSIRun):
    """Correct, with a counter of its own."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.finished = 0

    def finish_task(self, task: Task) -> None:
        self.finished += 1
        super().finish_task(task)


def _dsi(cls: type[DSIRun], n: int, record: bool,
         calls: list[int] | None = None) -> Callable[[Any], tuple[int, ...]]:
    def program(rng: Any) -> tuple[int, ...]:
        if calls is not None:
            calls[0] += 1
        return cls(T, D, (), n, rng, DSIConfig(2, 2, record=record)).run().tokens
    return program


@pytest.mark.parametrize("record", [True, False])
def test_a_dsi_subclass_counter_is_in_the_state(record: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    merged, runs = _law_and_runs(lambda c: _dsi(_DSIZeroCounting, 3, record, c), merge=True)
    plain, plain_runs = _law_and_runs(lambda c: _dsi(_DSIZeroCounting, 3, record, c),
                                      merge=False)
    assert merged == plain and runs < plain_runs
    assert not dr.check_lossless(_dsi(_DSIZeroCounting, 3, record), T, (), 3)
    # the teeth: a checker that reads the fields alone, leaving the counter (all the subclass
    # keeps beside them) out of the merge state, merges paths whose counts differ
    extras = States.extras
    left_out: list[int] = []

    def without_the_counter(self: States, run: StepRun, layout: Layout,
                            built: Mapping[str, object], checkpointing: Checkpointing
                            ) -> Hashable:
        kept = extras(self, run, layout, built, checkpointing)
        zeros = cast(_DSIZeroCounting, run).zeros
        assert kept == (fingerprint_of_state({"zeros": zeros}), ())  # the counter, nothing else
        left_out.append(zeros)
        return ()

    monkeypatch.setattr(States, "extras", without_the_counter)
    assert dr.exact_distribution(_dsi(_DSIZeroCounting, 3, record)) != plain
    assert 2 in left_out  # the counter that turns the bug on was among those left out


@pytest.mark.parametrize("record", [True, False])
def test_a_correct_dsi_subclass_with_a_counter_is_lossless_and_merges(record: bool) -> None:
    merged, runs = _law_and_runs(lambda c: _dsi(_DSICounted, 3, record, c), merge=True)
    plain, plain_runs = _law_and_runs(lambda c: _dsi(_DSICounted, 3, record, c), merge=False)
    assert merged == plain == dr.target_distribution(T, (), 3)
    assert runs < plain_runs


def test_a_lean_dsi_subclass_keeps_the_history_a_lean_dsi_run_drops() -> None:
    class Same(DSIRun):
        def dispatch(self) -> None:
            super().dispatch()

    config = DSIConfig(2, 2, record=False)
    for cls, kept in ((DSIRun, False), (Same, True)):
        a, b = (cls(T, D, (), 3, dr.Sampler(0), config) for _ in range(2))
        assert a.checkpointing().history is kept
        states = States()  # the checker's reader, one table for both runs
        assert (states.merge_state(a, a.checkpointing())
                == states.merge_state(b, b.checkpointing()))
        b.stats["drafts"] = 5  # the history differs, the future fields do not
        b.trace.append(Event("drafter", "draft", F(0), F(1), (0,)))
        assert (states.merge_state(a, a.checkpointing())
                != states.merge_state(b, b.checkpointing())) is kept, cls.__name__
