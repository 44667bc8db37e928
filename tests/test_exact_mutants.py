"""Tests that pin `dsi_ref.audit.exact` exactly, so that mutants of it fail (issue #13, item 7;
docs/mutation-testing.md).

Tiny hand-built programs whose laws, run counts and messages are derived by hand: every draw kind
(categorical and bernoulli, keyed and not, zero weights, ``p`` = 0, 1 and between, keyed
intervals split by later draws), ``choose`` under every scheduler policy, witnesses, merging (how
many times the program runs), the path limits at their boundaries, the three detectors of
randomness outside ``rng`` with their full messages, the progress bar, and the helpers
(`readable`, `total_variation`, `as_outcome`, `exact_row`, `_dead`...).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator
from fractions import Fraction as F
from typing import Any, ClassVar, cast

import numpy as np
import pytest

from dsi_ref.audit import exact as ex
from dsi_ref.audit.exact import law as exact_law_module
from dsi_ref.audit.exact.guard import Guard, guard_targets
from dsi_ref.audit.exact.replay import dead_key
from dsi_ref.base.errors import (
    InvalidAuditError,
    InvalidParameterError,
    NondeterministicProgramError,
    PathLimitError,
    ScheduleDependenceError,
)
from dsi_ref.base.randomness import Randomness, merge_point

Program = Callable[[Any], Any]


@pytest.fixture(autouse=True)
def fresh_guard_wrappers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test makes the guard's wrappers afresh (they are cached per process), so that the
    code making them runs under every test, whatever ran before in the process."""
    monkeypatch.setattr(Guard, "_wrappers", {})


def counted(program: Program) -> tuple[Program, list[int]]:
    """``program`` and a list that grows by one per call (how many runs the engine made)."""
    calls: list[int] = []

    def wrapped(rng: Randomness) -> Any:
        calls.append(1)
        return program(rng)
    return wrapped, calls


def raises_exactly(error: type[Exception], message: str) -> Any:
    """``pytest.raises`` of ``error`` whose whole message is ``message``."""
    return pytest.raises(error, match="^" + re.escape(message) + "$")


# ---------------------------------------------------------------------------------------------
# readable, total_variation, WitnessStep, Witness


def test_readable_prints_small_fractions_and_ints_as_is_and_the_rest_as_short_decimals() -> None:
    assert ex.readable(F(3, 8)) == "3/8"
    assert ex.readable(F(1, 10_000)) == "1/10000"  # the largest denominator printed as is
    assert ex.readable(F(1, 10_001)) == "~9.999e-05"
    assert ex.readable(F(1, 3) + F(1, 10**20)) == "~0.333333"
    assert ex.readable(7) == "7"
    assert ex.readable(F(0)) == "0"
    assert ex.readable(0.25) == "~0.25"
    assert ex.readable(1 / 3) == "~0.333333"


def test_total_variation_is_half_the_l1_distance_exactly() -> None:
    half = {0: F(1, 2), 1: F(1, 2)}
    assert ex.total_variation(half, {0: F(1)}) == F(1, 2)
    assert ex.total_variation({0: F(1)}, {1: F(1)}) == F(1)  # disjoint supports
    assert ex.total_variation({1: F(1, 4), 2: F(3, 4)}, {1: F(1, 3), 2: F(2, 3)}) == F(1, 12)
    same = ex.total_variation(half, dict(half))
    assert same == 0 and type(same) is F
    empty = ex.total_variation({}, {})
    assert empty == 0 and type(empty) is F


@pytest.mark.parametrize("side", ["p", "q"])
def test_total_variation_refuses_a_non_law_naming_the_side(side: str) -> None:
    law = {0: F(1)}
    args = ([1], law) if side == "p" else (law, [1])
    with raises_exactly(InvalidAuditError,
                        f"total_variation's {side} must be a law (a mapping outcome -> "
                        "probability, e.g. from exact_distribution), got [1]"):
        ex.total_variation(*args)


def test_witness_step_str_names_kind_key_choice_and_probability() -> None:
    assert str(ex.WitnessStep("choose", None, "'x'", None)) == "choose -> 'x' (scheduler)"
    assert str(ex.WitnessStep("categorical", ("d", 1), "2", F(1, 3))) \
        == "categorical ('d', 1) -> 2 (p=1/3)"
    assert str(ex.WitnessStep("bernoulli", "k", "False", F(0))) == "bernoulli 'k' -> False (p=0)"


def test_witness_str_and_discrepancy() -> None:
    steps = (ex.WitnessStep("categorical", None, "1", F(1, 2)),
             ex.WitnessStep("choose", "c", "'a'", None))
    w = ex.Witness(path=steps, options=("'x'", "'y'"),
                   laws=({"a": F(1, 4), "b": F(3, 4)}, {"a": F(1, 2), "c": F(1, 2)}),
                   path_probability=F(1, 2))
    assert w.discrepancy == ("b", F(3, 4), F(0))
    assert str(w) == ("schedule-dependent: after the path (probability 1/2)\n"
                      "    1. categorical -> 1 (p=1/2)\n"
                      "    2. choose 'c' -> 'a' (scheduler)\n"
                      "  the scheduler's options 'x' and 'y' lead to different laws;\n"
                      "  e.g. P('b') = 3/4 vs 0 (TV = 3/4)")
    start = ex.Witness(path=(), options=("A", "B"), laws=({1: F(1)}, {2: F(1)}),
                       path_probability=F(1))
    assert start.discrepancy == (2, F(0), F(1))  # a tie: the larger repr
    assert str(start) == ("schedule-dependent: after the path (probability 1)\n"
                          "    (start)\n"
                          "  the scheduler's options A and B lead to different laws;\n"
                          "  e.g. P(2) = 0 vs 1 (TV = 1)")


# ---------------------------------------------------------------------------------------------
# as_outcome, check_program


class _Tokens:
    def __init__(self, tokens: list[int]) -> None:
        self.tokens = tokens


class _FakeTensor:
    """Looks like a torch tensor to `as_outcome` (its module and ``tolist``), unhashable."""

    __module__ = "torch.fake"
    __hash__ = None  # type: ignore[assignment]

    def tolist(self) -> list[int]:
        return [4, 5]


class _NumpyNamedHashable:
    """A hashable value from a numpy module without ``tolist``: kept as is."""

    __module__ = "numpy.fake"


def test_as_outcome_converts_runs_sequences_arrays_and_tensors() -> None:
    usual = (1, 0)
    assert ex.as_outcome(usual) is usual  # the usual outcome is returned as is
    assert ex.as_outcome([1, 0]) == (1, 0) and type(ex.as_outcome([1, 0])) is tuple
    assert ex.as_outcome((1, [2, 3])) == (1, (2, 3))
    assert ex.as_outcome((True, 1)) == (True, 1)
    assert ex.as_outcome(_Tokens([3, 1])) == (3, 1)
    assert ex.as_outcome(np.array([[1, 0], [2, 2]])) == ((1, 0), (2, 2))
    scalar = ex.as_outcome(np.int64(3))
    assert scalar == 3 and type(scalar) is int
    assert ex.as_outcome(_FakeTensor()) == (4, 5)
    kept = _NumpyNamedHashable()
    assert ex.as_outcome(kept) is kept
    assert ex.as_outcome("ab") == "ab"
    assert ex.as_outcome(None) is None


