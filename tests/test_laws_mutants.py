"""Tests that pin dsi_ref/audit/laws.py exactly, so that mutation testing (issue #13, item 7;
docs/mutation-testing.md) kills its mutants: the target's law ``P(x_{1:N} | prompt)`` walked
by hand on tiny tables, the prefix marginals ``P(X starts with s)``, the first diverging prefix,
the worst sequence and its tie-break, the float-noise verdict at ``TV = tolerance`` and on
either side of it, every message of `LosslessReport` whole, the pair labels, the default float
tolerance ``D · (V · 2^-47 + 2 (V + 1) · 2^-53)`` and its basis, the refusal of a target whose
float rows were not read as laws, and every argument of `check_lossless` and
`assert_lossless` carried through. Every expected value is worked out by hand from the rows."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction as F
from types import SimpleNamespace
from typing import Any

import pytest

import dsi_ref as dr
from dsi_ref.audit.exact import Law
from dsi_ref.audit.laws import (
    ROUNDING_PER_ENTRY,
    LosslessReport,
    _pair_label,
    _prefix_marginals,
    _shown,
    assert_lossless,
    check_lossless,
    compare_laws,
    default_float_tolerance,
    first_diverging_prefix,
    row_slack,
    target_distribution,
)
from dsi_ref.base.errors import (
    InvalidAuditError,
    InvalidDistributionError,
    InvalidParameterError,
    PathLimitError,
)

#: one token, ``p = (1/4, 3/4)``
COIN = dr.TableLM.context_free([F(1, 4), F(3, 4)])
#: a bigram model over {0, 1, 2} with EOS = 2 and zeros in its rows
CHAIN = dr.TableLM(vocab_size=3, context=1, eos=2, name="chain", table={
    (): (F(1, 2), F(1, 2), F(0)),
    (0,): (F(0), F(1, 3), F(2, 3)),
    (1,): (F(1, 4), F(3, 4), F(0)),
    (2,): (F(1), F(0), F(0)),
})
#: a float first row, exact rows after it (the walk reads the float row first, the exact last)
MIXED = dr.TableLM(vocab_size=2, context=1, table={
    (): (0.5, 0.5), (0,): (F(1, 2), F(1, 2)), (1,): (F(1, 2), F(1, 2))})
HALF = [F(1, 2), F(1, 2)]


def coin(rng: Any) -> tuple[int, ...]:
    """The target's own law: one draw from ``(1/4, 3/4)``."""
    return (rng.categorical([F(1, 4), F(3, 4)]),)


def fair(rng: Any) -> tuple[int, ...]:
    """A lossy decoder for `COIN`: one fair draw."""
    return (rng.categorical(HALF),)


def tolerance_for(paths: int, vocab: int) -> F:
    """``D · (V · 2^-47 + 2 (V + 1) · 2^-53)``, the documented default, written out."""
    return paths * (vocab * F(1, 2**47) + 2 * (vocab + 1) * F(1, 2**53))


def basis_for(paths: int, vocab: int) -> str:
    """The default tolerance's basis in a report, written out."""
    return (f"default: {paths} choices x ({vocab} x 2^-47 of float64 rounding + 2 x "
            f"{vocab + 1} x 2^-53 of rows read within rounding of 1)")


# ---------------------------------------------------------------------------------------------
# target_distribution


def test_the_target_law_walks_every_prefix_and_stops_at_eos_or_the_budget() -> None:
    """``P(x_1 x_2 x_3)`` over CHAIN's rows: EOS ends a sequence early, zeros are left out."""
    assert target_distribution(CHAIN) == {(0,): F(1, 2), (1,): F(1, 2)}  # default N = 1
    assert target_distribution(CHAIN, (), 2) == {
        (0, 1): F(1, 6), (0, 2): F(1, 3), (1, 0): F(1, 8), (1, 1): F(3, 8)}
    assert target_distribution(CHAIN, max_new_tokens=3) == {
        (0, 1, 0): F(1, 24), (0, 1, 1): F(1, 8), (0, 2): F(1, 3),
        (1, 0, 1): F(1, 24), (1, 0, 2): F(1, 12), (1, 1, 0): F(3, 32), (1, 1, 1): F(9, 32)}
    assert target_distribution(CHAIN, max_new_tokens=0) == {(): F(1)}


def test_the_target_law_conditions_on_the_prompt() -> None:
    assert target_distribution(CHAIN, (0,)) == {(1,): F(1, 3), (2,): F(2, 3)}
    assert target_distribution(CHAIN, [1], 2) == {
        (0, 1): F(1, 12), (0, 2): F(1, 6), (1, 0): F(3, 16), (1, 1): F(9, 16)}


