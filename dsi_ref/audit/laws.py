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
        first_diverging_prefix: the shortest prefix (the first in order among those of its
            length) whose marginal probability — that the output starts with it — differs
            between the laws; ``None`` when they are equal (or the outcomes are not sequences).
        decoder_prefix_probability, target_prefix_probability: that marginal under each law.
        label: who was checked, for the message: the model pair's name and the models' reprs
            (``pair=`` of `check_lossless`), or ``""``.
    """

    equal: bool
    tv_distance: Fraction
    worst_sequence: tuple[int, ...] | None
    decoder_probability: Fraction
    target_probability: Fraction
    outcomes: int
    decoder_law: Law
    target_law: Law
    first_diverging_prefix: tuple[int, ...] | None = None
    decoder_prefix_probability: Fraction = Fraction(0)
    target_prefix_probability: Fraction = Fraction(0)
    label: str = ""

    def __bool__(self) -> bool:
        return self.equal

    def __str__(self) -> str:
        if self.equal:
            return f"lossless: output law == target law over {self.outcomes} sequences"
        head = f"{self.label}: " if self.label else ""
        ours, theirs = self.decoder_prefix_probability, self.target_prefix_probability
        first = "" if self.first_diverging_prefix is None else (
            f"  first diverging prefix {self.first_diverging_prefix}: decoder P(starts with it)"
            f" = {ours} (~{float(ours):.4g}), target P = {theirs} (~{float(theirs):.4g})\n")
        return (f"{head}LOSSY: total-variation distance {self.tv_distance} "
                f"(~{float(self.tv_distance):.4g}) over {self.outcomes} sequences;\n{first}"
                f"  worst sequence {self.worst_sequence}: decoder P = {self.decoder_probability}"
                f" (~{float(self.decoder_probability):.4g}), target P = "
                f"{self.target_probability} (~{float(self.target_probability):.4g})")


def _tokens(value: Any) -> Any:
    return getattr(value, "tokens", value)


def _prefix_marginals(law: Law, length: int) -> dict[tuple[Any, ...], Fraction]:
    marginals: dict[tuple[Any, ...], Fraction] = {}
    for seq, prob in law.items():
        if len(seq) >= length:
            marginals[seq[:length]] = marginals.get(seq[:length], Fraction(0)) + prob
    return marginals


def first_diverging_prefix(decoder_law: Law, target_law: Law
                           ) -> tuple[tuple[Any, ...], Fraction, Fraction] | None:
    """The shortest prefix (first in sorted order among its length) whose probability of starting
    the output differs between two laws of sequences, with that probability under each law.

    ``None`` when no prefix differs (then the laws are equal: ``P(X = s)`` is ``P(X starts with
    s)`` minus the mass of the one-token extensions of ``s``) or the outcomes are not tuples.
    """
    support = set(decoder_law) | set(target_law)
    if not support or not all(isinstance(s, tuple) for s in support):
        return None
    zero = Fraction(0)
    for length in range(max(len(s) for s in support) + 1):
        ours, theirs = _prefix_marginals(decoder_law, length), _prefix_marginals(target_law,
                                                                                  length)
        diverging = [s for s in set(ours) | set(theirs)
                     if ours.get(s, zero) != theirs.get(s, zero)]
        if diverging:
            try:
                first = min(diverging)
            except TypeError:  # tokens that do not compare: order by their text
                first = min(diverging, key=repr)
            return first, ours.get(first, zero), theirs.get(first, zero)
    return None


def _pair_label(pair: Any) -> str:
    if pair is None:
        return ""
    if isinstance(pair, str):
        return f"pair {pair!r}"
    name = getattr(pair, "name", None)
    models = ", ".join(f"{role}={getattr(pair, role)!r}" for role in ("target", "drafter")
                       if getattr(pair, role, None) is not None)
    return ", ".join(part for part in (f"pair {name!r}" if name else "", models)
                     if part) or repr(pair)


def compare_laws(decoder_law: Law, target_law: Law, *, pair: Any = None) -> LosslessReport:
    """A `LosslessReport` for two given laws (``pair``: as in `check_lossless`)."""
    support = set(decoder_law) | set(target_law)
    zero = Fraction(0)
    first = None if decoder_law == target_law else first_diverging_prefix(decoder_law,
                                                                          target_law)
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
        first_diverging_prefix=None if first is None else first[0],
        decoder_prefix_probability=zero if first is None else first[1],
        target_prefix_probability=zero if first is None else first[2],
        label=_pair_label(pair),
    )


def check_lossless(program: Callable[[Any], Any], target: LanguageModel,
                   prompt: Sequence[int] = (), max_new_tokens: int = 1, *,
                   greedy: bool = False, pair: Any = None, **exact_kwargs: Any
                   ) -> LosslessReport:
    """Compare the exact law of ``program(rng)`` with ``target_distribution(...)``.

    ``program`` returns the generated tokens (or a `Run`, whose ``tokens`` are used). ``pair``
    names what is checked in the report's message: a model pair (anything with ``name``,
    ``target`` and ``drafter``, e.g. an entry of the plugin's ``default_suite``) or a name; with
    a name or without ``pair``, the message names the target model. Other keyword arguments go to
    `exact_distribution` (e.g. ``max_paths``); a schedule-dependent program raises
    `ScheduleDependenceError` there.
    """
    law = exact_distribution(lambda rng: _tokens(program(rng)), **exact_kwargs)
    return compare_laws(law, target_distribution(target, prompt, max_new_tokens, greedy=greedy),
                        pair=pair if pair is not None and not isinstance(pair, str)
                        else _Named(pair, target))


@dataclass(frozen=True)
class _Named:
    name: str | None
    target: LanguageModel


def assert_lossless(program: Callable[[Any], Any], target: LanguageModel,
                    prompt: Sequence[int] = (), max_new_tokens: int = 1, *,
                    greedy: bool = False, pair: Any = None, **exact_kwargs: Any
                    ) -> LosslessReport:
    """`check_lossless`, raising `AssertionError` with the report when lossy: the pair and the
    models, the first diverging prefix with both probabilities, the worst sequence."""
    report = check_lossless(program, target, prompt, max_new_tokens, greedy=greedy, pair=pair,
                            **exact_kwargs)
    if not report.equal:
        raise AssertionError(str(report))
    return report
