"""Cross-vocabulary speculation (`dsi_ref.decoders.vocab`): SLEM, TLI and SLRS are lossless over
output strings, exactly; the cross-vocabulary mutants are killed; DSI runs with a drafter of
another vocabulary through its string-level projection."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

import dsi_ref as dr
from dsi_ref.audit.laws import target_distribution
from dsi_ref.audit.strings import (
    acceptance,
    check_lossless_strings,
    cross_vocab_pairs,
    string_law,
    target_string_distribution,
)
from dsi_ref.audit.zoo import (
    CROSS_VOCAB_MUTANTS,
    CrossVocabMutant,
    hunt_cross_vocab,
)
from dsi_ref.base.errors import InvalidParameterError
from dsi_ref.base.tokenizers import Tokenizer
from dsi_ref.decoders.verification import VerifyRule
from dsi_ref.decoders.vocab import (
    CROSS_VOCAB_RUNS,
    block_law,
    cross_vocab_speculative,
    shared_tokens,
    string_level_drafter,
)

PAIRS = {p.name: p for p in cross_vocab_pairs()}


def test_tokenizer_canonical_encoding_decoding_and_every_tokenization() -> None:
    t = Tokenizer(("^", "a", "b", "ab"), bos=0)
    assert t.encode("abba") == (3, 2, 1)
    assert t.encode("ab", add_bos=True) == (0, 3)
    assert t.decode((0, 3, 2, 1)) == "abba"  # BOS skipped
    assert t.tokenizations("aab") == ((1, 1, 2), (1, 3))
    for text in ("", "a", "abab", "bba"):
        assert t.decode(t.encode(text)) == text
        assert t.encode(text) in t.tokenizations(text) or text == ""
    with pytest.raises(InvalidParameterError, match="cannot spell"):
        t.encode("abc")
    with pytest.raises(InvalidParameterError, match="distinct"):
        Tokenizer(("a", "a"))
    with pytest.raises(InvalidParameterError, match="EOS piece"):
        Tokenizer(("a", "ab", "a$"), eos=2)


def test_shared_tokens_are_matched_by_string_not_by_id() -> None:
    pair = PAIRS["eos"]
    assert shared_tokens(pair.drafter_tokenizer, pair.target_tokenizer) == {0: 0, 1: 1, 4: 3}
    pair = PAIRS["merges"]
    assert shared_tokens(pair.drafter_tokenizer, pair.target_tokenizer) == {1: 1, 2: 2}


@pytest.mark.parametrize("algorithm", sorted(CROSS_VOCAB_RUNS))
@pytest.mark.parametrize("pair_name", sorted(PAIRS))
@pytest.mark.parametrize("lookahead", [1, 2])
def test_every_algorithm_is_lossless_over_strings_and_ids(algorithm: str, pair_name: str,
                                                          lookahead: int) -> None:
    pair, n = PAIRS[pair_name], 3

    def program(rng: Any) -> tuple[int, ...]:
        return cross_vocab_speculative(pair.target, pair.drafter, pair.target_tokenizer,
                                       pair.drafter_tokenizer, pair.prompt, n, rng,
                                       lookahead=lookahead, algorithm=algorithm).tokens

    report = check_lossless_strings(program, pair.target, pair.target_tokenizer, pair.prompt, n)
    assert report.equal, str(report)
    assert report.tv_distance == 0 and report.outcomes > 10
    # the stronger statement: the law of the target ids themselves
    assert dr.exact_distribution(program) == target_distribution(pair.target, pair.prompt, n)


def test_the_string_law_sums_the_tokenizations_of_a_string() -> None:
    pair = PAIRS["merges"]  # target pieces: 1 = a, 2 = b, 3 = ab
    ids = target_distribution(pair.target, pair.prompt, 3)
    strings = target_string_distribution(pair.target, pair.target_tokenizer, pair.prompt, 3)
    assert strings["abab"] == ids[(3, 1, 2)] + ids[(1, 2, 3)]  # two tokenizations, 3 tokens
    assert strings["abab"] != ids[(3, 1, 2)] and ids[(1, 2, 3)] > 0
    assert sum(strings.values()) == 1 and len(strings) < len(ids)
    assert string_law({(1, 2): Fraction(1, 2), (3,): Fraction(1, 2)},
                      pair.target_tokenizer) == {"ab": 1}


def test_slrs_proposal_sums_every_drafter_tokenization_of_the_same_target_drafts() -> None:
    pair = PAIRS["merges"]  # drafter pieces: 1 = a, 2 = b, 3 = ba, 4 = aa
    law = block_law(pair.drafter, pair.drafter_tokenizer, pair.target_tokenizer, (0,), 2, 2)
    assert sum(law.values()) == 1
    q = pair.drafter.probs
    # "ba", "baa" (b + aa, ba + a) and "baaa" all start with the target drafts (b, a)
    spellings = [(2, 1), (2, 4), (3, 1), (3, 4)]
    assert law[(2, 1)] == sum(q((0,))[d1] * q((d1,))[d2] for d1, d2 in spellings)
    assert law[(3,)] == q((0,))[1] * q((1,))[2]  # "ab": one target token, the merge


def test_slrs_accepts_at_least_as_much_as_slem_and_every_count_is_exact() -> None:
    pair = PAIRS["merges"]
    table = {a: acceptance(pair, a, 3, 2) for a in ("slem", "slrs", "tli")}
    assert table["slrs"]["accepted"] >= table["slem"]["accepted"]
    assert table["slrs"]["iterations"] <= table["slem"]["iterations"]
    for stats in table.values():
        assert all(isinstance(v, Fraction) for v in stats.values())
        assert 1 <= stats["iterations"] <= 3
        assert stats["accepted"] <= stats["drafts"]


@pytest.mark.parametrize("name", sorted(CROSS_VOCAB_MUTANTS))
def test_every_cross_vocab_mutant_is_killed_over_strings(name: str) -> None:
    kill = hunt_cross_vocab(CROSS_VOCAB_MUTANTS[name])
    assert kill is not None, f"{name} passes the exact audit over strings"
    assert kill.tv_distance > 0 and kill.mutant_probability != kill.target_probability
    assert name in CROSS_VOCAB_MUTANTS[name].run_class.name


def test_the_bos_mutant_is_killed_on_the_pair_with_a_bos_only() -> None:
    mutant = CROSS_VOCAB_MUTANTS["cross-vocab-bos-readded"]
    assert hunt_cross_vocab(mutant, [PAIRS["eos"]]) is None  # no BOS: the step is correct
    kill = hunt_cross_vocab(mutant, [PAIRS["merges"]])
    assert kill is not None and kill.pair == "merges"


@pytest.mark.parametrize("algorithm", sorted(CROSS_VOCAB_RUNS))
def test_hunt_does_not_kill_the_correct_algorithms(algorithm: str) -> None:
    correct = CrossVocabMutant(f"correct-{algorithm}", "none", CROSS_VOCAB_RUNS[algorithm])
    assert hunt_cross_vocab(correct) is None


@pytest.mark.parametrize("verify", ["exact_match", "rejection"])
def test_dsi_with_a_drafter_of_another_vocabulary_through_its_string_level_projection(
        verify: VerifyRule) -> None:
    pair, n = PAIRS["merges"], 3
    projected = string_level_drafter(pair.drafter, pair.drafter_tokenizer, pair.target_tokenizer)
    assert sum(projected.probs((0,))) == 1

    def program(rng: Any) -> tuple[int, ...]:
        return dr.dsi(pair.target, projected, pair.prompt, n, rng, lookahead=2, sp_degree=2,
                      verify=verify).tokens

    report = check_lossless_strings(program, pair.target, pair.target_tokenizer, pair.prompt, n)
    assert report.equal, str(report)


def test_a_sampled_run_counts_its_work() -> None:
    pair = PAIRS["eos"]
    run = cross_vocab_speculative(pair.target, pair.drafter, pair.target_tokenizer,
                                  pair.drafter_tokenizer, pair.prompt, 6, dr.Sampler(3),
                                  lookahead=2, algorithm="slrs")
    assert 1 <= len(run.tokens) <= 6
    assert run.stats["iterations"] == run.stats["target_forwards"] >= 1
    assert run.time == run.stats["drafter_forwards"] * Fraction(1, 10) + run.stats["iterations"]


def test_bad_arguments_are_refused() -> None:
    pair = PAIRS["merges"]
    args = (pair.target, pair.drafter, pair.target_tokenizer, pair.drafter_tokenizer,
            pair.prompt, 2, dr.Sampler(0))
    with pytest.raises(InvalidParameterError, match="algorithm"):
        cross_vocab_speculative(*args, algorithm="nope")
    with pytest.raises(InvalidParameterError, match="tokenizer"):
        cross_vocab_speculative(pair.target, pair.drafter, pair.drafter_tokenizer,
                                pair.drafter_tokenizer, pair.prompt, 2, dr.Sampler(0))
    with pytest.raises(InvalidParameterError, match="lookahead"):
        cross_vocab_speculative(*args, lookahead=0)