def test_the_greedy_target_law_is_one_sequence_ties_to_the_lowest_id() -> None:
    """The first row ties (1/2, 1/2): token 0; then 2 = EOS (2/3) ends it."""
    assert target_distribution(CHAIN, max_new_tokens=3, greedy=True) == {(0, 2): F(1)}
    assert target_distribution(CHAIN, (1,), 2, greedy=True) == {(1, 1): F(1)}
    assert target_distribution(COIN, greedy=True) == {(1,): F(1)}


def test_float_rows_are_read_as_their_binary_values() -> None:
    assert target_distribution(MIXED, max_new_tokens=2) == {
        (0, 0): F(1, 4), (0, 1): F(1, 4), (1, 0): F(1, 4), (1, 1): F(1, 4)}
    tenth = dr.TableLM.context_free([0.1, 0.9])
    total = F(0.1) + F(0.9)
    assert target_distribution(tenth) == {(0,): F(0.1) / total, (1,): F(0.9) / total}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"prompt": (5,)}, "prompt token 5 is not an id of a vocabulary of size 2"),
    ({"prompt": "ab"}, "prompt must be a sequence of token ids, got 'ab'"),
    ({"max_new_tokens": -1}, "max_new_tokens must be an int >= 0, got -1"),
])
def test_bad_target_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=f"^{re.escape(message)}$"):
        target_distribution(COIN, **kwargs)


# ---------------------------------------------------------------------------------------------
# prefix marginals and the first diverging prefix


def test_prefix_marginals_add_up_every_sequence_that_starts_with_the_prefix() -> None:
    """``P(X starts with s)`` for ``|s| = length``: a sequence of exactly that length counts."""
    law = {(0,): F(1, 8), (0, 1): F(1, 4), (0, 1, 1): F(1, 8), (1, 0): F(1, 2)}
    assert _prefix_marginals(law, 0) == {(): F(1)}
    assert _prefix_marginals(law, 1) == {(0,): F(1, 2), (1,): F(1, 2)}
    assert _prefix_marginals(law, 2) == {(0, 1): F(3, 8), (1, 0): F(1, 2)}
    assert _prefix_marginals(law, 3) == {(0, 1, 1): F(1, 8)}
    assert _prefix_marginals(law, 4) == {}
    assert _prefix_marginals({}, 0) == {}


@pytest.mark.parametrize(("ours", "theirs", "expected"), [
    # equal laws, empty laws, outcomes that are not sequences: no prefix
    ({(0,): F(1)}, {(0,): F(1)}, None),
    ({}, {}, None),
    ({0: F(1, 2), 1: F(1, 2)}, {0: F(1)}, None),
    ({(0,): F(1)}, {"a": F(1)}, None),
    # an explicit zero is no mass: equal laws, on either side
    ({(0,): F(1)}, {(0,): F(1), (1,): F(0)}, None),
    ({(0,): F(1), (1,): F(0)}, {(0,): F(1)}, None),
    # the empty prefix differs when the total masses do
    ({(0,): F(1, 2)}, {(0,): F(1)}, ((), F(1, 2), F(1))),
    # divergence only at the longest length
    ({(0, 0): F(1, 2), (0, 1): F(1, 2)}, {(0, 0): F(1, 4), (0, 1): F(3, 4)},
     ((0, 0), F(1, 2), F(1, 4))),
    # the first diverging prefix is the target's only, or the decoder's only
    ({(1,): F(1)}, {(0,): F(1, 2), (1,): F(1, 2)}, ((0,), F(0), F(1, 2))),
    ({(0,): F(1, 2), (1,): F(1, 2)}, {(1,): F(1)}, ((0,), F(1, 2), F(0))),
    ({(0,): F(1)}, {(1,): F(1)}, ((0,), F(1), F(0))),
    # sorted order of tokens (9 < 10), not of their text
    ({(9,): F(1, 2), (10,): F(1, 2)}, {(9,): F(1, 4), (10,): F(3, 4)}, ((9,), F(1, 2), F(1, 4))),
    # the shortest prefix first: (0,) differs before (1, 0) is reached
    ({(0,): F(1, 4), (1, 0): F(3, 4)}, {(0,): F(1, 2), (1, 0): F(1, 4), (1, 1): F(1, 4)},
     ((0,), F(1, 4), F(1, 2))),
])
def test_the_first_diverging_prefix(ours: Law, theirs: Law,
                                    expected: tuple[tuple[Any, ...], F, F] | None) -> None:
    assert first_diverging_prefix(ours, theirs) == expected


