"""The exact losslessness audit: a decoder's output law against the target's, as `Fraction`s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..base.models import LanguageModel
from ..decoders.common import check_inputs, model_probs
from ..decoders.verification import argmax
from .exact import Law, exact_distribution, total_variation

__all__ = ["LosslessReport", "assert_lossless", "check_lossless", "target_distribution"]


def target_distribution(target: LanguageModel, prompt: Sequence[int] = (),
                        max_new_tokens: int = 1, *, greedy: bool = False
                        ) -> dict[tuple[int, ...], Fraction]:
    """The exact law of the first ``max_new_tokens`` tokens the target generates after ``prompt``.

    Computed by walking the tree of prefixes (independently of any decoder): a sequence stops at
    EOS or at the budget. ``greedy=True`` gives the temperature-0 sequence (ties: lowest id) with
    probability 1.
    """
    prompt = check_inputs(target, prompt, max_new_tokens)
    law: dict[tuple[int, ...], Fraction] = {}
    stack: list[tuple[tuple[int, ...], Fraction]] = [((), Fraction(1))]
    while stack:
        seq, prob = stack.pop()
        if len(seq) == max_new_tokens or (seq and seq[-1] == target.eos):
            law[seq] = law.get(seq, Fraction(0)) + prob
            continue
        row = model_probs(target, prompt + seq)
        if greedy:
            stack.append((seq + (argmax(row),), prob))
            continue
        for tok, p in enumerate(row):
            if p > 0:
                stack.append((seq + (tok,), prob * (p if isinstance(p, Fraction) else Fraction(p))))
    return law


@dataclass(frozen=True)
class LosslessReport:
    """The result of comparing a decoder's exact output law with the target's.

    Attributes:
        equal: the two laws are identical (exact comparison of `Fraction`s).
        tv_distance: total-variation distance between them.
        worst_sequence: the sequence whose probabilities differ most.
        decoder_probability, target_probability: its probability under each law.
        outcomes: the number of sequences in the support of either law.
        decoder_law, target_law: the laws themselves.
    """

    equal: bool
    tv_distance: Fraction
    worst_sequence: tuple[int, ...] | None
    decoder_probability: Fraction
    target_probability: Fraction
    outcomes: int
    decoder_law: Law
    target_law: Law

    def __bool__(self) -> bool:
        return self.equal

    def __str__(self) -> str:
        if self.equal:
            return f"lossless: output law == target law over {self.outcomes} sequences"
        return (f"LOSSY: total-variation distance {self.tv_distance} "
                f"(~{float(self.tv_distance):.4g}) over {self.outcomes} sequences;\n"
                f"  worst sequence {self.worst_sequence}: decoder P = {self.decoder_probability}"
                f" (~{float(self.decoder_probability):.4g}), target P = "
                f"{self.target_probability} (~{float(self.target_probability):.4g})")


def _tokens(value: Any) -> Any:
    return getattr(value, "tokens", value)


def compare_laws(decoder_law: Law, target_law: Law) -> LosslessReport:
    """A `LosslessReport` for two given laws."""
    support = set(decoder_law) | set(target_law)
    zero = Fraction(0)
    worst = max(support, key=lambda s: (abs(decoder_law.get(s, zero) - target_law.get(s, zero)),
                                        repr(s)), default=None)
    return LosslessReport(
        equal=decoder_law == target_law,
        tv_distance=total_variation(decoder_law, target_law),
        worst_sequence=worst,
        decoder_probability=decoder_law.get(worst, zero),
        target_probability=target_law.get(worst, zero),
        outcomes=len(support),
        decoder_law=decoder_law,
        target_law=target_law,
    )


def check_lossless(program: Callable[[Any], Any], target: LanguageModel,
                   prompt: Sequence[int] = (), max_new_tokens: int = 1, *,
                   greedy: bool = False, **exact_kwargs: Any) -> LosslessReport:
    """Compare the exact law of ``program(rng)`` with ``target_distribution(...)``.

    ``program`` returns the generated tokens (or a `Run`, whose ``tokens`` are used). Keyword
    arguments go to `exact_distribution` (e.g. ``max_paths``); a schedule-dependent program raises
    `ScheduleDependenceError` there.
    """
    law = exact_distribution(lambda rng: _tokens(program(rng)), **exact_kwargs)
    return compare_laws(law, target_distribution(target, prompt, max_new_tokens, greedy=greedy))


def assert_lossless(program: Callable[[Any], Any], target: LanguageModel,
                    prompt: Sequence[int] = (), max_new_tokens: int = 1, *,
                    greedy: bool = False, **exact_kwargs: Any) -> LosslessReport:
    """`check_lossless`, raising `AssertionError` with the report (worst sequence) when lossy."""
    report = check_lossless(program, target, prompt, max_new_tokens, greedy=greedy,
                            **exact_kwargs)
    if not report.equal:
        raise AssertionError(str(report))
    return report