def test_as_outcome_refuses_unhashable_values_naming_the_source() -> None:
    with raises_exactly(InvalidAuditError,
                        "the program returned an unhashable value {} (dict); return a tuple of "
                        "tokens (e.g. run.tokens), a list or an array") as caught:
        ex.as_outcome({})
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    with raises_exactly(InvalidAuditError,
                        "sample 3 was an unhashable value {1} (set); return a tuple of tokens "
                        "(e.g. run.tokens), a list or an array"):
        ex.as_outcome([0, {1}], source="sample 3 was")  # nested: the source is passed down


def test_check_program_refuses_non_callables() -> None:
    ex.check_program(len)
    with raises_exactly(InvalidAuditError,
                        "the program must be a callable rng -> outcome (e.g. lambda rng: "
                        "decoder(..., rng).tokens), got 3"):
        ex.check_program(3)
    with raises_exactly(InvalidAuditError,
                        "the program must be a callable rng -> outcome (e.g. lambda rng: "
                        "decoder(..., rng).tokens), got 3"):
        ex.exact_law(3)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# exact_row, exact_probabilities, _exact_probability


def test_exact_row_reads_every_kind_of_weight_exactly() -> None:
    assert ex.exact_row([F(1, 4), F(3, 4)]) == ([F(1, 4), F(3, 4)], False)
    assert ex.exact_row([F(1), F(3)]) == ([F(1, 4), F(3, 4)], False)  # normalised
    assert ex.exact_row([F(0), F(2)]) == ([F(0), F(1)], False)
    assert ex.exact_row([1, 3]) == ([F(1, 4), F(3, 4)], False)
    numpy_ints: list[Any] = [np.int64(1), np.int64(1)]
    assert ex.exact_row(numpy_ints) == ([F(1, 2), F(1, 2)], False)
    assert ex.exact_row([F(1, 3), 1]) == ([F(1, 4), F(3, 4)], False)  # a Fraction in a mixed row
    assert ex.exact_row([0.25, 0.75]) == ([F(1, 4), F(3, 4)], True)
    assert ex.exact_row([1.0, 3.0]) == ([F(1, 4), F(3, 4)], True)
    assert ex.exact_row([F(1, 2), 0.5]) == ([F(1, 2), F(1, 2)], True)
    assert ex.exact_row([1 / 3, 1 / 3, 1 / 3]) == ([F(1, 3)] * 3, True)  # over their exact sum
    assert ex.exact_probabilities([0.25, 0.75]) == [F(1, 4), F(3, 4)]


def test_a_row_of_fractions_is_read_exactly_however_large_or_small() -> None:
    """Not checked again as floats: their float sum would overflow, or be 0."""
    huge, tiny = F(10**400), F(1, 10**400)
    assert ex.exact_row([huge, 3 * huge]) == ([F(1, 4), F(3, 4)], False)
    assert ex.exact_row([F(0), huge]) == ([F(0), F(1)], False)
    assert ex.exact_row([F(1, 2), huge]) == ([F(1, 2) / (huge + F(1, 2)), huge / (huge + F(1, 2))],
                                             False)
    assert ex.exact_row([tiny, tiny]) == ([F(1, 2), F(1, 2)], False)
    assert ex.exact_row([tiny, 3 * tiny]) == ([F(1, 4), F(3, 4)], False)
    assert ex.exact_probabilities((F(1), 3)) == [F(1, 4), F(3, 4)]


@pytest.mark.parametrize("row", [[F(0), F(0)], [0, 0], [F(1), -1], [float("nan"), 1.0]])
def test_exact_row_refuses_rows_as_sampler_does(row: list[Any]) -> None:
    message = (f"categorical weights must be finite numbers >= 0, got {row!r}"
               if any(not (w >= 0) for w in row)
               else f"categorical weights must have a positive sum, got {row!r}")
    with pytest.raises(InvalidParameterError) as caught:
        ex.exact_row(row)
    assert str(caught.value) == message


def test_exact_probability_of_a_bernoulli() -> None:
    half = F(1, 2)
    assert ex.exact_probability(half) == (half, False)
    one = ex.exact_probability(1)
    assert one == (F(1), False) and type(one[0]) is F
    assert ex.exact_probability(0.25) == (F(1, 4), True)
    assert ex.exact_probability(np.float64(0.5)) == (F(1, 2), True)
    with raises_exactly(InvalidParameterError, "bernoulli probability must lie in [0, 1], got 1.5"):
        ex.exact_probability(1.5)


# ---------------------------------------------------------------------------------------------
# Laws of tiny programs: categorical


def test_unkeyed_categorical_draws_are_independent_and_zero_weights_are_never_explored() -> None:
    def two(rng: Randomness) -> tuple[int, int]:
        return rng.categorical([F(1), F(3)]), rng.categorical((0, 1, 1))
    program, calls = counted(two)
    result = ex.exact_law(program)
    assert result.law == {(0, 1): F(1, 8), (0, 2): F(1, 8), (1, 1): F(3, 8), (1, 2): F(3, 8)}
    assert (result.inexact, result.longest_path) == (False, 2)
    assert len(calls) == 4  # one run per path: the zero-weight outcome 0 is no branch


def test_keyed_categorical_draws_share_one_uniform_split_into_intervals() -> None:
    """Bins of the first draw: [0, 1/4), [1/4, 1/2), [1/2, 1); of the second: [0, 1/2),
    [1/2, 1); of the third [0, 1/8), [1/8, 1). Given the first's bin, the second is decided, and
    the third splits [0, 1/4) into 1/8 and 1/8 of its width 1/4."""
    def three(rng: Randomness) -> tuple[int, int, int]:
        a = rng.categorical([F(1), F(1), F(2)], key="k")
        b = rng.categorical([F(1), F(1)], key="k")
        c = rng.categorical([F(1, 8), F(7, 8)], key="k")
        return a, b, c
    program, calls = counted(three)
    result = ex.exact_law(program)
    assert result.law == {(0, 0, 0): F(1, 8), (0, 0, 1): F(1, 8), (1, 0, 1): F(1, 4),
                          (2, 1, 1): F(1, 2)}
    assert len(calls) == 4  # one run per path: empty sub-intervals are no branch
    assert result.longest_path == 3

    independent, calls = counted(three)
    assert ex.exact_distribution(independent, keyed=False) == {
        (a, b, c): pa * pb * pc
        for a, pa in enumerate([F(1, 4), F(1, 4), F(1, 2)])
        for b, pb in enumerate([F(1, 2), F(1, 2)])
        for c, pc in enumerate([F(1, 8), F(7, 8)])}
    assert len(calls) == 12
    assert ex.exact_distribution(three) == result.law  # keyed by default


def test_keyed_bernoulli_and_categorical_split_the_same_uniform() -> None:
    """u's bins: categorical [0, 1/4), [1/4, 1/2), [1/2, 1); bernoulli(3/8) True on [0, 3/8);
    then categorical (1/2, 1/2) on [0, 1/2), [1/2, 1)."""
    def mixed(rng: Randomness) -> tuple[int, bool, int]:
        a = rng.categorical([F(1), F(1), F(2)], key="u")
        b = rng.bernoulli(F(3, 8), key="u")
        c = rng.categorical([F(1), F(1)], key="u")
        return a, b, c
    program, calls = counted(mixed)
    assert ex.exact_distribution(program) == {
        (0, True, 0): F(1, 4), (1, True, 0): F(1, 8), (1, False, 0): F(1, 8),
        (2, False, 1): F(1, 2)}
    assert len(calls) == 4


