"""The exact losslessness audit: a decoder's output law against the target's, as `Fraction`s."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, TypeVar

from ..base.errors import InvalidDistributionError
from ..base.models import UNIT_ROUNDOFF, LanguageModel
from ..base.validate import check_number
from ..decoders.common import check_inputs, model_probs
from ..decoders.verification import argmax
from .exact import Law, check_program, exact_law, exact_row, readable, total_variation

__all__ = ["LosslessReport", "assert_lossless", "check_lossless", "default_float_tolerance",
           "target_distribution"]

R = TypeVar("R", bound="LosslessReport")


def target_distribution(target: LanguageModel, prompt: Sequence[int] = (),
                        max_new_tokens: int = 1, *, greedy: bool = False
                        ) -> dict[tuple[int, ...], Fraction]:
    """The exact law of the first ``max_new_tokens`` tokens the target generates after ``prompt``.

    Computed by walking the tree of prefixes (independently of any decoder): a sequence stops at
    EOS or at the budget. ``greedy=True`` gives the temperature-0 sequence (ties: lowest id) with
    probability 1. A float row is read as the exact enumerator reads one
    (`dsi_ref.audit.exact.exact_probabilities`: each float's binary value over their exact sum).
    """
    return _target_walk(target, prompt, max_new_tokens, greedy)[0]


def _target_walk(target: LanguageModel, prompt: Sequence[int], max_new_tokens: int,
                 greedy: bool) -> tuple[dict[tuple[int, ...], Fraction], bool, Fraction]:
    """`target_distribution`, whether a row it read had float entries, and the largest
    ``|Σ row − 1|`` of those rows (exact: the sum of the floats' binary values)."""
    prompt = check_inputs(target, prompt, max_new_tokens)
    inexact = False
    deviation = Fraction(0)
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
        probs, floats = exact_row(row)
        if floats:
            inexact = True
            deviation = max(deviation, abs(_exact_sum(row) - 1))
        for tok, p in enumerate(probs):
            if p > 0:
                stack.append((seq + (tok,), prob * p))
    return law, inexact, deviation


def _exact_sum(row: Sequence[Any]) -> Fraction:
    """The exact sum of a row's entries (a float: its binary value, as `exact_row` reads it)."""
    return sum((Fraction(w) if isinstance(w, numbers.Rational) else Fraction(float(w))
                for w in row), Fraction(0))


@dataclass(frozen=True)
class LosslessReport:
    """The result of comparing a decoder's exact output law with the target's.

    Attributes:
        equal: the verdict, lossless: the two laws are identical (exact comparison of
            `Fraction`s), or floats were involved and they differ by float noise only (see
            ``float_tolerance``).
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
        float_tolerance: the total-variation distance accepted as float noise: 0 (an exact
            comparison) unless a row or a draw was a float (see `check_lossless`).
        float_discrepancy: the TV distance accepted as float noise (0 when the laws are
            identical); reported apart from the verdict.
        float_tolerance_basis: where ``float_tolerance`` came from, for the message: the terms
            of `default_float_tolerance` (choices, vocabulary), ``"as given"`` for a
            ``float_tolerance=`` of the caller, or ``""`` (an exact comparison, or a report of
            `compare_laws`).
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
    float_tolerance: Fraction = Fraction(0)
    float_discrepancy: Fraction = Fraction(0)
    float_tolerance_basis: str = ""

    #: What an outcome is called in the message (`StringReport` says ``"string"``).
    unit: ClassVar[str] = "sequence"

    def __bool__(self) -> bool:
        return self.equal

    @property
    def identical(self) -> bool:
        """The two laws are identical as `Fraction`s (no float noise either)."""
        return self.decoder_law == self.target_law

    def __str__(self) -> str:
        if self.equal and self.float_discrepancy:
            return (f"lossless up to float rounding: output law == target law over "
                    f"{self.outcomes} {self.unit}s but for float noise of total-variation "
                    f"distance {readable(self.float_discrepancy)} (<= the float tolerance "
                    f"{self._tolerance()}; worst {self.unit} {self.worst_sequence!r}: "
                    f"decoder P = {readable(self.decoder_probability)}, target P = "
                    f"{readable(self.target_probability)})")
        if self.equal:
            return f"lossless: output law == target law over {self.outcomes} {self.unit}s"
        head = f"{self.label}: " if self.label else ""
        ours, theirs = self.decoder_prefix_probability, self.target_prefix_probability
        first = "" if self.first_diverging_prefix is None else (
            f"  first diverging prefix {self.first_diverging_prefix!r}: decoder P(starts with it)"
            f" = {_shown(ours)}, target P = {_shown(theirs)}\n")
        noise = "" if not self.float_tolerance else (
            f" (more than the float tolerance {self._tolerance()})"
            if self.tv_distance > self.float_tolerance else
            f" (within the float tolerance {self._tolerance()}, but on {self.unit}s "
            "the target cannot produce: never float noise)")
        return (f"{head}LOSSY: total-variation distance {_shown(self.tv_distance)}{noise} "
                f"over {self.outcomes} {self.unit}s;\n{first}"
                f"  worst {self.unit} {self.worst_sequence!r}: decoder P = "
                f"{_shown(self.decoder_probability)}, target P = "
                f"{_shown(self.target_probability)}")

    def _tolerance(self) -> str:
        """The float tolerance in a message, with its basis when there is one."""
        text = readable(self.float_tolerance)
        return f"{text} [{self.float_tolerance_basis}]" if self.float_tolerance_basis else text


def _shown(x: Fraction) -> str:
    """A probability in a message: ``1/4 (~0.25)``, or ``~0.405093`` when its fraction is long
    (for display only: `dsi_ref.audit.exact.readable`)."""
    text = readable(x)
    return text if text.startswith("~") else f"{text} (~{float(x):.4g})"


def _prefix_marginals(law: Law, length: int) -> dict[Any, Fraction]:
    marginals: dict[Any, Fraction] = {}
    for seq, prob in law.items():
        if len(seq) >= length:
            marginals[seq[:length]] = marginals.get(seq[:length], Fraction(0)) + prob
    return marginals


def first_diverging_prefix(decoder_law: Law, target_law: Law
                           ) -> tuple[Any, Fraction, Fraction] | None:
    """The shortest prefix (first in sorted order among its length) whose probability of starting
    the output differs between two laws of sequences, with that probability under each law.

    The outcomes are tuples (of tokens; a prefix is a tuple) or strings (a prefix is a string:
    the first diverging characters). ``None`` when no prefix differs (then the laws are equal:
    ``P(X = s)`` is ``P(X starts with s)`` minus the mass of the one-token extensions of ``s``)
    or the outcomes are neither all tuples nor all strings.
    """
    support = set(decoder_law) | set(target_law)
    if not support or not (all(isinstance(s, tuple) for s in support)
                           or all(isinstance(s, str) for s in support)):
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


def compare_laws(decoder_law: Law, target_law: Law, *, pair: Any = None,
                 float_tolerance: Fraction | float = 0,
                 float_tolerance_basis: str = "") -> LosslessReport:
    """A `LosslessReport` for two given laws (``pair``: as in `check_lossless`).

    ``float_tolerance`` (default 0: an exact comparison) is the TV distance accepted as float
    noise, provided the decoder puts no mass outside the target's support;
    ``float_tolerance_basis`` says where it came from, in the report's message (`check_lossless`
    gives the terms of `default_float_tolerance`, or ``"as given"``).

    Raises:
        InvalidParameterError: ``float_tolerance`` is negative or not a finite number.
    """
    check_number("float_tolerance", float_tolerance, low=0)
    support = set(decoder_law) | set(target_law)
    zero = Fraction(0)
    tolerance = Fraction(float_tolerance)
    tv = total_variation(decoder_law, target_law)
    identical = decoder_law == target_law
    noise = not identical and tv <= tolerance and all(s in target_law for s in decoder_law)
    first = None if identical else first_diverging_prefix(decoder_law, target_law)
    worst = max(support, key=lambda s: (abs(decoder_law.get(s, zero) - target_law.get(s, zero)),
                                        repr(s)), default=None)
    return LosslessReport(
        equal=identical or noise,
        tv_distance=tv,
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
        float_tolerance=tolerance,
        float_discrepancy=tv if noise else zero,
        float_tolerance_basis=float_tolerance_basis if tolerance else "",
    )


#: Float64's unit roundoff ``u = 2^-53`` (`dsi_ref.base.models.UNIT_ROUNDOFF`), exactly.
_U = Fraction(UNIT_ROUNDOFF)
#: Float rounding allowed per choice and vocabulary entry in `default_float_tolerance`:
#: ``2^6 · u = 2^-47`` (a first-order relative error of ``2^5 · V`` roundings, doubled).
ROUNDING_PER_ENTRY = 2**6 * _U


def row_slack(vocab_size: int) -> Fraction:
    """``(V + 1) · u``: how far from 1 the exact sum of a float row a decoder reads may be
    (`dsi_ref.base.models.read_row` guarantees it for every row read through a model's seam)."""
    return (vocab_size + 1) * _U


def default_float_tolerance(longest_path: int, vocab_size: int) -> Fraction:
    """The TV distance `check_lossless` accepts as float noise by default, when floats are
    involved: ``D · (V · 2^-47 + 2 (V + 1) · 2^-53)`` for paths of at most ``D`` choices and a
    vocabulary of ``V`` tokens. About 1.8e-13 for D = 8, V = 3, and the same whatever the
    model's rows: it does not grow with how far from 1 they sum. It was ``D · (V · 2^-47 + 2δ)``
    with ``δ`` the target rows' largest ``|Σ row − 1|``, up to validation's 1e-9, under which
    float32 bugs passed for noise again; before that ``D · (2 · 1e-9 + V · 2^-40)``.

    Derivation: what float64 arithmetic on these rows can do, and no more.

    * Run the program twice on the same float rows: in float64, and in exact arithmetic (each
      entry read as its `Fraction`, the value the engine reads). Coupled choice by choice, their
      laws differ by at most the expected sum over a path's choices of the mass each choice
      moves: at most ``D`` times the largest.
    * A choice's weights (a row, ``min(1, p/q)``, ``(p − q)+``, block verification's ``w_i``
      and ``h_i``, a tree rule's renormalised ``p'``) come from the rows through chains of at
      most ``2^5 · V`` float operations (a sum of ``V`` terms is ``V − 1`` of them; a window or
      a tree repeats a few per draft or sibling), each within relative ``u = 2^-53`` of exact.
      To first order the weights are then within relative ``ε = 2^5 · V · u`` of the exact
      run's, and a categorical or a coin so perturbed moves at most ``2ε`` of mass:
      ``V · 2^-47`` per choice (`ROUNDING_PER_ENTRY`). A difference of two computed values
      (``w·p − q``, ``1 − w``) loses relative accuracy where they nearly cancel, but it then
      weighs a branch whose probability is of the order of what cancelled.
    * The exact run differs from the target's law only where rows do not sum to exactly 1:
      the target's law normalises each row (`dsi_ref.audit.exact.exact_probabilities`), a
      decoder computes with it as it is, and a ratio or a difference of a target row and a
      drafter row that each sum to ``1 ± δ`` is off by a relative ``2δ``: ``2δ`` per choice.
      Every row read through a model's seam sums to 1 within ``δ = (V + 1) · u``
      (`row_slack`): `dsi_ref.base.models.read_row` divides a float row by its float64 sum
      when it is off 1 by more than rounding, which the models (`TableLM`, `FunctionLM`) and
      `dsi_ref.decoders.common.model_probs` all apply. So a row that sums to 1 only within
      validation's 1e-9 costs the tolerance nothing: the decoder never computes with it as it
      is. (`check_lossless` refuses a target whose float rows as read sum to 1 less precisely:
      a model that declares ``prevalidated`` and skips `read_row`.)

    Measured (tests/test_float_models.py computes these figures): every decoder of the
    library, every variant, on float64 models stays 1024 times below the tolerance, and so do
    apart its rounding and the rows' deviation (the same program on the exact values of the
    same rows tells them apart), also on rows that sum to 1 only within 1e-10 to 9e-10; two
    tree rules crash instead on a float ``p == q`` pair, a finding about the rules (the exact
    run on the same rows fails alike). Float32 rounding in a float64 pipeline (drafts drawn
    from float32-rounded ``q``, ``p`` rounded to float32 in the ratio, the residual or block
    verification's weights computed in float32) moves the law by 1e-10 and more on the toy
    models where it changes it, over 512 times the tolerance: it is flagged, whatever the
    rows' deviation from 1 up to validation's 1e-9. The zoo's mutants are at TV >= 0.005.

    A decoder that reads a model's rows elsewhere than through its seam, from a model of its
    own that returns rows summing to 1 only within 1e-9, computes with rows that are not laws:
    that moves its law by about the deviation, which is not float noise (read the rows through
    `model_probs`, or divide them by their sum). For exact laws the tolerance is 0 and the
    comparison stays exact; ``float_tolerance=0`` compares float laws exactly too.
    """
    return max(1, longest_path) * (vocab_size * ROUNDING_PER_ENTRY + 2 * row_slack(vocab_size))


def _default_basis(choices: int, vocab_size: int) -> str:
    """The terms of `default_float_tolerance`, for a report's message."""
    exponent = ROUNDING_PER_ENTRY.denominator.bit_length() - 1
    return (f"default: {max(1, choices)} choices x ({vocab_size} x 2^-{exponent} of float64 "
            f"rounding + 2 x {vocab_size + 1} x 2^-53 of rows read within rounding of 1)")


def check_lossless(program: Callable[[Any], Any], target: LanguageModel,
                   prompt: Sequence[int] = (), max_new_tokens: int = 1, *,
                   greedy: bool = False, pair: Any = None,
                   float_tolerance: Fraction | float | None = None, **exact_kwargs: Any
                   ) -> LosslessReport:
    """Compare the exact law of ``program(rng)`` with ``target_distribution(...)``.

    ``program`` returns the generated tokens (or a `Run`, whose ``tokens`` are used). ``pair``
    names what is checked in the report's message: a model pair (anything with ``name``,
    ``target`` and ``drafter``, e.g. an entry of the plugin's ``default_suite``) or a name; with
    a name or without ``pair``, the message names the target model. Other keyword arguments go to
    `exact_distribution` (e.g. ``max_paths``); a schedule-dependent program raises
    `ScheduleDependenceError` there, and one that draws outside ``rng``
    `NondeterministicProgramError`.

    Float models. Both laws read float rows the same way (each float's binary value over the
    row's exact sum), so a float model's own autoregressive law equals its target law exactly;
    float arithmetic inside a decoder (``min(1, p/q)``, ``(p - q)+``) still rounds. When a row of
    the target or a draw of the program was a float, a TV distance up to ``float_tolerance`` is
    float noise, reported apart (``report.float_discrepancy``), provided the decoder puts no
    mass on a sequence the target cannot produce (a zero stays an exact zero in floats, so that
    is never noise). ``None`` (default) is `default_float_tolerance` for the longest path ``D``
    (at least ``max_new_tokens``) and the target's vocabulary (derived there: float64 rounding,
    ~1e-13 on toy models, under which a float32 rounding does not hide, whatever the rows'
    deviation from summing to 1 that validation accepts; a target whose float rows as read sum
    to 1 less precisely than rounding is refused with `InvalidDistributionError`: see there);
    ``0`` compares exactly. The report says which
    (``float_tolerance_basis``). When no float was involved the comparison is exact whatever
    ``float_tolerance`` says.
    """
    decoder_law, target_law, options = exact_comparison(
        program, target, prompt, max_new_tokens, greedy=greedy, pair=pair,
        float_tolerance=float_tolerance, **exact_kwargs)
    return compare_laws(decoder_law, target_law, **options)


def exact_comparison(program: Callable[[Any], Any], target: LanguageModel,
                     prompt: Sequence[int], max_new_tokens: int, *, greedy: bool, pair: Any,
                     float_tolerance: Fraction | float | None, **exact_kwargs: Any
                     ) -> tuple[Law, Law, dict[str, Any]]:
    """What `check_lossless` compares (its arguments, same meaning and errors): the exact law of
    ``program(rng)``, the target's law, and the keyword arguments of `compare_laws` (the pair,
    the float tolerance and its basis). `dsi_ref.audit.strings.check_lossless_strings` maps both
    laws to strings before comparing them with the same options."""
    check_program(program)
    check_number("float_tolerance", float_tolerance, allow_none=True, low=0)
    exact = exact_law(program, **exact_kwargs)  # a Run counts as its tokens (as_outcome)
    reference, inexact, deviation = _target_walk(target, prompt, max_new_tokens, greedy)
    tolerance: Fraction | float = 0
    basis = ""
    if exact.inexact or inexact:
        if float_tolerance is None:
            if deviation > row_slack(target.vocab_size):
                name = getattr(target, "name", None) or type(target).__name__
                raise InvalidDistributionError(
                    f"the float rows of the target {name!r} sum to 1 only within "
                    f"{float(deviation):.3g} as decoders read them, not within rounding "
                    f"({float(row_slack(target.vocab_size)):.3g}): a model that declares "
                    "prevalidated must return its rows as dsi_ref.base.models.read_row reads "
                    "them (divided by their float64 sum), else the default float tolerance "
                    "cannot tell a decoder's float32 rounding from the rows' own error (or "
                    "pass float_tolerance)")
            choices = max(exact.longest_path, max_new_tokens)
            tolerance = default_float_tolerance(choices, target.vocab_size)
            basis = _default_basis(choices, target.vocab_size)
        else:
            tolerance, basis = float_tolerance, "as given"
    named = pair if pair is not None and not isinstance(pair, str) else _Named(pair, target)
    return exact.law, reference, {"pair": named, "float_tolerance": tolerance,
                                  "float_tolerance_basis": basis}


@dataclass(frozen=True)
class _Named:
    name: str | None
    target: LanguageModel


def assert_lossless(program: Callable[[Any], Any], target: LanguageModel,
                    prompt: Sequence[int] = (), max_new_tokens: int = 1, *,
                    greedy: bool = False, pair: Any = None,
                    float_tolerance: Fraction | float | None = None, **exact_kwargs: Any
                    ) -> LosslessReport:
    """`check_lossless`, raising `AssertionError` with the report when lossy: the pair and the
    models, the first diverging prefix with both probabilities, the worst sequence."""
    return raise_if_lossy(check_lossless(program, target, prompt, max_new_tokens, greedy=greedy,
                                         pair=pair, float_tolerance=float_tolerance,
                                         **exact_kwargs))


def raise_if_lossy(report: R) -> R:
    """``report``, or `AssertionError` with its message when it is not lossless (the ``assert_``
    form of `check_lossless` and of `dsi_ref.audit.strings.check_lossless_strings`)."""
    if not report.equal:
        raise AssertionError(str(report))
    return report