def test_tokens_that_do_not_compare_are_ordered_by_their_text() -> None:
    """``('a',)`` and ``(0,)`` cannot be sorted; ``"('a',)" < "(0,)"``."""
    ours = {(0,): F(1, 2), ("a",): F(1, 2)}
    assert first_diverging_prefix(ours, {(0,): F(1)}) == (("a",), F(1, 2), F(0))
    assert first_diverging_prefix({(0,): F(1)}, ours) == (("a",), F(0), F(1, 2))


# ---------------------------------------------------------------------------------------------
# compare_laws and the report's message


def report(decoder_law: Law, target_law: Law, **fields: Any) -> LosslessReport:
    """A `LosslessReport` with the defaults of an exact comparison."""
    return LosslessReport(decoder_law=decoder_law, target_law=target_law, **fields)


QUARTER = {(0,): F(1, 4), (1,): F(3, 4)}
NEAR = {(0,): F(3, 10), (1,): F(7, 10)}  # TV 1/20 from QUARTER


def test_equal_laws() -> None:
    """TV 0; the worst sequence ties at 0 and goes to the largest text, ``(1,)``."""
    got = compare_laws(QUARTER, dict(QUARTER))
    assert got == report(QUARTER, QUARTER, equal=True, tv_distance=F(0), worst_sequence=(1,),
                         decoder_probability=F(3, 4), target_probability=F(3, 4), outcomes=2,
                         first_diverging_prefix=None, decoder_prefix_probability=F(0),
                         target_prefix_probability=F(0), label="", float_tolerance=F(0),
                         float_discrepancy=F(0))
    assert bool(got) is True and got.identical is True
    assert str(got) == "lossless: output law == target law over 2 sequences"


@pytest.mark.parametrize("tolerance", [-1, F(-1, 10), float("nan"), "0"])
def test_compare_laws_refuses_a_bad_float_tolerance(tolerance: Any) -> None:
    """As `check_lossless` does: a negative tolerance would call identical laws lossy."""
    with pytest.raises(InvalidParameterError, match=r"^float_tolerance must "):
        compare_laws(QUARTER, dict(QUARTER), float_tolerance=tolerance)


def test_empty_laws() -> None:
    got = compare_laws({}, {})
    assert got == report({}, {}, equal=True, tv_distance=F(0), worst_sequence=None,
                         decoder_probability=F(0), target_probability=F(0), outcomes=0)
    assert str(got) == "lossless: output law == target law over 0 sequences"


def test_lossy_laws_are_compared_exactly_by_default() -> None:
    got = compare_laws(NEAR, QUARTER)
    assert got == report(NEAR, QUARTER, equal=False, tv_distance=F(1, 20), worst_sequence=(1,),
                         decoder_probability=F(7, 10), target_probability=F(3, 4), outcomes=2,
                         first_diverging_prefix=(0,), decoder_prefix_probability=F(3, 10),
                         target_prefix_probability=F(1, 4))
    assert bool(got) is False and got.identical is False
    assert str(got) == (
        "LOSSY: total-variation distance 1/20 (~0.05) over 2 sequences;\n"
        "  first diverging prefix (0,): decoder P(starts with it) = 3/10 (~0.3), "
        "target P = 1/4 (~0.25)\n"
        "  worst sequence (1,): decoder P = 7/10 (~0.7), target P = 3/4 (~0.75)")


@pytest.mark.parametrize("tolerance", [F(1, 10), F(1, 20), 0.5])
def test_float_noise_up_to_the_tolerance_is_lossless(tolerance: F | float) -> None:
    """``TV = 1/20 <= tolerance`` on the target's support: float noise (at 1/20 exactly too)."""
    got = compare_laws(NEAR, QUARTER, float_tolerance=tolerance)
    assert got == report(NEAR, QUARTER, equal=True, tv_distance=F(1, 20), worst_sequence=(1,),
                         decoder_probability=F(7, 10), target_probability=F(3, 4), outcomes=2,
                         first_diverging_prefix=(0,), decoder_prefix_probability=F(3, 10),
                         target_prefix_probability=F(1, 4), float_tolerance=F(tolerance),
                         float_discrepancy=F(1, 20))
    assert bool(got) is True and got.identical is False
    assert str(got) == (
        "lossless up to float rounding: output law == target law over 2 sequences but for "
        f"float noise of total-variation distance 1/20 (<= the float tolerance "
        f"{F(tolerance)}; worst sequence (1,): decoder P = 7/10, target P = 3/4)")