def test_keyed_bernoulli_alone_and_repeated() -> None:
    """u < 1/3, u < 1/2, u < 1/4 in turn: the events nest."""
    def three(rng: Randomness) -> tuple[bool, bool, bool]:
        return (rng.bernoulli(F(1, 3), key="b"), rng.bernoulli(F(1, 2), key="b"),
                rng.bernoulli(F(1, 4), key="b"))
    program, calls = counted(three)
    assert ex.exact_distribution(program) == {
        (True, True, True): F(1, 4), (True, True, False): F(1, 12),
        (False, True, False): F(1, 6), (False, False, False): F(1, 2)}
    assert len(calls) == 4
    assert ex.exact_distribution(three, keyed=False) == {
        (a, b, c): (F(1, 3) if a else F(2, 3)) * F(1, 2) * (F(1, 4) if c else F(3, 4))
        for a in (True, False) for b in (True, False) for c in (True, False)}


@pytest.mark.parametrize("keyed", [True, False])
@pytest.mark.parametrize(("p", "law", "runs"), [
    (F(0), {False: F(1)}, 1), (F(1), {True: F(1)}, 1), (0, {False: F(1)}, 1),
    (F(1, 3), {True: F(1, 3), False: F(2, 3)}, 2)])
def test_bernoulli_at_zero_one_and_between(keyed: bool, p: Any, law: dict[bool, F],
                                           runs: int) -> None:
    """A certain outcome is no branch: one run; keyed or not, with or without a key."""
    for key in (None, "b"):
        def coin(rng: Randomness, k: str | None = key) -> bool:
            return rng.bernoulli(p, key=k)
        program, calls = counted(coin)
        result = ex.exact_law(program, keyed=keyed)
        assert result.law == law and len(calls) == runs
        assert result.longest_path == 1  # a certain outcome is still a choice


def test_a_certain_draw_is_still_a_choice_on_the_path() -> None:
    """p = 0 or 1 and a one-outcome row make one choice with one option (the longest path
    counts it); a one-option ``choose`` makes none."""
    assert ex.exact_law(lambda rng: rng.bernoulli(F(1))).longest_path == 1
    assert ex.exact_law(lambda rng: rng.bernoulli(F(0), key="b")).longest_path == 1
    assert ex.exact_law(lambda rng: rng.categorical([0, 5])).longest_path == 1
    single = ex.exact_law(lambda rng: rng.choose(["only"]))
    assert single.law == {"only": F(1)} and single.longest_path == 0


def test_float_weights_and_probabilities_make_the_law_inexact() -> None:
    floats = ex.exact_law(lambda rng: rng.categorical([0.25, 0.75]))
    assert floats.law == {0: F(1, 4), 1: F(3, 4)} and floats.inexact is True
    keyed = ex.exact_law(lambda rng: rng.categorical((0.5, 0.5), key="k"))
    assert keyed.law == {0: F(1, 2), 1: F(1, 2)} and keyed.inexact is True
    coin = ex.exact_law(lambda rng: rng.bernoulli(0.25))
    assert coin.law == {True: F(1, 4), False: F(3, 4)} and coin.inexact is True
    assert ex.exact_law(lambda rng: rng.bernoulli(F(1, 4))).inexact is False
    assert ex.exact_law(lambda rng: rng.categorical((1, 3))).inexact is False


def test_a_tuple_row_drawn_again_gives_the_same_law_as_a_list() -> None:
    row = (F(1), F(2))

    def twice(rng: Randomness) -> tuple[int, int]:
        return rng.categorical(row), rng.categorical(row)
    expected = {(a, b): pa * pb for a, pa in enumerate([F(1, 3), F(2, 3)])
                for b, pb in enumerate([F(1, 3), F(2, 3)])}
    assert ex.exact_distribution(twice) == expected
    assert ex.exact_distribution(lambda rng: (rng.categorical(list(row)),
                                              rng.categorical(list(row)))) == expected


def test_a_list_row_is_read_afresh_at_every_draw() -> None:
    """The same list, changed between two draws of one run: the second draw reads the change
    (only tuples, which cannot change, are remembered by identity)."""
    def program(rng: Randomness) -> tuple[int, int]:
        row = [F(1), F(1)]
        a = rng.categorical(row)
        row[0] = F(0)
        return a, rng.categorical(row)
    assert ex.exact_distribution(program) == {(0, 1): F(1, 2), (1, 1): F(1, 2)}


def test_outcomes_are_converted_and_merged_across_paths() -> None:
    def program(rng: Randomness) -> Any:
        return [rng.categorical([1, 1]) + rng.categorical([1, 1])]
    assert ex.exact_distribution(program) == {(0,): F(1, 4), (1,): F(1, 2), (2,): F(1, 4)}


# ---------------------------------------------------------------------------------------------
# choose, schedulers, witnesses


def _dependent(rng: Randomness) -> str:
    """Schedule-dependent after ``categorical -> 1``: 'x' and 'y' lead to different laws."""
    if rng.categorical([F(1), F(1)]):
        return str(rng.choose(["x", "y"]))
    return "z"


def test_a_schedule_dependent_choose_raises_the_witness() -> None:
    with pytest.raises(ScheduleDependenceError) as caught:
        ex.exact_distribution(_dependent)
    witness = caught.value.witness
    assert witness.path == (ex.WitnessStep("categorical", None, "1", F(1, 2)),)
    assert witness.options == ("'x'", "'y'")
    assert witness.laws == ({"x": F(1)}, {"y": F(1)})
    assert witness.path_probability == F(1, 2)
    assert str(caught.value) == str(witness) == (
        "schedule-dependent: after the path (probability 1/2)\n"
        "    1. categorical -> 1 (p=1/2)\n"
        "  the scheduler's options 'x' and 'y' lead to different laws;\n"
        "  e.g. P('y') = 0 vs 1 (TV = 1)")


def test_the_witness_names_the_first_option_that_differs_and_the_path_probability() -> None:
    """Options 'x' and 'y' agree, 'z' differs; the path has probability 1/2 * 1/3."""
    def program(rng: Randomness) -> str:
        rng.categorical([1, 1], key="a")
        b = rng.categorical([F(1), F(2)], key="b")
        pick = rng.choose(["x", "y", "z"], key="c")
        return "zz" if pick == "z" else str(b)
    with pytest.raises(ScheduleDependenceError) as caught:
        ex.exact_distribution(program)
    w = caught.value.witness
    assert w.path == (ex.WitnessStep("categorical", "a", "0", F(1, 2)),
                      ex.WitnessStep("categorical", "b", "0", F(1, 3)))
    assert w.options == ("'x'", "'z'")
    assert w.laws == ({"0": F(1)}, {"zz": F(1)})
    assert w.path_probability == F(1, 6)


def test_choose_labels_are_the_options_label_attribute_or_repr() -> None:
    class Labelled:
        def __init__(self, label: str | None) -> None:
            self.label = label

        def __repr__(self) -> str:
            return f"Labelled({self.label!r})"
    a, b, c = Labelled("A"), Labelled(None), Labelled("C")
    for options, labels in [((a, c), ("A", "C")), ((b, a), ("Labelled(None)", "A")),
                            ((1, 2), ("1", "2"))]:
        def pick(rng: Randomness, o: tuple[object, ...] = options) -> int:
            return id(rng.choose(o))
        with pytest.raises(ScheduleDependenceError) as caught:
            ex.exact_distribution(pick)
        assert caught.value.witness.options == labels


def _nested(rng: Randomness) -> str:
    """Two dependences: the inner one (path of one step) is found first, the outer one (empty
    path) last."""
    if rng.choose(["a", "b"], key="outer") == "a":
        return str(rng.choose(["c", "d"], key="inner"))
    return "e"


