"""Schedulers as adversaries: classes of schedulers and the exact check of a decoder against one.

Losslessness of a concurrent decoder is a claim about *every* scheduler of a class. The classes,
from weakest to strongest adversary (DESIGN.md):

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

`check_scheduler_class` returns a `ClassVerdict`: lossless, or the minimal witness.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .audit import LosslessReport, compare_laws, target_distribution
from .dsi import dsi
from .exact import ScheduleDependenceError, Witness, exact_distribution
from .models import LanguageModel

__all__ = ["SCHEDULER_CLASSES", "ClassVerdict", "SchedulerClass", "check_scheduler_class"]

SchedulerClass = Literal["oblivious", "random", "adaptive", "content-aware"]
SCHEDULER_CLASSES: tuple[SchedulerClass, ...] = ("oblivious", "random", "adaptive",
                                                 "content-aware")


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
    """

    scheduler_class: SchedulerClass
    lossless: bool
    reports: tuple[LosslessReport, ...]
    witness: Witness | None
    seconds: float

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
    ``queue``). For ``random``, pass a ``latency`` with distributions.
    """
    if scheduler_class not in SCHEDULER_CLASSES:
        raise ValueError(f"scheduler_class must be one of {SCHEDULER_CLASSES}, got "
                         f"{scheduler_class!r}")
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
                            time.perf_counter() - start)
    try:
        law = exact_distribution(program, witness="shortest")
    except ScheduleDependenceError as error:
        return ClassVerdict(scheduler_class, False, (), error.witness,
                            time.perf_counter() - start)
    report = compare_laws(law, reference)
    return ClassVerdict(scheduler_class, report.equal, (report,), None,
                        time.perf_counter() - start)