def test_more_than_the_tolerance_is_lossy() -> None:
    got = compare_laws(NEAR, QUARTER, float_tolerance=F(1, 21))
    assert got == report(NEAR, QUARTER, equal=False, tv_distance=F(1, 20), worst_sequence=(1,),
                         decoder_probability=F(7, 10), target_probability=F(3, 4), outcomes=2,
                         first_diverging_prefix=(0,), decoder_prefix_probability=F(3, 10),
                         target_prefix_probability=F(1, 4), float_tolerance=F(1, 21))
    assert str(got) == (
        "LOSSY: total-variation distance 1/20 (~0.05) (more than the float tolerance 1/21) "
        "over 2 sequences;\n"
        "  first diverging prefix (0,): decoder P(starts with it) = 3/10 (~0.3), "
        "target P = 1/4 (~0.25)\n"
        "  worst sequence (1,): decoder P = 7/10 (~0.7), target P = 3/4 (~0.75)")


@pytest.mark.parametrize("tolerance", [F(1, 2), F(1)])
def test_mass_outside_the_targets_support_is_never_float_noise(tolerance: F) -> None:
    """``TV = 1/2 <= tolerance`` but the decoder emits ``(1,)``, which the target cannot."""
    ours, theirs = {(0,): F(1, 2), (1,): F(1, 2)}, {(0,): F(1)}
    got = compare_laws(ours, theirs, float_tolerance=tolerance, pair="m")
    assert got == report(ours, theirs, equal=False, tv_distance=F(1, 2), worst_sequence=(1,),
                         decoder_probability=F(1, 2), target_probability=F(0), outcomes=2,
                         first_diverging_prefix=(0,), decoder_prefix_probability=F(1, 2),
                         target_prefix_probability=F(1), label="pair 'm'",
                         float_tolerance=tolerance)
    assert str(got) == (
        f"pair 'm': LOSSY: total-variation distance 1/2 (~0.5) (within the float tolerance "
        f"{tolerance}, but on sequences the target cannot produce: never float noise) over 2 "
        "sequences;\n"
        "  first diverging prefix (0,): decoder P(starts with it) = 1/2 (~0.5), "
        "target P = 1 (~1)\n"
        "  worst sequence (1,): decoder P = 1/2 (~0.5), target P = 0 (~0)")


def test_outcomes_that_are_not_sequences_have_no_diverging_prefix() -> None:
    """Disjoint supports: the worst sequence ties at 1 and goes to the largest text, ``2``."""
    got = compare_laws({1: F(1)}, {2: F(1)}, pair=SimpleNamespace(name="p"))
    assert got == report({1: F(1)}, {2: F(1)}, equal=False, tv_distance=F(1),
                         worst_sequence=2, decoder_probability=F(0),
                         target_probability=F(1), outcomes=2, label="pair 'p'")
    assert str(got) == ("pair 'p': LOSSY: total-variation distance 1 (~1) over 2 sequences;\n"
                        "  worst sequence 2: decoder P = 0 (~0), target P = 1 (~1)")


def test_string_outcomes_diverge_at_a_string_prefix() -> None:
    """Strings (`check_lossless_strings`) are sequences of characters: ``"ab"`` and ``"b"``
    first differ at the one-character prefix ``"a"``; the message quotes them."""
    got = compare_laws({"ab": F(1)}, {"b": F(1)})
    assert got.first_diverging_prefix == "a"
    assert (got.decoder_prefix_probability, got.target_prefix_probability) == (F(1), F(0))
    assert "first diverging prefix 'a'" in str(got) and "worst sequence 'b'" in str(got)
    assert first_diverging_prefix({"ab": F(1)}, {(0,): F(1)}) is None  # strings and tuples


@pytest.mark.parametrize(("ours", "theirs", "worst"), [
    ({(0,): F(1, 2), (1,): F(1, 4), (2,): F(1, 4)}, {(0,): F(1, 8), (1,): F(1, 2), (2,): F(3, 8)},
     (0,)),
    ({(0,): F(1, 4), (1,): F(3, 4)}, {(0,): F(1, 2), (1,): F(1, 4), (2,): F(1, 4)}, (1,)),
    ({(2,): F(1)}, {(0,): F(1, 4), (1,): F(1, 4), (2,): F(1, 2)}, (2,)),
])
def test_the_worst_sequence_has_the_largest_difference(ours: Law, theirs: Law,
                                                       worst: tuple[int]) -> None:
    """``argmax_s |P_dec(s) − P_tgt(s)|`` (not the largest sum, not the largest sequence)."""
    got = compare_laws(ours, theirs)
    assert got.worst_sequence == worst
    assert got.decoder_probability == ours.get(worst, F(0))
    assert got.target_probability == theirs[worst]
    assert got.outcomes == 3


