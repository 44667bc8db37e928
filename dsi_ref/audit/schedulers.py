"""Schedulers as adversaries: classes of schedulers and the exact check of a decoder against one.

Losslessness of a concurrent decoder is a claim about *every* scheduler of a class. The classes,
from weakest to strongest adversary (docs/design.md):

* ``oblivious`` — fixed latencies and a fixed rule for simultaneous events and for the queue: the
  schedule is a function of nothing random. Checked for both fixed tie rules (first, last).
* ``random`` — latencies drawn independently of content (pass a `Latency` with distributions);
  ties broken by a fixed rule. The latency draws are probabilistic choices of the exact checker.
* ``adaptive`` (history-adaptive) — every tie and every queue choice may depend on the whole
  history delivered so far: committed tokens, delivered drafts, timings. The exact checker
  quantifies over every resolution of every ``choose`` (witness: the shortest path).
* ``content-aware`` — additionally sees the content of forwards still in flight (a draft
  token before it is delivered): DSI samples drafts when their forward starts
  (``sample_drafts_at="start"``) and the checker quantifies as for ``adaptive``.

`check_scheduler_class` returns a `ClassVerdict`: lossless, or the shortest witness;
`minimal_witness` also minimises the budget (the smallest ``max_new_tokens`` that is lossy), and
`DSI_CLAIMS` states, per verification rule, the classes DSI is claimed lossless under (the audit's
``schedulers`` section checks the claim both ways; docs/dsi-walkthrough.md explains it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from ..base.errors import InvalidParameterError, ScheduleDependenceError
from ..base.latency import Latency
from ..base.models import LanguageModel
from ..decoders.dsi import dsi
from ..decoders.verification import VERIFY_RULES, VerifyRule, as_rule
from .exact import Witness, exact_distribution
from .laws import LosslessReport, compare_laws, target_distribution

__all__ = ["DSI_CLAIMS", "SCHEDULER_CLASSES", "ClassVerdict", "SchedulerClass",
           "check_scheduler_class", "default_random_latency", "minimal_witness", "witness_summary"]

SchedulerClass = Literal["oblivious", "random", "adaptive", "content-aware"]
SCHEDULER_CLASSES: tuple[SchedulerClass, ...] = ("oblivious", "random", "adaptive",
                                                 "content-aware")

#: The classes DSI is lossless under, per verification rule. A content-aware scheduler sees a
#: draft before it is delivered and can decide whether its position is verified against the draft
#: or gets a bonus token from p; rejection sampling's output depends on the draft (it is biased
#: towards it), so steering by content changes the law. Exact match commits ``y ~ p`` drawn
#: independently of the draft (and keyed like the bonus), greedy commits ``argmax p``: the draft
#: does not influence the committed token, so no scheduler can.
DSI_CLAIMS: dict[VerifyRule, frozenset[SchedulerClass]] = {
    "rejection": frozenset({"oblivious", "random", "adaptive"}),
    "exact_match": frozenset(SCHEDULER_CLASSES),
    "greedy": frozenset(SCHEDULER_CLASSES),
}
assert set(DSI_CLAIMS) == set(VERIFY_RULES)


@dataclass(frozen=True)
class ClassVerdict:
    """The exact verdict of a decoder against a scheduler class.

    Attributes:
        scheduler_class: the class checked.
        lossless: True when every scheduler of the class gives the target law.
        reports: the law comparison for each fixed scheduler checked (oblivious/random), or the
            one law shared by all schedulers (adaptive/content-aware, when robust).
        witness: for a schedule-dependent decoder, the shortest path to a scheduler choice
            whose options lead to different laws.
        seconds: time the check took.
        max_new_tokens: the budget the verdict is about.
    """

    scheduler_class: SchedulerClass
    lossless: bool
    reports: tuple[LosslessReport, ...]
    witness: Witness | None
    seconds: float
    max_new_tokens: int | None = None

    def __str__(self) -> str:
        if self.witness is not None:
            return f"{self.scheduler_class}: LOSSY under some scheduler\n{self.witness}"
        worst = max(self.reports, key=lambda r: r.tv_distance)
        return f"{self.scheduler_class}: {'lossless' if self.lossless else worst}"


def check_scheduler_class(scheduler_class: SchedulerClass, target: LanguageModel,
                          drafter: LanguageModel, prompt: Sequence[int], max_new_tokens: int,
                          *, decoder: Callable[..., Any] = dsi, greedy: bool = False,
                          **decoder_kwargs: Any) -> ClassVerdict:
    """Check ``decoder`` (default `dsi`) exactly against every scheduler of ``scheduler_class``.

    ``decoder_kwargs`` go to the decoder (``lookahead``, ``sp_degree``, ``latency``, ``verify``,
    ``queue``). For ``random``, pass a ``latency`` with distributions. The reference is the
    target's greedy sequence when ``greedy`` or when the rule is greedy.

    Raises:
        InvalidParameterError: unknown class, or ``random`` with constant latencies.
    """
    if scheduler_class not in SCHEDULER_CLASSES:
        raise InvalidParameterError(f"scheduler_class must be one of {SCHEDULER_CLASSES}, got "
                                    f"{scheduler_class!r}")
    latency = decoder_kwargs.get("latency")
    if scheduler_class == "random" and (latency is None or latency.is_constant):
        raise InvalidParameterError("the 'random' scheduler class draws latencies: pass a "
                                    "latency=Latency(...) with at least one {value: prob} cost")
    greedy = greedy or as_rule(decoder_kwargs.get("verify", "rejection")).greedy
    kwargs = dict(decoder_kwargs)
    if scheduler_class == "content-aware":
        kwargs["sample_drafts_at"] = "start"

    def program(rng: Any) -> tuple[int, ...]:
        return tuple(decoder(target, drafter, prompt, max_new_tokens, rng, **kwargs).tokens)

    reference = target_distribution(target, prompt, max_new_tokens, greedy=greedy)
    start = time.perf_counter()
    if scheduler_class in ("oblivious", "random"):
        reports = tuple(compare_laws(exact_distribution(program, scheduler=policy), reference)
                        for policy in ("first", "last"))
        return ClassVerdict(scheduler_class, all(r.equal for r in reports), reports, None,
                            time.perf_counter() - start, max_new_tokens)
    try:
        law = exact_distribution(program, witness="shortest")
    except ScheduleDependenceError as error:
        return ClassVerdict(scheduler_class, False, (), error.witness,
                            time.perf_counter() - start, max_new_tokens)
    report = compare_laws(law, reference)
    return ClassVerdict(scheduler_class, report.equal, (report,), None,
                        time.perf_counter() - start, max_new_tokens)


def minimal_witness(scheduler_class: SchedulerClass, target: LanguageModel,
                    drafter: LanguageModel, prompt: Sequence[int], max_new_tokens: int,
                    **kwargs: Any) -> ClassVerdict:
    """`check_scheduler_class` at budgets ``1, 2, ..., max_new_tokens``: the verdict at the
    smallest lossy budget (its witness is the shortest path there), else the last verdict.

    The minimal witness is the one to read: fewest tokens, fewest choices before the scheduler's
    decision that changes the law.
    """
    if max_new_tokens < 1:
        raise InvalidParameterError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    verdict: ClassVerdict | None = None
    for budget in range(1, max_new_tokens + 1):
        verdict = check_scheduler_class(scheduler_class, target, drafter, prompt, budget,
                                        **kwargs)
        if not verdict.lossless:
            return verdict
    assert verdict is not None
    return verdict


def witness_summary(witness: Witness) -> str:
    """One line: the choices before the scheduler's decision, its two options, the outcome whose
    probability they change most."""
    path = "; ".join(str(step) for step in witness.path) or "(start)"
    worst, pa, pb = witness.discrepancy
    return (f"after [{path}] the scheduler picks {witness.options[0]} or {witness.options[1]}: "
            f"P{worst} = {pa} vs {pb}")


def default_random_latency(latency: Latency) -> Latency:
    """``latency`` with the target's cost made random: 1 or 2 with probability 1/2 each (the
    drafter keeps its cost), for the ``random`` class."""
    return Latency(drafter=latency.drafter, target={Fraction(1): Fraction(1, 2),
                                                    Fraction(2): Fraction(1, 2)},
                   drafter_first=latency.drafter_first)
