"""The exact audit over output *strings*, for decoders whose drafter speaks another vocabulary.

A cross-vocabulary decoder (`dsi_ref.decoders.vocab`) is lossless when the law of the string it
outputs — its target ids decoded with the target's tokenizer — is the law of the string the
target generates alone: `target_string_distribution` pushes the target's law of ids
(`dsi_ref.audit.laws.target_distribution`, ``N`` target tokens or until EOS) through
``decode`` and sums the probabilities of the ids that spell the same string.
`check_lossless_strings` compares the two laws exactly (`Fraction`s).

`cross_vocab_pairs` are the toy pairs of the tests, the docs, the benchmark and the audit: a
target and a drafter with different vocabularies, merges on both sides, with and without BOS/EOS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..base.models import LanguageModel, TableLM
from ..base.result import Run
from ..base.tokenizers import Tokenizer
from ..decoders.vocab import cross_vocab_speculative
from .exact import exact_distribution, total_variation
from .laws import target_distribution

__all__ = ["CrossVocabPair", "StringReport", "acceptance", "check_lossless_strings",
           "cross_vocab_pairs", "string_law", "target_string_distribution"]

F = Fraction


def string_law(law: Mapping[Any, Fraction], tokenizer: Tokenizer) -> dict[str, Fraction]:
    """The law of ``tokenizer.decode(ids)`` when ``ids`` follows ``law`` (a law of id tuples,
    or of `Run`s, whose ``tokens`` are read)."""
    out: dict[str, Fraction] = {}
    for ids, prob in law.items():
        text = tokenizer.decode(ids.tokens if isinstance(ids, Run) else ids)
        out[text] = out.get(text, Fraction(0)) + prob
    return out


def target_string_distribution(target: LanguageModel, tokenizer: Tokenizer,
                               prompt: tuple[int, ...], max_new_tokens: int
                               ) -> dict[str, Fraction]:
    """The target's law of output strings: ``max_new_tokens`` target tokens (or until EOS)
    after ``prompt``, decoded."""
    return string_law(target_distribution(target, prompt, max_new_tokens), tokenizer)


@dataclass(frozen=True)
class StringReport:
    """A decoder's law of output strings against the target's.

    Attributes:
        equal: the verdict (the laws are identical as `Fraction`s).
        tv_distance: their total-variation distance.
        worst_string: a string whose probabilities differ most (None when equal).
        decoder_probability, target_probability: its probability under each law.
        outcomes: strings in the support of either law.
        decoder_law, target_law: the two laws.
    """

    equal: bool
    tv_distance: Fraction
    worst_string: str | None
    decoder_probability: Fraction
    target_probability: Fraction
    outcomes: int
    decoder_law: dict[str, Fraction]
    target_law: dict[str, Fraction]

    def __bool__(self) -> bool:
        return self.equal

    def __str__(self) -> str:
        if self.equal:
            return f"lossless over strings: output law == target law over {self.outcomes} strings"
        return (f"LOSSY over strings: TV {self.tv_distance}; P({self.worst_string!r}) = "
                f"{self.decoder_probability} vs target {self.target_probability}")


def check_lossless_strings(program: Callable[[Any], Any], target: LanguageModel,
                           tokenizer: Tokenizer, prompt: tuple[int, ...], max_new_tokens: int
                           ) -> StringReport:
    """The exact law of ``tokenizer.decode(program(rng))`` (ids or a `Run`) against the
    target's law of strings (`target_string_distribution`)."""
    ours = string_law(exact_distribution(program), tokenizer)
    theirs = target_string_distribution(target, tokenizer, prompt, max_new_tokens)
    keys = set(ours) | set(theirs)
    tv = total_variation(ours, theirs)
    worst = max(sorted(keys), key=lambda s: abs(ours.get(s, F(0)) - theirs.get(s, F(0))))
    equal = ours == theirs
    return StringReport(equal, tv, None if equal else worst, ours.get(worst, F(0)),
                        theirs.get(worst, F(0)), len(keys), ours, theirs)


@dataclass(frozen=True)
class CrossVocabPair:
    """A target and a drafter with different vocabularies, their tokenizers and a prompt."""

    name: str
    target: TableLM
    drafter: TableLM
    target_tokenizer: Tokenizer
    drafter_tokenizer: Tokenizer
    prompt: tuple[int, ...]


