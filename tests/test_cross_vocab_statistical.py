"""The cross-vocabulary mutants through the statistical harness (issue #15, item 5): each is
flagged by `statistical_audit` at its stated power, over output strings, as the zoo's
same-vocabulary mutants are by `dsi_ref.backends.hf.assisted.negative_controls`; and the three
correct algorithms pass at the same power against the mutants' laws.

The power is stated against each mutant's exact law of strings (`Alternative.of_law`) and must
reach ``1 - POLICY_MISS``; twice the required sample size is drawn (slack beyond the G test's exact
or proven power, as `negative_controls` does)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest

import dsi_ref as dr
from dsi_ref.audit.statistical import (
    POLICY_ALPHA,
    POLICY_MISS,
    Alternative,
    required_samples,
    statistical_audit,
)
from dsi_ref.audit.strings import cross_vocab_pairs, string_law, target_string_distribution
from dsi_ref.audit.zoo import CROSS_VOCAB_MUTANTS, hunt_cross_vocab
from dsi_ref.decoders.vocab import cross_vocab_speculative

N, K = 3, 2
PAIRS = {p.name: p for p in cross_vocab_pairs()}


def _program(pair: Any, **kwargs: Any) -> Callable[[Any], tuple[int, ...]]:
    def program(rng: Any) -> tuple[int, ...]:
        return tuple(cross_vocab_speculative(pair.target, pair.drafter, pair.target_tokenizer,
                                             pair.drafter_tokenizer, pair.prompt, N, rng,
                                             lookahead=K, **kwargs).tokens)
    return program


def _audit(pair: Any, program: Callable[[Any], tuple[int, ...]],
           alternative: dict[str, Fraction], name: str) -> Any:
    reference = target_string_distribution(pair.target, pair.target_tokenizer, pair.prompt, N)
    alt = Alternative.of_law(alternative, name)
    n = required_samples(reference, alt, alpha=POLICY_ALPHA, power=1 - POLICY_MISS)
    assert n is not None and n <= 10_000, n
    return statistical_audit(
        lambda seed: pair.target_tokenizer.decode(program(dr.Sampler(seed))), reference, 2 * n,
        alternative=alt, alpha=POLICY_ALPHA, power=1 - POLICY_MISS)


@pytest.mark.statistical(alpha=1e-9)  # a miss at power 1 - POLICY_MISS
@pytest.mark.parametrize("name", sorted(CROSS_VOCAB_MUTANTS))
def test_every_cross_vocab_mutant_is_flagged_by_the_statistical_harness(name: str) -> None:
    mutant = CROSS_VOCAB_MUTANTS[name]
    kill = hunt_cross_vocab(mutant, max_new_tokens=N, lookahead=K)
    assert kill is not None
    pair = PAIRS[kill.pair]
    program = _program(pair, run_class=mutant.run_class)
    mutant_law = string_law(dr.exact_distribution(program), pair.target_tokenizer)
    report = _audit(pair, program, mutant_law, name)
    assert report.power >= 1 - POLICY_MISS
    assert report.verdict == "lossy", f"{name} on {pair.name} not flagged:\n{report}"


@pytest.mark.statistical(alpha=3e-8)  # three audits at POLICY_ALPHA
@pytest.mark.parametrize("name", sorted(CROSS_VOCAB_MUTANTS))
def test_the_correct_algorithms_pass_at_the_same_power(name: str) -> None:
    mutant = CROSS_VOCAB_MUTANTS[name]
    kill = hunt_cross_vocab(mutant, max_new_tokens=N, lookahead=K)
    assert kill is not None
    pair = PAIRS[kill.pair]
    mutant_law = string_law(dr.exact_distribution(_program(pair, run_class=mutant.run_class)),
                            pair.target_tokenizer)
    for algorithm in ("slem", "tli", "slrs"):
        report = _audit(pair, _program(pair, algorithm=algorithm), mutant_law, name)
        assert report.verdict == "lossless", f"{algorithm} on {pair.name}:\n{report}"