def test_witness_first_raises_at_the_first_found_and_shortest_at_the_shortest() -> None:
    with pytest.raises(ScheduleDependenceError) as first:
        ex.exact_distribution(_nested)
    assert first.value.witness.path == (ex.WitnessStep("choose", "outer", "'a'", None),)
    assert first.value.witness.options == ("'c'", "'d'")
    with pytest.raises(ScheduleDependenceError) as shortest:
        ex.exact_distribution(_nested, witness="shortest")
    assert shortest.value.witness.path == ()
    assert shortest.value.witness.options == ("'a'", "'b'")
    assert shortest.value.witness.laws == ({"c": F(1)}, {"e": F(1)})
    with pytest.raises(ScheduleDependenceError) as law_of_shortest:
        ex.exact_law(_nested, witness="shortest")
    assert law_of_shortest.value.witness.path == ()


def test_witness_shortest_keeps_one_witness_per_choice_and_explores_every_option() -> None:
    """Three options that all differ: one witness for the node (options 0 and 1), and the law
    of option 0 goes on."""
    program, calls = counted(lambda rng: rng.choose(["x", "y", "z"]))
    with pytest.raises(ScheduleDependenceError) as caught:
        ex.exact_distribution(program, witness="shortest")
    assert caught.value.witness.options == ("'x'", "'y'")
    assert len(calls) == 3


def test_a_fixed_scheduler_resolves_choose_without_quantifying() -> None:
    seen: list[tuple[Any, ...]] = []

    def policy(options: Any, key: Any) -> int:
        seen.append((tuple(options), key))
        return 1
    program, calls = counted(lambda rng: rng.choose(["x", "y", "z"], key="k"))
    assert ex.exact_distribution(program, scheduler="first") == {"x": F(1)}
    assert ex.exact_distribution(program, scheduler="last") == {"z": F(1)}
    last = ex.exact_law(program, scheduler="last")
    assert last.law == {"z": F(1)} and last.longest_path == 0
    assert ex.exact_distribution(program, scheduler=policy) == {"y": F(1)}
    assert seen == [(("x", "y", "z"), "k")]
    assert len(calls) == 4
    assert ex.exact_distribution(_dependent, scheduler="last") == {"z": F(1, 2), "y": F(1, 2)}
    assert ex.exact_expectation(lambda rng: rng.choose([1, 2, 4]), scheduler="last") == 4
    assert ex.exact_distribution(lambda rng: rng.choose(["one"]), scheduler=policy) \
        == {"one": F(1)}
    assert len(seen) == 1  # a single option asks no scheduler


@pytest.mark.parametrize("index", [3, -1, "1"])
def test_a_policy_index_out_of_range_is_refused(index: Any) -> None:
    with raises_exactly(InvalidParameterError,
                        f"scheduler policy returned index {index!r} for 3 options (an int in "
                        "[0, 3) is needed)"):
        ex.exact_distribution(lambda rng: rng.choose("abc"), scheduler=lambda o, k: index)


def test_an_empty_choose_is_refused() -> None:
    with raises_exactly(InvalidParameterError, "choose() needs at least one option"):
        ex.exact_distribution(lambda rng: rng.choose([]))


# ---------------------------------------------------------------------------------------------
# merge points


def _walk(tail: list[int], keys: bool = False) -> Program:
    """Three fair steps of 0 or 1, summed, with a merge point on (step, sum) before each.

    Without merging: 8 runs. With merging (depth first; a merge point counts on a fresh part of
    a run only): runs (), (0,0,1), (0,1), (0,1,1), (1,) [stops at (2, 1), known], (1,1),
    (1,1,1): 7 runs, 6 of which reach the tail."""
    def walk(rng: Randomness) -> int:
        s = 0
        for t in range(3):
            merge_point(rng, (t, s), entry=t == 0)
            s += rng.categorical([1, 1], key=("step", t) if keys else None)
        tail.append(s)
        return s
    return walk


BINOMIAL = {0: F(1, 8), 1: F(3, 8), 2: F(3, 8), 3: F(1, 8)}


def test_merging_gives_the_same_law_with_fewer_runs() -> None:
    tail: list[int] = []
    merged, calls = counted(_walk(tail))
    assert ex.exact_distribution(merged) == BINOMIAL
    assert (len(calls), len(tail)) == (7, 6)
    tail.clear()
    plain, calls = counted(_walk(tail))
    assert ex.exact_distribution(plain, merge=False) == BINOMIAL
    assert (len(calls), len(tail)) == (8, 8)
    tail.clear()
    law_merged, calls = counted(_walk(tail))
    assert ex.exact_law(law_merged).law == BINOMIAL and len(calls) == 7
    tail.clear()
    law_plain, calls = counted(_walk(tail))
    assert ex.exact_law(law_plain, merge=False).law == BINOMIAL and len(calls) == 8


@pytest.mark.parametrize("keyed", [True, False])
def test_keys_of_decided_draws_do_not_stop_merging(keyed: bool) -> None:
    """Each step draws with its own key: a key never asked again, so with keyed=False (no
    intervals kept) and with keyed=True plus ``committed`` (the key is dead, its interval
    forgotten) the merges are those of the unkeyed walk."""
    def walk(rng: Randomness) -> int:
        s = 0
        for t in range(3):
            merge_point(rng, (t, s), entry=t == 0, committed=(0,) * t)
            s += rng.categorical([1, 1], key=("step", t, ()))
        return s
    program, calls = counted(walk)
    assert ex.exact_distribution(program, keyed=keyed) == BINOMIAL
    assert len(calls) == 7


def test_live_keyed_intervals_keep_paths_apart() -> None:
    """The merge state is the same, but the continuation re-draws key "k": the interval left by
    the first draw is part of the state."""
    def program(rng: Randomness) -> tuple[int, int]:
        a = rng.categorical([1, 1, 2], key="k")
        merge_point(rng, "same", entry=True)
        merge_point(rng, "same", committed=(9,))  # "k" is not a (role, position, context) key
        return a, rng.categorical([1, 1], key="k")
    assert ex.exact_distribution(program) == {(0, 0): F(1, 4), (1, 0): F(1, 4), (2, 1): F(1, 2)}


def test_a_live_positional_key_survives_committed() -> None:
    """("d", 1, (0,)) is about position 1 after token 0: with ``committed=(0,)`` it is alive and
    its interval kept, so the second draw repeats the first."""
    def program(rng: Randomness) -> tuple[int, int]:
        key = ("d", 1, (0,))
        a = rng.categorical([1, 1], key=key)
        merge_point(rng, "s", entry=True, committed=(0,))
        return a, rng.categorical([1, 1], key=key)
    assert ex.exact_distribution(program) == {(0, 0): F(1, 2), (1, 1): F(1, 2)}


def test_merge_scopes_are_per_entry_outer_choices() -> None:
    """The continuation depends on ``a`` outside the state: an ``entry`` merge point after the
    choice of ``a`` scopes the state by it, so no merge across ``a``."""
    def program(rng: Randomness) -> tuple[int, int]:
        a = rng.categorical([1, 1])
        merge_point(rng, "inner", entry=True)
        return a, rng.categorical([1, 3])
    program_, calls = counted(program)
    assert ex.exact_distribution(program_) == {
        (0, 0): F(1, 8), (0, 1): F(3, 8), (1, 0): F(1, 8), (1, 1): F(3, 8)}
    assert len(calls) == 4