def _table(vocab_size: int, rows: dict[tuple[int, ...], tuple[Fraction, ...]],
           eos: int | None, name: str) -> TableLM:
    return TableLM(vocab_size=vocab_size, context=1, table=rows, eos=eos, name=name)


def cross_vocab_pairs() -> list[CrossVocabPair]:
    """The toy pairs: ``merges`` (target ``^ a b ab``, drafter ``^ a b ba aa``, both with a BOS
    ``^``, no EOS) and ``eos`` (target ``a b ab $``, drafter ``a b ba bb $``, EOS ``$``). Bigram
    models with rational rows; BOS is never generated, and the target's row after BOS (the start
    of text) differs from its other rows."""
    t1 = Tokenizer(("^", "a", "b", "ab"), bos=0, name="T(^ a b ab)")
    d1 = Tokenizer(("^", "a", "b", "ba", "aa"), bos=0, name="D(^ a b ba aa)")
    z = F(0)
    target1 = _table(4, {
        (): (z, F(1, 3), F(1, 3), F(1, 3)),
        (0,): (z, F(1, 2), F(1, 4), F(1, 4)),
        (1,): (z, F(1, 4), F(1, 4), F(1, 2)),
        (2,): (z, F(1, 3), F(1, 3), F(1, 3)),
        (3,): (z, F(1, 2), F(1, 2), z)}, None, "target(^ a b ab)")
    drafter1 = _table(5, {
        (): (z, F(2, 5), F(1, 5), F(1, 5), F(1, 5)),
        (0,): (z, F(2, 5), F(1, 5), F(1, 5), F(1, 5)),
        (1,): (z, F(1, 5), F(2, 5), F(1, 5), F(1, 5)),
        (2,): (z, F(2, 5), F(1, 5), F(1, 5), F(1, 5)),
        (3,): (z, F(1, 5), F(1, 5), F(2, 5), F(1, 5)),
        (4,): (z, F(1, 5), F(2, 5), F(1, 5), F(1, 5))}, None, "drafter(^ a b ba aa)")
    t2 = Tokenizer(("a", "b", "ab", "$"), eos=3, name="T(a b ab $)")
    d2 = Tokenizer(("a", "b", "ba", "bb", "$"), eos=4, name="D(a b ba bb $)")
    quarter = (F(1, 4),) * 4
    fifth = (F(1, 5),) * 5
    target2 = _table(4, {
        (): (F(1, 2), F(1, 4), F(1, 8), F(1, 8)),
        (0,): quarter,
        (1,): (F(1, 3), z, F(1, 3), F(1, 3)),
        (2,): (F(1, 2), F(1, 4), z, F(1, 4)),
        (3,): quarter}, 3, "target(a b ab $)")
    drafter2 = _table(5, {
        (): (F(2, 5), F(1, 5), F(1, 5), z, F(1, 5)),
        (0,): fifth,
        (1,): (F(1, 5), z, F(2, 5), F(1, 5), F(1, 5)),
        (2,): fifth,
        (3,): (F(2, 5), F(1, 5), z, F(1, 5), F(1, 5)),
        (4,): fifth}, 4, "drafter(a b ba bb $)")
    return [CrossVocabPair("merges", target1, drafter1, t1, d1, (0,)),
            CrossVocabPair("eos", target2, drafter2, t2, d2, ())]


def acceptance(pair: CrossVocabPair, algorithm: str, max_new_tokens: int, lookahead: int
               ) -> dict[str, Fraction]:
    """Exact expectations of a run's counters: ``iterations`` (target forwards), ``drafts``,
    ``accepted``, ``drafter_forwards`` and ``tokens`` (output length: ``max_new_tokens``, or
    fewer after EOS)."""
    names = ("iterations", "drafts", "accepted", "drafter_forwards")

    def program(rng: Any) -> tuple[int, ...]:
        run = cross_vocab_speculative(pair.target, pair.drafter, pair.target_tokenizer,
                                      pair.drafter_tokenizer, pair.prompt, max_new_tokens,
                                      rng, lookahead=lookahead, algorithm=algorithm)
        return (*(run.stats[name] for name in names), len(run.tokens))

    law = exact_distribution(program)
    return {name: sum((prob * counts[i] for counts, prob in law.items()), Fraction(0))
            for i, name in enumerate((*names, "tokens"))}

