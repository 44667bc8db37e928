"""The exact audit over output *strings*, for decoders whose drafter speaks another vocabulary.

A cross-vocabulary decoder (`dsi_ref.decoders.vocab`) is lossless when the law of the string it
outputs — its target ids decoded with the target's tokenizer — is the law of the string the
target generates alone: `target_string_distribution` pushes the target's law of ids
(`dsi_ref.audit.laws.target_distribution`, ``N`` target tokens or until EOS) through
``decode`` and sums the probabilities of the ids that spell the same string.
`check_lossless_strings` compares the two laws exactly (`Fraction`s), with every option of
`dsi_ref.audit.laws.check_lossless`; `assert_lossless_strings` is its ``assert_`` form.

`cross_vocab_pairs` are the toy pairs of the tests, the docs, the benchmark and the audit: a
target and a drafter with different vocabularies, merges on both sides, with and without BOS/EOS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from fractions import Fraction
from typing import Any, ClassVar

from ..base.models import LanguageModel, TableLM
from ..base.result import Run
from ..base.tokenizers import Tokenizer
from ..decoders.vocab import conditional_law, cross_vocab_speculative
from .exact import Law, exact_distribution
from .laws import (
    LosslessReport,
    compare_laws,
    exact_comparison,
    raise_if_lossy,
    target_distribution,
)

__all__ = ["CrossVocabPair", "StringReport", "acceptance", "assert_lossless_strings",
           "check_lossless_strings", "conditional_law", "cross_vocab_pairs", "string_law",
           "target_string_distribution"]

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
class StringReport(LosslessReport):
    """A decoder's law of output strings against the target's: a `LosslessReport` whose
    outcomes are strings, with both laws of ids as well.

    The fields of `LosslessReport` read over strings: ``worst_sequence`` is the string whose
    probabilities differ most (also ``worst_string``), ``first_diverging_prefix`` the shortest
    string prefix (the first characters) whose probability of starting the output differs,
    ``decoder_law`` and ``target_law`` the laws of strings, ``outcomes`` the strings in the
    support of either.

    Attributes:
        decoder_id_law: the exact law of the decoder's ids (what `exact_distribution` gives).
        target_id_law: the target's law of ids (`target_distribution`).
    """

    decoder_id_law: Law = field(default_factory=dict)
    target_id_law: Law = field(default_factory=dict)

    unit: ClassVar[str] = "string"

    @property
    def worst_string(self) -> Any:
        """``worst_sequence``: the string whose probabilities differ most."""
        return self.worst_sequence


def check_lossless_strings(program: Callable[[Any], Any], target: LanguageModel,
                           tokenizer: Tokenizer, prompt: Sequence[int] = (),
                           max_new_tokens: int = 1, *, greedy: bool = False, pair: Any = None,
                           float_tolerance: Fraction | float | None = None,
                           **exact_kwargs: Any) -> StringReport:
    """`check_lossless` over output strings: the exact law of ``tokenizer.decode(program(rng))``
    (``program`` returns ids or a `Run`) against the target's law of strings
    (`target_string_distribution`).

    Same arguments, options and errors as `check_lossless`: ``greedy``, ``pair`` (named in the
    message), ``float_tolerance`` (the same default: the TV over strings is at most the TV over
    ids), and the keyword arguments of `exact_distribution` (``max_paths``, ``progress``,
    ``merge``, ...). The program is enumerated once: the report holds both laws of strings and
    both laws of ids (``decoder_id_law``, ``target_id_law``).

    >>> import dsi_ref as dr
    >>> T = dr.Tokenizer(("a", "b", "ab"))
    >>> t = dr.TableLM.context_free((F(1, 4), F(1, 4), F(1, 2)))
    >>> r = check_lossless_strings(lambda rng: (rng.categorical(t.probs(())),), t, T)
    >>> r.equal, r.target_law["ab"], r.decoder_id_law[(2,)]
    (True, Fraction(1, 2), Fraction(1, 2))
    """
    decoder_ids, target_ids, options = exact_comparison(
        program, target, prompt, max_new_tokens, greedy=greedy, pair=pair,
        float_tolerance=float_tolerance, **exact_kwargs)
    report = compare_laws(string_law(decoder_ids, tokenizer), string_law(target_ids, tokenizer),
                          **options)
    return StringReport(**{f.name: getattr(report, f.name) for f in fields(LosslessReport)},
                        decoder_id_law=decoder_ids, target_id_law=target_ids)


def assert_lossless_strings(program: Callable[[Any], Any], target: LanguageModel,
                            tokenizer: Tokenizer, prompt: Sequence[int] = (),
                            max_new_tokens: int = 1, *, greedy: bool = False, pair: Any = None,
                            float_tolerance: Fraction | float | None = None,
                            **exact_kwargs: Any) -> StringReport:
    """`check_lossless_strings`, raising `AssertionError` with the report when lossy (the pair
    and the models, the first diverging string prefix, the worst string), as `assert_lossless`
    does over ids."""
    return raise_if_lossy(check_lossless_strings(
        program, target, tokenizer, prompt, max_new_tokens, greedy=greedy, pair=pair,
        float_tolerance=float_tolerance, **exact_kwargs))


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