def test_the_hint_defaults_are_no_entry_and_no_committed() -> None:
    """``rng.merge_point(state)`` called directly: not an entry (the scope of the last entry
    stays), no keys forgotten (a 3-tuple key is kept without ``committed``)."""
    tail: list[int] = []

    def walk(rng: Any) -> int:
        rng.merge_point("start", entry=True)
        s = 0
        for t in range(3):
            rng.merge_point((t, s))
            s += rng.categorical([1, 1], key=("role", 0, ()) if t == 2 else None)
        tail.append(s)
        return s
    program, calls = counted(walk)
    assert ex.exact_distribution(program) == BINOMIAL
    assert (len(calls), len(tail)) == (7, 6)

    def repeat(rng: Any) -> tuple[int, int]:
        key = ("role", 0, ())
        a = rng.categorical([1, 1], key=key)
        rng.merge_point("after")
        return a, rng.categorical([1, 1], key=key)
    assert ex.exact_distribution(repeat) == {(0, 0): F(1, 2), (1, 1): F(1, 2)}


# ---------------------------------------------------------------------------------------------
# _dead


@pytest.mark.parametrize(("key", "committed", "dead"), [
    (None, (1,), False), ("k", (1,), False), (("r", 0), (1,), False),
    (("r", 0, [1]), (1,), False), (("r", 0, ()), (), False),
    (("r", 0, ()), (5,), True),  # position decided, context () agrees
    (("r", 1, (1,)), (1,), False),  # position 1 is the next one
    (("r", 1, (2,)), (1,), True),  # context contradicts
    (("r", 2, (1, 2)), (1,), False),  # context longer, agrees on the committed prefix
    (("r", 2, (1, 2)), (2,), True),
    (("r", 3, (1, 2, 3)), (1, 3), True),
    (("r", 2, (1, 3)), (1, 3), False),
    (("r", 1, (1, 3)), (1, 3), True),
])
def test_dead_keys(key: Any, committed: tuple[int, ...], dead: bool) -> None:
    assert dead_key(key, committed) is dead


# ---------------------------------------------------------------------------------------------
# Limits and arguments


def _two_coins(rng: Randomness) -> tuple[int, int]:
    return rng.categorical([1, 1]), rng.categorical([1, 1])


def test_max_paths_at_its_boundary() -> None:
    assert len(ex.exact_distribution(_two_coins, max_paths=4)) == 4
    assert len(ex.exact_law(_two_coins, max_paths=4).law) == 4
    message = ("more than 3 paths; shrink the problem or raise max_paths (a decoder of your "
               "own: see merge_point in docs/auditing-your-decoder.md)")
    with raises_exactly(PathLimitError, message):
        ex.exact_distribution(_two_coins, max_paths=3)
    with raises_exactly(PathLimitError, message):
        ex.exact_law(_two_coins, max_paths=3)


def test_max_choices_at_its_boundary() -> None:
    assert ex.exact_law(_two_coins, max_choices=2).longest_path == 2
    assert len(ex.exact_distribution(_two_coins, max_choices=2)) == 4
    message = ("one run made more than 1 choices; the program may not terminate (raise "
               "max_choices if it is just long)")
    with raises_exactly(PathLimitError, message):
        ex.exact_distribution(_two_coins, max_choices=1)
    with raises_exactly(PathLimitError, message):
        ex.exact_law(_two_coins, max_choices=1)


def test_the_longest_path_is_the_most_choices_of_any_run() -> None:
    def uneven(rng: Randomness) -> int:
        return rng.categorical([1, 1]) and 1 + rng.categorical([1, 1]) + rng.categorical([1, 1])
    result = ex.exact_law(uneven)
    assert result.longest_path == 3
    assert result.law == {0: F(1, 2), 1: F(1, 8), 2: F(1, 4), 3: F(1, 8)}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"keyed": 1}, "keyed must be True or False, got 1"),
    ({"merge": "yes"}, "merge must be True or False, got 'yes'"),
    ({"progress": None}, "progress must be True or False, got None"),
    ({"max_paths": 0}, "max_paths must be an int >= 1, got 0"),
    ({"max_choices": 0}, "max_choices must be an int >= 1, got 0"),
    ({"witness": "all"}, "witness must be one of ('first', 'shortest'), got 'all'"),
    ({"scheduler": "random"}, "scheduler must be one of (None, 'first', 'last'), got 'random'"),
])
def test_bad_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    with raises_exactly(InvalidAuditError, message):
        ex.exact_law(_two_coins, **kwargs)
    with raises_exactly(InvalidAuditError, message):
        ex.exact_distribution(_two_coins, **kwargs)


def test_the_smallest_limits_are_accepted() -> None:
    assert ex.exact_law(lambda rng: 5, max_paths=1, max_choices=1).law == {5: F(1)}


# ---------------------------------------------------------------------------------------------
# exact_expectation


def test_exact_expectation_is_exact_for_rationals_and_float_otherwise() -> None:
    assert ex.exact_expectation(lambda rng: 2 if rng.bernoulli(F(1, 3)) else 5) == F(4)
    mean = ex.exact_expectation(lambda rng: F(1, 3) * rng.categorical([1, 1, 2]))
    assert mean == F(5, 12) and type(mean) is F
    assert ex.exact_expectation(lambda rng: rng.bernoulli(F(1, 3))) == F(1, 3)  # bools: 0 or 1
    floats = ex.exact_expectation(lambda rng: 0.5 if rng.bernoulli(F(1, 2)) else 2)
    assert type(floats) is float and floats == pytest.approx(1.25, rel=1e-12)
    assert ex.exact_expectation(lambda rng: 3 * rng.categorical([1, 1]), keyed=False,
                                merge=False) == F(3, 2)


def test_exact_expectation_refuses_non_numbers() -> None:
    with raises_exactly(InvalidAuditError,
                        "exact_expectation needs a program that returns numbers, got the value "
                        "'a' (str); return e.g. run.time or len(run.tokens)"):
        ex.exact_expectation(cast(Program, lambda rng: "a"))


# ---------------------------------------------------------------------------------------------
# Hidden state: replays are checked


def _hidden(widths: list[int]) -> Program:
    """Two fair choices, then a third whose width changes on each call (hidden state)."""
    calls = iter(range(10**6))

    def program(rng: Randomness) -> int:
        a = rng.categorical([1, 1])
        width = widths[next(calls) % len(widths)]
        return a + rng.categorical([1] * width, key="q")
    return program


def test_a_replay_that_makes_a_different_choice_names_both() -> None:
    with raises_exactly(
            NondeterministicProgramError,
            "the program is not a deterministic function of its draws (hidden state or "
            "randomness outside rng?): replaying a path, after the choices [1. categorical -> "
            "0 (p=1/2)], the next choice was categorical 'q' over [0 (p=1/2), 1 (p=1/2)] when "
            "the path was first run, and is now categorical 'q' over [0 (p=1/3), 1 (p=1/3), "
            "2 (p=1/3)]") as caught:
        ex.exact_distribution(_hidden([2, 3]))
    assert caught.value.source is None
    assert caught.value.path == (ex.WitnessStep("categorical", None, "0", F(1, 2)),)


def test_a_divergence_at_the_first_choice_has_an_empty_path() -> None:
    calls = iter(range(10**6))

    def program(rng: Randomness) -> str:
        return str(rng.choose(["a", "b"] if next(calls) == 0 else ["a", "c"]))
    with raises_exactly(
            NondeterministicProgramError,
            "the program is not a deterministic function of its draws (hidden state or "
            "randomness outside rng?): replaying a path, before its first choice, the next "
            "choice was choose over ['a', 'b'] when the path was first run, and is now choose "
            "over ['a', 'c']") as caught:
        ex.exact_distribution(program)
    assert caught.value.path == ()