def test_long_fractions_are_shown_as_decimals() -> None:
    third = F(1, 3) + F(1, 10**20)
    got = compare_laws({(0,): third, (1,): 1 - third}, {(0,): F(1)})
    assert str(got) == (
        "LOSSY: total-variation distance ~0.666667 over 2 sequences;\n"
        "  first diverging prefix (0,): decoder P(starts with it) = ~0.333333, "
        "target P = 1 (~1)\n"
        "  worst sequence (1,): decoder P = ~0.666667, target P = 0 (~0)")


def test_a_report_built_by_hand_prints_each_part_it_has() -> None:
    """No label, no prefix, no tolerance: the bare lossy message; a rounding message reads
    its own fields."""
    bare = report({(0,): F(1)}, {(1,): F(1)}, equal=False, tv_distance=F(1),
                  worst_sequence=(1,), decoder_probability=F(0), target_probability=F(1),
                  outcomes=2)
    assert str(bare) == ("LOSSY: total-variation distance 1 (~1) over 2 sequences;\n"
                         "  worst sequence (1,): decoder P = 0 (~0), target P = 1 (~1)")
    rounding = report({}, {}, equal=True, tv_distance=F(1, 7), worst_sequence=(2,),
                      decoder_probability=F(1, 5), target_probability=F(1, 6), outcomes=3,
                      float_tolerance=F(1, 3), float_discrepancy=F(1, 9))
    assert str(rounding) == (
        "lossless up to float rounding: output law == target law over 3 sequences but for "
        "float noise of total-variation distance 1/9 (<= the float tolerance 1/3; worst "
        "sequence (2,): decoder P = 1/5, target P = 1/6)")


@pytest.mark.parametrize(("x", "text"), [
    (F(1, 4), "1/4 (~0.25)"),
    (F(1, 3), "1/3 (~0.3333)"),
    (F(0), "0 (~0)"),
    (F(1), "1 (~1)"),
    (F(1, 3) + F(1, 10**20), "~0.333333"),
])
def test_shown(x: F, text: str) -> None:
    assert _shown(x) == text


@pytest.mark.parametrize(("pair", "label"), [
    (None, ""),
    ("m", "pair 'm'"),
    (SimpleNamespace(name="p", target="T", drafter="D"), "pair 'p', target='T', drafter='D'"),
    (SimpleNamespace(name="p"), "pair 'p'"),
    (SimpleNamespace(name=None, target="T", drafter=None), "target='T'"),
    (SimpleNamespace(drafter="D"), "drafter='D'"),
    (SimpleNamespace(name="", target=None), "namespace(name='', target=None)"),
    (42, "42"),
])
def test_pair_labels(pair: Any, label: str) -> None:
    assert _pair_label(pair) == label


# ---------------------------------------------------------------------------------------------
# the default float tolerance


def test_the_default_float_tolerance() -> None:
    """``max(1, D) · (V · 2^-47 + 2 (V + 1) · 2^-53)``, about 1.8e-13 at D = 8, V = 3."""
    assert F(1, 2**47) == ROUNDING_PER_ENTRY
    assert row_slack(3) == 4 * F(1, 2**53) and row_slack(1) == F(2, 2**53)
    assert default_float_tolerance(0, 3) == tolerance_for(1, 3)
    assert default_float_tolerance(1, 3) == tolerance_for(1, 3)
    assert default_float_tolerance(2, 3) == tolerance_for(2, 3)
    assert default_float_tolerance(5, 7) == tolerance_for(5, 7)
    assert abs(float(default_float_tolerance(8, 3)) - 1.776e-13) < 0.001e-13


class _Vouched:
    """A float model that declares ``prevalidated`` and returns ``row`` as it is."""

    prevalidated = True
    vocab_size = 2
    eos = None
    name = "vouched"

    def __init__(self, row: tuple[float, float]) -> None:
        self.row = row

    def probs(self, prefix: tuple[int, ...]) -> tuple[float, float]:
        return self.row


def _off_by(ulps: int) -> tuple[float, float]:
    """``(1/2, 1/2 + ulps · 2^-53)``: a row whose exact sum is ``1 + ulps · 2^-53``."""
    return (0.5, 0.5 + ulps * 2.0**-53)


