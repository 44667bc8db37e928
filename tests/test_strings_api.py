"""One checking API for ids and strings (issue 24, items 2 and 3): `check_lossless_strings` takes
and returns what `check_lossless` does, plus both laws of ids; `assert_lossless_strings` and the
plugin's fixtures are its ``assert_`` form; the string-level helpers `block_law`,
`shared_tokens` and `conditional_law` are public."""

from __future__ import annotations

from fractions import Fraction as F
from typing import Any

import pytest

import dsi_ref as dr
from dsi_ref.audit.laws import check_lossless
from dsi_ref.audit.strings import cross_vocab_pairs
from dsi_ref.base.errors import InvalidParameterError, PathLimitError

PAIRS = {p.name: p for p in cross_vocab_pairs()}
AB = dr.Tokenizer(("a", "b", "ab"), name="AB")
T3 = dr.TableLM.context_free((F(1, 4), F(1, 4), F(1, 2)), name="t3")


def slrs(pair: Any, n: int) -> Any:
    def program(rng: Any) -> tuple[int, ...]:
        return dr.cross_vocab_speculative(pair.target, pair.drafter, pair.target_tokenizer,
                                          pair.drafter_tokenizer, pair.prompt, n, rng,
                                          lookahead=2, algorithm="slrs").tokens
    return program


def spell_ab_as_two_tokens(rng: Any) -> tuple[int, ...]:
    """Wrong over ids, right over strings: ``ab`` (id 2) is output as ``a`` then ``b``."""
    tok = rng.categorical(T3.probs(()))
    return (0, 1) if tok == 2 else (tok,)


def drop_b(rng: Any) -> tuple[int, ...]:
    """Wrong over strings: ``b`` becomes ``a``, so ``P("a") = 1/2`` instead of ``1/4``."""
    tok = rng.categorical(T3.probs(()))
    return (0,) if tok == 1 else (tok,)


# -- the report ------------------------------------------------------------------------------


def test_a_lossless_decoder_reports_both_laws_of_strings_and_of_ids() -> None:
    pair = PAIRS["merges"]
    report = dr.check_lossless_strings(slrs(pair, 3), pair.target, pair.target_tokenizer,
                                       pair.prompt, 3)
    assert report.equal and report.identical and isinstance(report, dr.LosslessReport)
    assert report.decoder_law == dr.target_string_distribution(
        pair.target, pair.target_tokenizer, pair.prompt, 3)
    # the ids come with it: no second enumeration needed
    assert report.decoder_id_law == dr.exact_distribution(slrs(pair, 3))
    assert report.target_id_law == dr.target_distribution(pair.target, pair.prompt, 3)
    assert report.outcomes == len(report.target_law) < len(report.target_id_law)
    assert str(report) == f"lossless: output law == target law over {report.outcomes} strings"


def test_a_decoder_lossless_over_strings_only_passes_over_strings_and_fails_over_ids() -> None:
    strings = dr.check_lossless_strings(spell_ab_as_two_tokens, T3, AB, (), 1)
    assert strings.equal and strings.decoder_law == {"a": F(1, 4), "b": F(1, 4), "ab": F(1, 2)}
    assert strings.decoder_id_law == {(0,): F(1, 4), (1,): F(1, 4), (0, 1): F(1, 2)}
    assert not check_lossless(spell_ab_as_two_tokens, T3, (), 1).equal


def test_a_lossy_report_names_the_pair_the_first_diverging_prefix_and_the_worst_string(
        ) -> None:
    report = dr.check_lossless_strings(drop_b, T3, AB, (), 1, pair="toy")
    assert not report.equal and report.tv_distance == F(1, 4)
    # strings: P(starts with "a") is 1 for the decoder (a, ab) and 3/4 for the target
    assert report.first_diverging_prefix == "a"
    assert (report.decoder_prefix_probability, report.target_prefix_probability) == (F(1),
                                                                                    F(3, 4))
    # "a" (1/2 vs 1/4) and "b" (0 vs 1/4) tie; the tie goes to the larger text, as for ids
    assert report.worst_string == report.worst_sequence == "b"
    assert str(report).splitlines() == [
        "pair 'toy', target=TableLM(vocab_size=3, context=0, eos=None, name='t3'): LOSSY: "
        "total-variation distance 1/4 (~0.25) over 3 strings;",
        "  first diverging prefix 'a': decoder P(starts with it) = 1 (~1), target P = 3/4 "
        "(~0.75)",
        "  worst string 'b': decoder P = 0 (~0), target P = 1/4 (~0.25)"]


def test_assert_lossless_strings_returns_the_report_or_raises_its_message() -> None:
    ok = dr.assert_lossless_strings(spell_ab_as_two_tokens, T3, AB, max_new_tokens=1)
    assert ok.equal and ok.decoder_law == ok.target_law
    with pytest.raises(AssertionError) as info:
        dr.assert_lossless_strings(drop_b, T3, AB, (), 1, pair="toy")
    assert str(info.value) == str(dr.check_lossless_strings(drop_b, T3, AB, (), 1, pair="toy"))
    assert "first diverging prefix 'a'" in str(info.value)


# -- the options of check_lossless -----------------------------------------------------------


def test_exact_distribution_options_pass_through() -> None:
    pair = PAIRS["eos"]
    with pytest.raises(PathLimitError):
        dr.check_lossless_strings(slrs(pair, 3), pair.target, pair.target_tokenizer,
                                  pair.prompt, 3, max_paths=2)
    merged = dr.check_lossless_strings(slrs(pair, 3), pair.target, pair.target_tokenizer,
                                       pair.prompt, 3)
    plain = dr.check_lossless_strings(slrs(pair, 3), pair.target, pair.target_tokenizer,
                                      pair.prompt, 3, merge=False)
    assert plain.decoder_id_law == merged.decoder_id_law and plain.equal