@pytest.mark.parametrize(("first", "again", "described"), [
    # only the probabilities differ
    ((F(1), F(2)), (F(2), F(1)),
     ("categorical over [0 (p=1/3), 1 (p=2/3)]", "categorical over [0 (p=2/3), 1 (p=1/3)]")),
    # only the labels differ (a zero weight moves)
    ((1, 0, 1), (1, 1, 0),
     ("categorical over [0 (p=1/2), 2 (p=1/2)]", "categorical over [0 (p=1/2), 1 (p=1/2)]")),
])
def test_every_field_of_a_choice_is_compared_on_replay(first: Any, again: Any,
                                                       described: tuple[str, str]) -> None:
    calls = iter(range(10**6))

    def program(rng: Randomness) -> int:
        a = rng.categorical([1, 1])
        return a + rng.categorical(first if next(calls) == 0 else again)
    with raises_exactly(
            NondeterministicProgramError,
            "the program is not a deterministic function of its draws (hidden state or "
            "randomness outside rng?): replaying a path, after the choices [1. categorical -> "
            f"0 (p=1/2)], the next choice was {described[0]} when the path was first run, and "
            f"is now {described[1]}"):
        ex.exact_distribution(program)


def test_a_different_key_on_replay_is_a_different_choice() -> None:
    calls = iter(range(10**6))

    def program(rng: Randomness) -> int:
        return rng.categorical([1, 1], key="a" if next(calls) == 0 else "b")
    with raises_exactly(
            NondeterministicProgramError,
            "the program is not a deterministic function of its draws (hidden state or "
            "randomness outside rng?): replaying a path, before its first choice, the next "
            "choice was categorical 'a' over [0 (p=1/2), 1 (p=1/2)] when the path was first "
            "run, and is now categorical 'b' over [0 (p=1/2), 1 (p=1/2)]"):
        ex.exact_distribution(program)


def test_fewer_choices_on_replay_is_named() -> None:
    calls = iter(range(10**6))

    def program(rng: Randomness) -> int:
        n = next(calls) % 2
        return sum(rng.categorical([1, 1]) for _ in range(n + 1))
    with raises_exactly(
            NondeterministicProgramError,
            "the program made fewer choices on replay than before: it is not a deterministic "
            "function of its draws (hidden state or randomness outside rng?); replaying a path "
            "of 2 choices, it returned 1 after the choices [1. categorical -> 1 (p=1/2)], "
            "before the choice categorical over [0 (p=1/2), 1 (p=1/2)]") as caught:
        ex.exact_distribution(program)
    assert caught.value.path == (ex.WitnessStep("categorical", None, "1", F(1, 2)),)


# ---------------------------------------------------------------------------------------------
# Randomness outside rng: the guarded entry points


OUTSIDE_TAIL = ("; an exact law is only defined for a program whose every random choice goes "
                "through rng (rng.categorical / rng.bernoulli; or seed a generator of its own "
                "from such a draw)")


@pytest.mark.parametrize(("source", "draw"), [
    ("os.urandom", lambda: os.urandom(1)),
    ("secrets.token_hex", lambda: __import__("secrets").token_hex(1)),
    ("random.SystemRandom.random", lambda: random.SystemRandom().random()),
    ("numpy.random.default_rng() without a seed", lambda: np.random.default_rng()),
    ("numpy.random.default_rng() without a seed", lambda: np.random.default_rng(None)),
    ("numpy.random.default_rng() without a seed", lambda: np.random.default_rng(seed=None)),
])
def test_each_guarded_source_is_named_with_the_path(source: str,
                                                    draw: Callable[[], object]) -> None:
    """The path: a replayed step, a merge point (no step) and a fresh step."""
    def program(rng: Randomness) -> int:
        a = rng.categorical([1, 1], key="a")
        merge_point(rng, a, entry=True)
        b = rng.bernoulli(F(1, 3), key="b")
        again = rng.categorical([1, 1, 1, 1], key="a")  # u in [1/2, 1): 2 or 3
        if a == 1:
            draw()
        return a + b + again
    with raises_exactly(NondeterministicProgramError,
                        f"the program drew randomness outside rng: it called {source}, after "
                        "the choices [1. categorical 'a' -> 1 (p=1/2); 2. bernoulli 'b' -> True "
                        f"(p=1/3); 3. categorical 'a' -> 2 (p=1/2)]{OUTSIDE_TAIL}") as caught:
        ex.exact_distribution(program)
    assert caught.value.source == source
    assert caught.value.path == (ex.WitnessStep("categorical", "a", "1", F(1, 2)),
                                 ex.WitnessStep("bernoulli", "b", "True", F(1, 3)),
                                 ex.WitnessStep("categorical", "a", "2", F(1, 2)))


def test_keys_are_named_on_the_path_even_when_not_honoured() -> None:
    def program(rng: Randomness) -> int:
        a = rng.categorical([1, 1], key="a")
        b = rng.bernoulli(F(1, 3), key="b")
        os.urandom(1)
        return a + b
    with raises_exactly(NondeterministicProgramError,
                        "the program drew randomness outside rng: it called os.urandom, after "
                        "the choices [1. categorical 'a' -> 0 (p=1/2); 2. bernoulli 'b' -> True "
                        f"(p=1/3)]{OUTSIDE_TAIL}"):
        ex.exact_distribution(program, keyed=False)


def test_an_outside_call_before_any_choice() -> None:
    with raises_exactly(NondeterministicProgramError,
                        "the program drew randomness outside rng: it called os.urandom, before "
                        f"its first choice{OUTSIDE_TAIL}") as caught:
        ex.exact_distribution(lambda rng: os.urandom(1))
    assert caught.value.path == ()


def test_seeded_generators_other_threads_and_metadata_are_left_alone() -> None:
    original = os.urandom
    seen: list[object] = []

    def program(rng: Randomness) -> int:
        a = rng.categorical([1, 1])
        seeded = int(np.random.default_rng(a).integers(0, 1))
        seeded += int(np.random.default_rng(seed=a).integers(0, 1))
        thread = threading.Thread(target=lambda: seen.append(len(os.urandom(2))))
        thread.start()
        thread.join()
        seen.append((os.urandom.__name__, os.urandom.__doc__ == original.__doc__,
                     os.urandom.__wrapped__ is original))  # type: ignore[attr-defined]
        return a + seeded
    assert ex.exact_distribution(program) == {0: F(1, 2), 1: F(1, 2)}
    assert seen == [2, ("urandom", True, True)] * 2
    assert os.urandom is original


#: The guarded entry points and whether their owner defines them itself, before any audit of
#: this process (a broken restore would otherwise be the baseline of a later test).
ENTRY_POINTS = [(getattr(owner, name), name in vars(owner))
                for owner, name, _, _ in guard_targets()]