def test_a_target_read_within_rounding_of_1_gets_the_default_tolerance() -> None:
    """A model's rows as decoders read them sum to 1 within ``(V + 1) · 2^-53`` (`read_row`);
    a target that vouches for rows off by exactly that still gets the default tolerance."""
    got = check_lossless(fair, _Vouched(_off_by(3)))  # type: ignore[arg-type]
    assert got.float_tolerance == tolerance_for(1, 2)


class _Nameless:
    """`_Vouched` without a name: the message names its type."""

    prevalidated = True
    vocab_size = 2
    eos = None

    def probs(self, prefix: tuple[int, ...]) -> tuple[float, float]:
        return (0.5, 0.5 + 2.0**-40)


def test_the_deviation_is_the_exact_sum_of_every_kind_of_entry() -> None:
    """A row of a `Fraction` and a float is summed exactly (1/3 itself, not its double): here
    4.07e-16 past 1, where the double of 1/3 would make it 3.89e-16; float32 entries are read
    through ``float``; a nameless target is named by its type."""
    row = (F(1, 3), float(2 / 3) + 4 * 2.0**-53)
    with pytest.raises(InvalidDistributionError, match=r"only within 4\.07e-16 as decoders"):
        check_lossless(fair, _Vouched(row))  # type: ignore[arg-type]
    mixed = (F(1, 3), 2 / 3)
    assert check_lossless(lambda rng: (rng.categorical(list(mixed)),),
                          _Vouched(mixed)).equal  # type: ignore[arg-type]
    import numpy as np

    halves = (np.float32(0.5), np.float32(0.5))
    assert check_lossless(fair, _Vouched(halves)).equal  # type: ignore[arg-type]
    with pytest.raises(InvalidDistributionError,
                       match=r"^the float rows of the target '_Nameless' sum to 1 only within "):
        check_lossless(fair, _Nameless())  # type: ignore[arg-type]


def test_a_tolerance_of_zero_has_no_basis() -> None:
    """A float target compared exactly on request: the report carries no basis."""
    got = check_lossless(fair, dr.TableLM.context_free([0.25, 0.75]), float_tolerance=0)
    assert got.float_tolerance == 0 and got.float_tolerance_basis == ""


def test_a_target_whose_float_rows_were_not_read_as_laws_is_refused() -> None:
    """One ulp of 2^-53 past ``(V + 1) · 2^-53``: the default tolerance cannot tell a decoder's
    float32 rounding from the rows' own error, so it is refused, with the figures; a tolerance
    given by the caller is the caller's."""
    with pytest.raises(InvalidDistributionError) as err:
        check_lossless(fair, _Vouched(_off_by(4)))  # type: ignore[arg-type]
    assert str(err.value) == (
        f"the float rows of the target 'vouched' sum to 1 only within {4 * 2.0**-53:.3g} as "
        f"decoders read them, not within rounding ({3 * 2.0**-53:.3g}): a model that declares "
        "prevalidated must return its rows as dsi_ref.base.models.read_row reads them (divided "
        "by their float64 sum), else the default float tolerance cannot tell a decoder's "
        "float32 rounding from the rows' own error (or pass float_tolerance)")
    given = check_lossless(fair, _Vouched(_off_by(4)), float_tolerance=F(1, 3))  # type: ignore[arg-type]
    assert given.equal and given.float_tolerance_basis == "as given"
    exact = check_lossless(fair, _Vouched((F(1, 2), F(1, 2))))  # type: ignore[arg-type]
    assert exact.identical and exact.float_tolerance == 0


# ---------------------------------------------------------------------------------------------
# check_lossless and assert_lossless


def test_check_lossless_of_the_targets_own_law() -> None:
    """Defaults: N = 1, sampling (not greedy), exact comparison, the target named."""
    got = check_lossless(coin, COIN)
    assert got == report(QUARTER, QUARTER, equal=True, tv_distance=F(0), worst_sequence=(1,),
                         decoder_probability=F(3, 4), target_probability=F(3, 4), outcomes=2,
                         label=f"target={COIN!r}")
    assert got.identical
    assert assert_lossless(coin, COIN) == got