def test_greedy_compares_with_the_targets_greedy_string() -> None:
    report = dr.check_lossless_strings(lambda rng: (2,), T3, AB, (), 1, greedy=True)
    assert report.equal and report.target_law == {"ab": F(1)}


def test_float_noise_is_reported_apart_as_for_ids() -> None:
    """``0.1 + 0.2`` is not ``0.3``: float noise under the default tolerance, lossy at 0."""
    target = dr.FunctionLM(2, lambda prefix: (0.3, 0.7), name="float")
    tok = dr.Tokenizer(("a", "b"))

    def noisy(rng: Any) -> tuple[int, ...]:
        return (rng.categorical((0.1 + 0.2, 0.7)),)

    default = dr.check_lossless_strings(noisy, target, tok, (), 1)
    ids = check_lossless(noisy, target, (), 1)
    assert default.equal and not default.identical and default.float_discrepancy > 0
    assert (default.float_tolerance, default.float_tolerance_basis) == (
        ids.float_tolerance, ids.float_tolerance_basis)
    assert "lossless up to float rounding" in str(default) and "2 strings" in str(default)
    exact = dr.check_lossless_strings(noisy, target, tok, (), 1, float_tolerance=0)
    assert not exact.equal and exact.tv_distance == default.tv_distance > 0


def test_a_bad_float_tolerance_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="float_tolerance"):
        dr.check_lossless_strings(spell_ab_as_two_tokens, T3, AB, (), 1, float_tolerance=-1)


# -- the plugin ------------------------------------------------------------------------------

pytest_plugins = ["pytester"]

USER_TESTS = '''
from fractions import Fraction as F
import dsi_ref as dr

T3 = dr.TableLM.context_free((F(1, 4), F(1, 4), F(1, 2)))
AB = dr.Tokenizer(("a", "b", "ab"))

def two_tokens(rng):
    tok = rng.categorical(T3.probs(()))
    return (0, 1) if tok == 2 else (tok,)

def test_strings(assert_lossless_strings, check_lossless_strings):
    assert assert_lossless_strings(two_tokens, T3, AB, (), 1).equal
    assert check_lossless_strings(two_tokens, T3, AB, (), 1).decoder_id_law[(0, 1)] == F(1, 2)

def test_wrong(assert_lossless_strings):
    assert_lossless_strings(lambda rng: (0,), T3, AB, (), 1)
'''


def test_the_plugin_provides_the_string_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*LOSSY: total-variation distance 3/4*over 3 strings*"])


# -- the public helpers ----------------------------------------------------------------------


def test_the_string_level_helpers_are_public() -> None:
    from dsi_ref.decoders import vocab

    assert dr.block_law is vocab.block_law and dr.shared_tokens is vocab.shared_tokens
    for name in ("block_law", "shared_tokens", "conditional_law", "sample_fn",
                 "assert_lossless_strings"):
        assert name in dr.__all__ and (getattr(dr, name).__doc__ or "").strip()


def test_conditional_law_by_hand() -> None:
    law = {(0, 1): F(1, 2), (0, 2): F(1, 4), (1,): F(1, 4)}
    assert dr.conditional_law(law, (), 3) == [F(3, 4), F(1, 4), F(0)]
    assert dr.conditional_law(law, [0], 3) == [F(0), F(2, 3), F(1, 3)]
    with pytest.raises(InvalidParameterError, match=r"no block .* continues \(1,\)"):
        dr.conditional_law(law, (1,), 3)   # (1,) has probability 1/4 but stops there
    with pytest.raises(InvalidParameterError, match=r"continues \(2,\)"):
        dr.conditional_law(law, (2,), 3)   # probability 0
    with pytest.raises(InvalidParameterError, match=r"with \[2\], not ids of a vocabulary of 2"):
        dr.conditional_law(law, (0,), 2)
    with pytest.raises(InvalidParameterError, match="vocab_size"):
        dr.conditional_law(law, (), 0)


@pytest.mark.parametrize("depth", [1, 2])
def test_conditional_law_of_block_law_is_the_law_of_the_first_retokenised_target_token(
        depth: int) -> None:
    """Against an independent computation: the exact law of the first target token of the
    re-tokenised text of ``depth`` drafter draws (no `block_law`, no `conditional_law`)."""
    pair = PAIRS["merges"]
    D, T = pair.drafter_tokenizer, pair.target_tokenizer
    context = D.encode("a", add_bos=True)

    def first_target_token(rng: Any) -> int | None:
        drafted: tuple[int, ...] = ()
        for _ in range(depth):
            drafted += (rng.categorical(pair.drafter.probs(context + drafted)),)
        target_ids = T.encode(D.decode(drafted))
        return target_ids[0] if target_ids else None

    law = dr.exact_distribution(first_target_token)
    spelled = 1 - law.get(None, F(0))
    expected = [law.get(t, F(0)) / spelled for t in range(T.vocab_size)]
    blocks = dr.block_law(pair.drafter, D, T, context, depth, 1)
    assert sum(blocks.values()) == 1
    assert dr.conditional_law(blocks, (), T.vocab_size) == expected
    projected = dr.string_level_drafter(pair.drafter, D, T, depth=depth)
    assert list(projected.probs(T.encode("a", add_bos=True))) == expected


def test_shared_tokens_from_the_top_level() -> None:
    pair = PAIRS["eos"]  # drafter a b ba bb $, target a b ab $
    assert dr.shared_tokens(pair.drafter_tokenizer, pair.target_tokenizer) == {0: 0, 1: 1, 4: 3}
