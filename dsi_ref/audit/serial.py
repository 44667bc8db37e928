"""Auditing an engine that does not reproduce a seed: what replaces the determinism check.

`dsi_ref.audit.statistical.statistical_audit` draws a few seeds twice and refuses a sampler
that gives another outcome the second time (`NondeterministicProgramError`): a sampler that
ignores its seed draws from state the audit cannot see, and its samples need not be independent,
which the test assumes. Some correct engines do not reproduce a seed by design: vLLM's
probabilistic drafts draw their noise from an unseeded generator, and its suffix decoding
drafts from a cache of earlier outputs. Such an engine is declared (``reproducible=False``,
with the reason) and audited thus:

1. **The share that reproduces** (`reproduction_share`): the first seeds are drawn again and
   the number that give the same outcome is reported, not judged.
2. **Independence from the previous sample** (`independence_check`), in place of the refusal.
   The samples ``X_1, ..., X_n`` are taken in seed order and split into groups by the first
   token of the sample before (``X_{i-1}[:1]``); each group is audited against the reference
   law with the same G test. A lossless engine whose samples are independent gives every group
   the reference law (which group a draw joins is decided by an earlier draw alone, so each
   group is an i.i.d. sample of the reference), so each group's test keeps its false-alarm
   rate; the groups share ``alpha`` (Bonferroni). Hidden state that carries one sample into the
   next (a cache, a generator shared across requests) changes the law of some group, and this
   is what the test looks for; its power against TV ``>= epsilon`` within a group is reported
   for the smallest group tested.

The main test and the independence test split the audit's ``alpha`` in two halves, so the
false-alarm rate of the whole audit stays ``alpha``.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from .statistical import Alternative, LawLike, achieved_power, audit_counts

__all__ = ["IndependenceReport", "independence_check", "reproduction_share"]

Outcome = Hashable


@dataclass(frozen=True)
class IndependenceReport:
    """The independence test of `independence_check`.

    Attributes:
        rejected: some group's law differs from the reference at the group's share of alpha.
        groups: the number of groups tested (those with at least ``min_size`` samples).
        alpha: the false-alarm rate of the whole test (split over the groups).
        worst_group: the label of the group with the smallest p-value bound.
        worst_p_value: that bound.
        power: the power, against TV ``>= epsilon``, of the smallest group tested.
    """

    rejected: bool
    groups: int
    alpha: float
    worst_group: str
    worst_p_value: float
    power: float

    def __str__(self) -> str:
        verdict = "dependent" if self.rejected else "no dependence found"
        return (f"independence from the previous sample: {verdict} ({self.groups} groups by the "
                f"previous sample's first token, alpha {self.alpha:.0e}; smallest p <= "
                f"{self.worst_p_value:.3g} in group {self.worst_group}; power of the smallest "
                f"group {self.power:.4g})")


def independence_check(outcomes: Sequence[Outcome], reference_law: LawLike, *, alpha: float,
                       epsilon: float, min_size: int = 50) -> IndependenceReport:
    """Audit the samples of each group (by the previous sample's first token) against
    ``reference_law`` at ``alpha`` split over the groups (module docstring)."""
    groups: dict[Any, Counter[Outcome]] = defaultdict(Counter)
    for before, after in itertools.pairwise(outcomes):
        key = tuple(before)[:1] if isinstance(before, tuple) else before
        groups[key][after] += 1
    tested = {k: c for k, c in groups.items() if sum(c.values()) >= min_size}
    if not tested:
        return IndependenceReport(False, 0, alpha, "-", 1.0, 0.0)
    share = alpha / len(tested)
    alternative = Alternative.tv(epsilon)
    worst: tuple[float, str] = (2.0, "-")
    rejected = False
    for key, counts in tested.items():
        report = audit_counts(counts, reference_law, alternative=alternative, alpha=share,
                              on_underpowered="report")
        rejected |= report.rejected
        worst = min(worst, (report.p_value, repr(key)))
    smallest = min(sum(c.values()) for c in tested.values())
    power = achieved_power(reference_law, alternative, smallest, alpha=share)
    return IndependenceReport(rejected, len(tested), alpha, worst[1], worst[0], power)


def reproduction_share(sample_fn: Callable[[int], Any],
                       drawn: Sequence[tuple[int, Outcome]],
                       as_outcome: Callable[[Any], Outcome] = tuple) -> tuple[int, int]:
    """``(reproduced, drawn again)``: how many of the ``(seed, outcome)`` pairs give the same
    outcome when ``sample_fn`` draws the seed again."""
    same = sum(as_outcome(sample_fn(seed)) == outcome for seed, outcome in drawn)
    return same, len(drawn)