def test_check_lossless_of_a_lossy_program() -> None:
    got = check_lossless(fair, COIN, pair="m")
    assert got == report({(0,): F(1, 2), (1,): F(1, 2)}, QUARTER, equal=False,
                         tv_distance=F(1, 4), worst_sequence=(1,), decoder_probability=F(1, 2),
                         target_probability=F(3, 4), outcomes=2, first_diverging_prefix=(0,),
                         decoder_prefix_probability=F(1, 2), target_prefix_probability=F(1, 4),
                         label=f"pair 'm', target={COIN!r}")
    message = (f"pair 'm', target={COIN!r}: LOSSY: total-variation distance 1/4 (~0.25) over 2 "
               "sequences;\n"
               "  first diverging prefix (0,): decoder P(starts with it) = 1/2 (~0.5), "
               "target P = 1/4 (~0.25)\n"
               "  worst sequence (1,): decoder P = 1/2 (~0.5), target P = 3/4 (~0.75)")
    assert str(got) == message
    with pytest.raises(AssertionError) as err:
        assert_lossless(fair, COIN, pair="m")
    assert str(err.value) == message


def test_a_pair_object_is_named_as_it_is() -> None:
    pair = SimpleNamespace(name="p", target="T", drafter="D")
    assert check_lossless(fair, COIN, pair=pair).label == "pair 'p', target='T', drafter='D'"
    with pytest.raises(AssertionError) as err:
        assert_lossless(fair, COIN, pair=pair)
    assert str(err.value).startswith("pair 'p', target='T', drafter='D': LOSSY: ")


def test_prompt_budget_and_greedy_are_passed_on() -> None:
    def chain_after_1(rng: Any) -> tuple[int, ...]:
        first = rng.categorical([F(1, 4), F(3, 4)])
        return (first, rng.categorical([F(0), F(1, 3), F(2, 3)] if first == 0
                                        else [F(1, 4), F(3, 4), F(0)]))

    law = {(0, 1): F(1, 12), (0, 2): F(1, 6), (1, 0): F(3, 16), (1, 1): F(9, 16)}
    for check in (check_lossless, assert_lossless):
        got = check(chain_after_1, CHAIN, (1,), 2)
        assert got.equal and got.target_law == law and got.decoder_law == law
        greedy = check(lambda rng: (0, 2), CHAIN, max_new_tokens=3, greedy=True)
        assert greedy.equal and greedy.target_law == {(0, 2): F(1)}
        assert greedy.label == f"target={CHAIN!r}"
    with pytest.raises(AssertionError) as err:  # sampling: P(0, 2) = 1/3, 7 sequences
        assert_lossless(lambda rng: (0, 2), CHAIN, max_new_tokens=3)
    assert str(err.value) == (
        f"target={CHAIN!r}: LOSSY: total-variation distance 2/3 (~0.6667) over 7 sequences;\n"
        "  first diverging prefix (0,): decoder P(starts with it) = 1 (~1), target P = 1/2 "
        "(~0.5)\n"
        "  worst sequence (0, 2): decoder P = 1 (~1), target P = 1/3 (~0.3333)")


def test_exact_keyword_arguments_are_passed_on() -> None:
    for check in (check_lossless, assert_lossless):
        with pytest.raises(PathLimitError, match=r"^more than 1 paths; "):
            check(coin, COIN, max_paths=1)
        assert check(coin, COIN, max_paths=2).equal


def test_a_float_target_row_sets_the_default_tolerance() -> None:
    """Exact draws against a float target: D = max(1 choice, N = 1), V = 2."""
    floats = dr.TableLM.context_free([0.25, 0.75])
    got = check_lossless(coin, floats)
    assert got.equal and got.identical
    assert got.float_tolerance == tolerance_for(1, 2) and got.float_discrepancy == 0
    assert got.float_tolerance_basis == basis_for(1, 2)
    given = check_lossless(coin, floats, float_tolerance=F(1, 3))
    assert given.float_tolerance == F(1, 3) and given.float_tolerance_basis == "as given"


def test_a_target_row_off_1_by_1e_10_is_read_as_its_law_and_costs_no_tolerance() -> None:
    """``0.25 + 0.7500000001`` sums to 1 + ~1e-10 (valid: within 1e-9): the table keeps it
    divided by its float64 sum, so the tolerance is the default one, and a decoder drawing from
    the row as given (read exactly over its exact sum) differs from it by rounding only."""
    row = (0.25, 0.7500000001)
    table = dr.TableLM(vocab_size=2, context=1, table={
        (): row, (0,): (0.5, 0.5), (1,): (F(1, 2), F(1, 2))})
    assert table.table[()] == (0.25 / math.fsum(row), 0.7500000001 / math.fsum(row))

    def walk(rng: Any) -> tuple[int, ...]:
        first = rng.categorical(list(row))
        return (first, rng.categorical([0.5, 0.5] if first == 0 else HALF))

    got = check_lossless(walk, table, max_new_tokens=2)
    assert got.equal and 0 < got.float_discrepancy < F(1, 2**52)
    assert got.float_tolerance == tolerance_for(2, 2)
    assert got.float_tolerance_basis == basis_for(2, 2)
    lossy = check_lossless(lambda rng: (0, 0), table, max_new_tokens=2)
    assert str(lossy).startswith(
        f"target={table!r}: LOSSY: total-variation distance ~0.875 (more than the float "
        f"tolerance ~{float(tolerance_for(2, 2)):.6g} [{basis_for(2, 2)}]) "
        "over 4 sequences;\n")