def test_seeded_calls_reach_the_entry_point_with_their_arguments(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A seeded ``default_rng(seed=...)`` gets its keyword through the guard, and the guard wraps
    the entry point as it is at each audit (one replaced between two audits is the one called)."""
    expected = int(np.random.default_rng(seed=5).integers(0, 2**62))
    program = cast(Program, lambda rng: int(np.random.default_rng(seed=5).integers(0, 2**62)))
    assert ex.exact_distribution(program) == {expected: F(1)}
    monkeypatch.setattr(np.random, "default_rng", lambda seed=None: ("replaced", seed))
    replaced = cast(Program, lambda rng: np.random.default_rng(3))
    assert ex.exact_distribution(replaced) == {("replaced", 3): F(1)}


def test_every_entry_point_is_restored_after_an_audit_and_after_an_error() -> None:
    targets = guard_targets()
    originals = [entry for entry, _ in ENTRY_POINTS]
    owned = [own for _, own in ENTRY_POINTS]
    assert all(owned)  # SystemRandom's methods are its own, not inherited from Random
    ex.exact_distribution(_two_coins)
    with pytest.raises(NondeterministicProgramError):
        ex.exact_distribution(lambda rng: os.urandom(1))
    with pytest.raises(ZeroDivisionError):
        ex.exact_distribution(lambda rng: 1 // rng.categorical([1, 1]))
    assert [getattr(owner, name) for owner, name, _, _ in targets] == originals
    assert [name in vars(owner) for owner, name, _, _ in targets] == owned
    assert random.SystemRandom.random is originals[0]


class _BadName:
    """An entry point whose ``__name__`` is no string: its wrapper cannot be made."""

    __name__ = 5

    def __call__(self) -> None:
        return None


def test_a_failed_install_restores_what_it_patched(monkeypatch: pytest.MonkeyPatch) -> None:
    targets = guard_targets()
    originals = [entry for entry, _ in ENTRY_POINTS]
    bad = types.SimpleNamespace(entry=_BadName())
    monkeypatch.setattr(exact_law_module, "guard_targets",
                        lambda: (*targets, (bad, "entry", "bad.entry", None)))
    with pytest.raises(TypeError):
        ex.exact_distribution(_two_coins)
    monkeypatch.undo()
    assert [getattr(owner, name) for owner, name, _, _ in targets] == originals
    assert isinstance(bad.entry, _BadName)
    assert ex.exact_distribution(lambda rng: rng.categorical([1, 1])) == {0: F(1, 2), 1: F(1, 2)}
    with pytest.raises(NondeterministicProgramError):  # the guard still installs
        ex.exact_distribution(lambda rng: os.urandom(1))


def test_an_entry_point_that_refuses_setattr_is_not_undone(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """``setattr(int, ...)`` raises: the install fails there, and every entry point patched
    before it is restored (a patch recorded before its setattr made the restore fail first)."""
    targets = guard_targets()
    originals = [entry for entry, _ in ENTRY_POINTS]
    monkeypatch.setattr(exact_law_module, "guard_targets",
                        lambda: (*targets, (int, "bit_length", "int.bit_length", None)))
    with pytest.raises(TypeError):
        ex.exact_distribution(_two_coins)
    monkeypatch.undo()
    assert [getattr(owner, name) for owner, name, _, _ in targets] == originals
    assert Guard._patches == []


class _Base:
    def draw(self) -> int:
        return 4


class _Sub(_Base):
    """Inherits ``draw``: the guard covers it on the subclass and uncovers it afterwards."""


def test_an_inherited_entry_point_is_uncovered_again(monkeypatch: pytest.MonkeyPatch) -> None:
    targets = guard_targets()
    monkeypatch.setattr(exact_law_module, "guard_targets",
                        lambda: (*targets, (_Sub, "draw", "_Sub.draw", None)))
    with raises_exactly(NondeterministicProgramError,
                        "the program drew randomness outside rng: it called _Sub.draw, before "
                        f"its first choice{OUTSIDE_TAIL}"):
        ex.exact_distribution(lambda rng: _Sub().draw())
    assert "draw" not in vars(_Sub) and _Sub.draw is _Base.draw
    assert ex.exact_distribution(lambda rng: _Base().draw()) == {4: F(1)}  # not guarded
    assert "draw" not in vars(_Sub)


def test_nested_audits_guard_until_the_outer_one_ends_and_blame_the_inner_one() -> None:
    messages: list[str] = []

    def inner(rng: Randomness) -> int:
        rng.categorical([1, 1], key="inner")
        os.urandom(1)
        return 0

    def outer(rng: Randomness) -> str:
        rng.categorical([1, 1], key="outer")
        try:
            ex.exact_distribution(inner)
        except NondeterministicProgramError as error:
            messages.append(str(error))
        assert ex.exact_distribution(lambda r: r.categorical([1, 3])) == {0: F(1, 4), 1: F(3, 4)}
        return "ok"
    assert ex.exact_distribution(outer) == {"ok": F(1)}
    assert messages == [
        "the program drew randomness outside rng: it called os.urandom, after the choices [1. "
        f"categorical 'inner' -> 0 (p=1/2)]{OUTSIDE_TAIL}"] * 2

    def outer_draws_after(rng: Randomness) -> int:
        ex.exact_distribution(lambda r: r.categorical([1, 1]))
        os.urandom(1)
        return 0
    with raises_exactly(NondeterministicProgramError,
                        "the program drew randomness outside rng: it called os.urandom, before "
                        f"its first choice{OUTSIDE_TAIL}"):
        ex.exact_distribution(outer_draws_after)


def test_a_swallowed_or_replaced_outside_error_is_still_raised() -> None:
    def swallows(rng: Randomness) -> int:
        with contextlib.suppress(NondeterministicProgramError):
            os.urandom(1)
        return rng.categorical([1, 1])

    def replaces(rng: Randomness) -> int:
        try:
            os.urandom(1)
        except NondeterministicProgramError:
            raise ValueError("careless") from None
        return 0
    message = f"the program drew randomness outside rng: it called os.urandom, before its first " \
              f"choice{OUTSIDE_TAIL}"
    with raises_exactly(NondeterministicProgramError, message):
        ex.exact_distribution(swallows)
    with raises_exactly(NondeterministicProgramError, message) as caught:
        ex.exact_distribution(replaces)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_other_errors_of_the_program_pass_through() -> None:
    with pytest.raises(ZeroDivisionError):
        ex.exact_distribution(lambda rng: 1 // rng.categorical([1, 1]))


# ---------------------------------------------------------------------------------------------
# Randomness outside rng: the global generators' states


@pytest.fixture
def global_states() -> Iterator[None]:
    """Leave Python's and numpy's global generators as they were."""
    python, legacy = random.getstate(), np.random.get_state()  # noqa: NPY002
    yield
    random.setstate(python)
    np.random.set_state(legacy)  # noqa: NPY002


PYTHON = "random (Python's global generator)"
NUMPY = "numpy.random (the legacy global RandomState)"


@pytest.mark.usefixtures("global_states")
@pytest.mark.parametrize(("source", "draw"), [
    (PYTHON, lambda: random.random()),
    (NUMPY, lambda: np.random.random()),  # noqa: NPY002
])
def test_a_global_generator_drawn_is_named_with_the_first_run_that_drew(
        source: str, draw: Callable[[], object]) -> None:
    def program(rng: Randomness) -> int:
        a = rng.categorical([1, 1])
        b = rng.bernoulli(F(1, 4))
        if a == 1:
            draw()
        return a + b
    with raises_exactly(NondeterministicProgramError,
                        f"the program drew randomness outside rng: the state of {source} "
                        "changed during the run that made the choices [1. categorical -> 1 "
                        "(p=1/2); 2. bernoulli -> True (p=1/4)]; draw through rng") as caught:
        ex.exact_distribution(program)
    assert caught.value.source == source
    assert caught.value.path == (ex.WitnessStep("categorical", None, "1", F(1, 2)),
                                 ex.WitnessStep("bernoulli", None, "True", F(1, 4)))


@pytest.mark.usefixtures("global_states")
def test_a_global_draw_that_changes_a_choice_is_blamed_on_the_generator() -> None:
    """The replay diverges (hidden state) and the global generator is drawn: the error names the
    generator, found by the diagnostic exploration (its first run draws), caused by the
    divergence."""
    calls = iter(range(10**6))

    def program(rng: Randomness) -> int:
        random.random()
        return rng.categorical([1] * (2 + next(calls) % 2))
    with raises_exactly(NondeterministicProgramError,
                        f"the program drew randomness outside rng: the state of {PYTHON} "
                        "changed during the run that made the choices [1. categorical -> 0 "
                        "(p=1/2)]; draw through rng") as caught:
        ex.exact_distribution(program)
    cause = caught.value.__cause__
    assert isinstance(cause, NondeterministicProgramError) and cause.source is None
    assert str(cause).startswith("the program is not a deterministic function of its draws")
    assert caught.value.source == PYTHON


@pytest.mark.usefixtures("global_states")
def test_a_guarded_source_is_reported_even_when_a_global_generator_also_changed() -> None:
    def program(rng: Randomness) -> int:
        random.random()
        os.urandom(1)
        return 0
    with pytest.raises(NondeterministicProgramError) as caught:
        ex.exact_distribution(program)
    assert caught.value.source == "os.urandom"


@pytest.mark.usefixtures("global_states")
def test_a_draw_the_diagnosis_cannot_find_is_still_named() -> None:
    """The global generator is drawn in the first exploration only: the second, diagnostic one
    finds no run that changes it, so the error says what is known."""
    drawn: list[float] = []

    def program(rng: Randomness) -> int:
        if not drawn:
            drawn.append(random.random())
        return rng.categorical([1, 1])
    with raises_exactly(NondeterministicProgramError,
                        f"the program drew randomness outside rng: the state of {PYTHON} changed "
                        "while it ran (through a function the guard could not intercept, e.g. "
                        "one imported before the audit); draw through rng") as caught:
        ex.exact_distribution(program)
    assert caught.value.source == PYTHON and caught.value.path == ()
    assert caught.value.__cause__ is None


@pytest.mark.usefixtures("global_states")
def test_the_diagnosis_is_guarded_too() -> None:
    """The first exploration draws from Python's global generator; the diagnostic one calls
    os.urandom instead: the guard of the diagnosis names it."""
    calls: list[int] = []

    def program(rng: Randomness) -> int:
        calls.append(1)
        if len(calls) == 1:
            random.random()
        else:
            os.urandom(1)
        return 0
    with raises_exactly(NondeterministicProgramError,
                        "the program drew randomness outside rng: it called os.urandom, before "
                        f"its first choice{OUTSIDE_TAIL}") as caught:
        ex.exact_distribution(program)
    assert caught.value.source == "os.urandom" and len(calls) == 2


@pytest.mark.usefixtures("global_states")
def test_an_error_after_a_global_draw_is_the_cause_of_the_named_error() -> None:
    """The program fails after drawing from numpy's global generator: the error names the
    generator, caused by the failure; the diagnosis fails too (only the first call draws), so
    the message says what is known."""
    calls: list[int] = []

    def program(rng: Randomness) -> int:
        calls.append(1)
        if len(calls) == 1:
            np.random.random()  # noqa: NPY002
            raise KeyError("broken")
        raise ValueError("broken again")
    with raises_exactly(NondeterministicProgramError,
                        f"the program drew randomness outside rng: the state of {NUMPY} changed "
                        "while it ran (through a function the guard could not intercept, e.g. "
                        "one imported before the audit); draw through rng") as caught:
        ex.exact_distribution(program)
    assert isinstance(caught.value.__cause__, KeyError)
    assert len(calls) == 2


# ---------------------------------------------------------------------------------------------
# The progress bar


class _Bar:
    """Records what `exact_law` does with its tqdm bar."""

    made: ClassVar[list[_Bar]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.n = 0
        self.calls: list[tuple[Any, ...]] = []
        _Bar.made.append(self)

    def update(self, k: int) -> None:
        self.calls.append(("update", k))
        self.n += k

    def set_postfix(self, **kwargs: Any) -> None:
        self.calls.append(("postfix", kwargs))

    def refresh(self) -> None:
        self.calls.append(("refresh",))

    def close(self) -> None:
        self.calls.append(("close",))


@pytest.fixture
def bars(monkeypatch: pytest.MonkeyPatch) -> list[_Bar]:
    _Bar.made = []
    monkeypatch.setattr(exact_law_module, "tqdm", _Bar)
    monkeypatch.setattr(exact_law_module, "PROGRESS_EVERY", 2)
    return _Bar.made


def test_the_progress_bar_counts_runs_paths_and_merged_states(bars: list[_Bar]) -> None:
    """Two coins: runs (), (0,1), (1,), (1,1). Reports after run 2 (1 path done) and run 4
    (3 paths done), and at the end (4 paths)."""
    assert ex.exact_distribution(_two_coins, progress=True) == {
        (a, b): F(1, 4) for a in (0, 1) for b in (0, 1)}
    assert len(bars) == 1
    assert bars[0].kwargs == {"desc": "exact_distribution", "unit": " runs", "file": sys.stderr,
                              "mininterval": 0.5}
    postfix = [("postfix", {"paths": n, "merged_states": 0, "refresh": False}) for n in (1, 3, 4)]
    assert bars[0].calls == [("update", 2), postfix[0], ("update", 2), postfix[1],
                             ("update", 0), postfix[2], ("refresh",), ("close",)]
    tail: list[int] = []
    ex.exact_law(_walk(tail), progress=True)
    assert bars[1].calls[-4:] == [("update", 1), ("postfix", {
        "paths": 6, "merged_states": 6, "refresh": False}), ("refresh",), ("close",)]


def test_the_progress_bar_is_closed_on_errors_and_off_by_default(bars: list[_Bar]) -> None:
    with pytest.raises(PathLimitError):
        ex.exact_law(_two_coins, progress=True, max_paths=1)
    assert bars[0].calls == [
        ("update", 2), ("postfix", {"paths": 1, "merged_states": 0, "refresh": False}),
        ("update", 0), ("postfix", {"paths": 2, "merged_states": 0, "refresh": False}),
        ("refresh",), ("close",)]
    ex.exact_law(_two_coins)
    ex.exact_distribution(_two_coins)
    ex.exact_expectation(lambda rng: rng.categorical([1, 1]))
    assert len(bars) == 1


def test_the_real_progress_bar_writes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    ex.exact_distribution(_two_coins, progress=True)
    err = capsys.readouterr().err
    assert err.startswith("\rexact_distribution: ")
    assert "4 runs" in err and "merged_states=0, paths=4" in err


# ---------------------------------------------------------------------------------------------
# torch's global generator (only when torch is installed)


@pytest.mark.torch
def test_torch_global_generator_is_compared_once_torch_is_imported() -> None:
    torch = pytest.importorskip("torch")
    state = torch.get_rng_state()
    try:
        with raises_exactly(NondeterministicProgramError,
                            "the program drew randomness outside rng: the state of torch's "
                            "global generator changed during the run that made the choices [1. "
                            "categorical -> 0 (p=1/2)]; draw through rng"):
            ex.exact_distribution(lambda rng: (rng.categorical([1, 1]), float(torch.rand(1))))
    finally:
        torch.set_rng_state(state)