def test_a_float_row_read_before_exact_rows_still_counts() -> None:
    """MIXED's float row is the first one read, its exact rows come after."""
    def two(rng: Any) -> tuple[int, ...]:
        return (rng.categorical(HALF), rng.categorical(HALF))

    got = check_lossless(two, MIXED, max_new_tokens=2)
    assert got.equal and got.float_tolerance == tolerance_for(2, 2)


def test_a_float_draw_sets_the_default_tolerance() -> None:
    """Float draws against an exact target; ``D = max(longest path, N)``."""
    def float_coin(rng: Any) -> tuple[int, ...]:
        return (rng.categorical([0.25, 0.75]),)

    def three_draws(rng: Any) -> tuple[int, ...]:
        rng.bernoulli(0.5)
        rng.bernoulli(0.5)
        return (rng.categorical([0.25, 0.75]),)

    assert check_lossless(float_coin, COIN).float_tolerance == tolerance_for(1, 2)
    assert check_lossless(three_draws, COIN).float_tolerance == tolerance_for(3, 2)
    assert check_lossless(float_coin, COIN, max_new_tokens=3).float_tolerance \
        == tolerance_for(3, 2)


def test_without_floats_the_comparison_stays_exact_whatever_the_tolerance() -> None:
    for tolerance in (None, F(1, 2), 0):
        got = check_lossless(fair, COIN, float_tolerance=tolerance)
        assert not got.equal and got.float_tolerance == 0


def test_float_noise_passes_by_default_and_fails_at_tolerance_zero() -> None:
    """``1 - 0.9`` is not the double 0.1: TV ~1e-17 against the target's ``(0.1, 0.9)``."""
    tenth = dr.TableLM.context_free([0.1, 0.9])

    def rounded(rng: Any) -> tuple[int, ...]:
        return (0 if rng.bernoulli(1 - 0.9) else 1,)

    tv = abs(F(1 - 0.9) - F(0.1) / (F(0.1) + F(0.9)))
    assert 0 < tv < tolerance_for(1, 2)
    got = check_lossless(rounded, tenth)
    assert got.equal and not got.identical
    assert got.tv_distance == tv and got.float_discrepancy == tv
    assert got.float_tolerance == tolerance_for(1, 2)
    assert str(got) == (
        "lossless up to float rounding: output law == target law over 2 sequences but for "
        f"float noise of total-variation distance ~{float(tv):.6g} (<= the float tolerance "
        f"~{float(got.float_tolerance):.6g} [{basis_for(1, 2)}]; "
        f"worst sequence (1,): decoder P = ~{float(1 - F(1 - 0.9)):.6g}, target P = "
        f"~{float(F(0.9) / (F(0.1) + F(0.9))):.6g})")  # a tie of |differences|: the larger
    assert assert_lossless(rounded, tenth) == got
    strict = check_lossless(rounded, tenth, float_tolerance=0)
    assert not strict.equal and strict.float_tolerance == 0
    with pytest.raises(AssertionError) as err:
        assert_lossless(rounded, tenth, float_tolerance=0)
    assert str(err.value) == str(strict)


@pytest.mark.parametrize(("program", "kwargs", "error", "message"), [
    (42, {}, InvalidAuditError, "the program must be a callable rng -> outcome (e.g. lambda "
                                "rng: decoder(..., rng).tokens), got 42"),
    (coin, {"float_tolerance": -1}, InvalidParameterError,
     "float_tolerance must lie in [0, None], got -1"),
    (coin, {"float_tolerance": "x"}, InvalidParameterError,
     "float_tolerance must be a number, got 'x'"),
    (coin, {"float_tolerance": True}, InvalidParameterError,
     "float_tolerance must be a number, got True"),
    (coin, {"float_tolerance": float("nan")}, InvalidParameterError,
     "float_tolerance must be finite, got nan"),
])
def test_bad_arguments_are_refused(program: Callable[[Any], Any], kwargs: dict[str, Any],
                                   error: type[Exception], message: str) -> None:
    for check in (check_lossless, assert_lossless):
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            check(program, COIN, **kwargs)
